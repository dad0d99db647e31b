// FrameRequest: where the first HTTP/1.x request in a connection's received bytes ends, so that RequestGate
// (request_gate.h) can wait for a request to arrive whole before a worker thread serves it. The head is read
// as cpp-httplib reads it: a request line, then header lines up to the first line that is exactly "\r\n"
// (a header line not ending in "\r\n" is skipped, as httplib skips it). The body is Content-Length bytes;
// without one there is none (cpp-httplib's own reader would read until the client closes). A transfer
// coding (chunked bodies) is refused: every endpoint's body is a few bytes, sent with a length.
// Pure function of its arguments; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace memcoord::coordinator {

struct FrameLimits {
  std::size_t max_head_bytes = 32 * 1024;  // request line and headers, with their line ends
  std::size_t max_body_bytes = 64 * 1024;
};

struct RequestFrame {
  enum class Kind {
    kIncomplete,  // more bytes are needed
    kComplete,    // the first request_bytes bytes hold one whole request
    kRefused,     // never acceptable: answer `status` with `message` and close
  };
  Kind kind = Kind::kIncomplete;
  std::size_t head_bytes = 0;     // the head's length once it is whole (0 while it is not)
  std::size_t request_bytes = 0;  // kComplete: head and body
  bool expects_continue = false;  // the whole head carries "Expect: 100-continue"
  int status = 0;                 // kRefused: 400, 411, 413 or 431
  std::string message;            // kRefused: why, in a sentence for the client
};

// Frames the request at the start of `received` (bytes of one connection, oldest first). A head past
// max_head_bytes is 431; a Content-Length that is not a whole number, or two that differ, is 400; a body
// past max_body_bytes is 413 as soon as the head says so (before it is read); a Transfer-Encoding is 411.
RequestFrame FrameRequest(std::string_view received, const FrameLimits& limits);

}  // namespace memcoord::coordinator
