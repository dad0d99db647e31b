// FrameRequest (request_framing.h): where a request ends in a connection's bytes, and which heads are
// refused before their body is read.
#include <string>

#include "coordinator/http/request_framing.h"
#include "gtest/gtest.h"

namespace memcoord::coordinator {
namespace {

using Kind = RequestFrame::Kind;

RequestFrame Frame(const std::string& received, FrameLimits limits = {}) {
  return FrameRequest(received, limits);
}

TEST(RequestFraming, AHeadEndsAtItsFirstEmptyLineAndABodyAfterContentLengthBytes) {
  EXPECT_EQ(Frame("").kind, Kind::kIncomplete);
  EXPECT_EQ(Frame("GET /metr").kind, Kind::kIncomplete);
  EXPECT_EQ(Frame("GET / HTTP/1.1\r\nHost: x\r\n").kind, Kind::kIncomplete);
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  RequestFrame frame = Frame(get);
  EXPECT_EQ(frame.kind, Kind::kComplete);
  EXPECT_EQ(frame.request_bytes, get.size());
  // A pipelined second request is not part of the first.
  EXPECT_EQ(Frame(get + "GET /x HTTP/1.1\r\n").request_bytes, get.size());

  const std::string head = "POST /api/trim HTTP/1.1\r\ncontent-length: 4\r\n\r\n";
  frame = Frame(head + "{}");
  EXPECT_EQ(frame.kind, Kind::kIncomplete);
  EXPECT_EQ(frame.head_bytes, head.size());
  frame = Frame(head + "{}  GET");
  EXPECT_EQ(frame.kind, Kind::kComplete);
  EXPECT_EQ(frame.request_bytes, head.size() + 4);
  // The same length twice is one length.
  EXPECT_EQ(Frame("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length:  1 \r\n\r\nx").kind,
            Kind::kComplete);
  // Lines ending in a bare "\n" are skipped, as httplib skips them: this head has not ended.
  EXPECT_EQ(Frame("GET / HTTP/1.1\nHost: x\n\n").kind, Kind::kIncomplete);
}

TEST(RequestFraming, ExpectContinueIsSeenOnceTheHeadIsWhole) {
  const RequestFrame frame = Frame("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_EQ(frame.kind, Kind::kIncomplete);
  EXPECT_TRUE(frame.expects_continue);
  EXPECT_FALSE(Frame("POST / HTTP/1.1\r\nExpect: 100-continue\r\n").expects_continue);
}

TEST(RequestFraming, HeadsThatCanNeverBeAcceptedAreRefusedBeforeTheirBody) {
  FrameLimits limits;
  limits.max_head_bytes = 64;
  limits.max_body_bytes = 10;
  RequestFrame frame = Frame("GET /" + std::string(70, 'a'), limits);  // no line end yet, already too long
  EXPECT_EQ(frame.kind, Kind::kRefused);
  EXPECT_EQ(frame.status, 431);
  frame = Frame("GET / HTTP/1.1\r\nX: " + std::string(60, 'a') + "\r\n\r\n", limits);
  EXPECT_EQ(frame.status, 431);
  frame = Frame("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", limits);
  EXPECT_EQ(frame.kind, Kind::kRefused);
  EXPECT_EQ(frame.status, 413);
  EXPECT_NE(frame.message.find("over 10 bytes"), std::string::npos);
  EXPECT_EQ(Frame("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", limits).status, 413);
  for (const char* length : {"2x", "+2", "-1", "", "0x10"}) {
    frame = Frame(std::string("POST / HTTP/1.1\r\nContent-Length: ") + length + "\r\n\r\n", limits);
    EXPECT_EQ(frame.status, 400) << length;
  }
  EXPECT_EQ(Frame("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", limits).status, 400);
  frame = Frame("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", limits);
  EXPECT_EQ(frame.status, 411);
  EXPECT_NE(frame.message.find("Content-Length"), std::string::npos);
}

}  // namespace
}  // namespace memcoord::coordinator
