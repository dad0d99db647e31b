// Tokens go into a gRPC metadata value, which gRPC takes only as printable ASCII (any other byte aborts
// the process): CheckToken refuses the rest, naming where the token came from, never the token itself.
#include "common/token.h"

#include <gtest/gtest.h>

#include <string>

namespace memcoord {
namespace {

TEST(Token, PrintableAsciiIsAcceptedAndEverythingElseNamed) {
  EXPECT_TRUE(CheckToken("s3cret-Token_with spaces~!", "test").ok());
  EXPECT_TRUE(CheckToken(std::string(kMaxTokenBytes, 'a'), "test").ok());
  struct Case {
    std::string token;
    std::string expect;
  } cases[] = {
      {"", "MEMCOORD_TOKEN: the token is empty"},
      {std::string(kMaxTokenBytes + 1, 'a'), "the token is 4097 bytes long"},
      {"tok\xff", "holds byte 0xff at position 3"},
      {"tab\there", "holds byte 0x09 at position 3"},
      {std::string("nul\0x", 5), "holds byte 0x00 at position 3"},
      {"caf\xc3\xa9", "holds byte 0xc3 at position 3"},
  };
  for (const Case& c : cases) {
    const Status status = CheckToken(c.token, "MEMCOORD_TOKEN");
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(status.message().find(c.expect), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("printable ASCII (0x20-0x7e)"), std::string::npos) << status.message();
  }
  EXPECT_EQ(CheckToken("secret\x01", "x").message().find("secret"), std::string::npos);  // never echoed
}

}  // namespace
}  // namespace memcoord
