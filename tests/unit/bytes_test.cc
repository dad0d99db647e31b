#include "common/bytes.h"

#include <gtest/gtest.h>

namespace memcoord {
namespace {

TEST(ParseBytes, AcceptsPlainAndUnits) {
  EXPECT_EQ(*ParseBytes("123"), 123u);
  EXPECT_EQ(*ParseBytes("4KiB"), 4096u);
  EXPECT_EQ(*ParseBytes("2GiB"), 2ULL << 30);
  EXPECT_EQ(*ParseBytes("80GB"), 80'000'000'000ULL);
  EXPECT_EQ(*ParseBytes("80gb"), 80'000'000'000ULL);
  EXPECT_EQ(*ParseBytes(" 1.5 GB "), 1'500'000'000ULL);
  EXPECT_EQ(*ParseBytes("0"), 0u);
  EXPECT_EQ(*ParseBytes("7B"), 7u);
}

TEST(ParseBytes, RejectsGarbageWithANamedReason) {
  for (const char* bad :
       {"", "-5", "-1GB", "GB", "12XB", "1..2GB", "99999999999999999999", "20000000TB", "abc"}) {
    Result<std::uint64_t> r = ParseBytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("accepted"), std::string::npos) << r.status().ToString();
  }
  EXPECT_NE(ParseBytes("-5").status().message().find("negative"), std::string::npos);
}

TEST(FormatBytes, DecimalAndBinary) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(15'775'644'680ULL), "15.78 GB");
  EXPECT_EQ(FormatBytesBinary(3ULL << 29), "1.50 GiB");
}

}  // namespace
}  // namespace memcoord
