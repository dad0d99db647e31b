#include "coordinator/http/request_framing.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>

namespace memcoord::coordinator {
namespace {

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view TrimSpaceOrTab(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// A Content-Length value: digits only; past uint64 it saturates (and is then over any limit).
std::optional<std::uint64_t> LengthValue(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      value = std::numeric_limits<std::uint64_t>::max();
    } else {
      value = value * 10 + digit;
    }
  }
  return value;
}

// What the head's header lines say about the body.
struct HeadFacts {
  std::optional<std::uint64_t> content_length;
  bool bad_length = false;  // not a whole number, or two that differ
  bool transfer_encoding = false;
  bool expects_continue = false;
};

// One header line, without its "\r\n". Names are compared as httplib compares them: case-insensitively,
// the name being everything before the first ':'.
void NoteHeader(std::string_view line, HeadFacts& facts) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = TrimSpaceOrTab(line.substr(colon + 1));
  if (SameIgnoringCase(name, "Content-Length")) {
    const std::optional<std::uint64_t> length = LengthValue(value);
    if (!length || (facts.content_length && *facts.content_length != *length)) facts.bad_length = true;
    facts.content_length = length;
  } else if (SameIgnoringCase(name, "Transfer-Encoding")) {
    facts.transfer_encoding = true;
  } else if (SameIgnoringCase(name, "Expect") && SameIgnoringCase(value, "100-continue")) {
    facts.expects_continue = true;
  }
}

RequestFrame Refused(int status, std::string message) {
  RequestFrame frame;
  frame.kind = RequestFrame::Kind::kRefused;
  frame.status = status;
  frame.message = std::move(message);
  return frame;
}

// The head's length (through its blank line) once `received` holds it whole, with what its headers say.
std::optional<std::size_t> HeadLength(std::string_view received, HeadFacts& facts) {
  std::size_t at = received.find('\n');  // the request line, whatever it holds (httplib judges it)
  if (at == std::string_view::npos) return std::nullopt;
  for (++at;;) {
    const std::size_t end = received.find('\n', at);
    if (end == std::string_view::npos) return std::nullopt;
    const std::string_view line = received.substr(at, end + 1 - at);
    if (line == "\r\n") return end + 1;
    if (line.size() >= 2 && line[line.size() - 2] == '\r') NoteHeader(line.substr(0, line.size() - 2), facts);
    at = end + 1;
  }
}

}  // namespace

RequestFrame FrameRequest(std::string_view received, const FrameLimits& limits) {
  HeadFacts facts;
  const std::optional<std::size_t> head = HeadLength(received, facts);
  if (head ? *head > limits.max_head_bytes : received.size() > limits.max_head_bytes) {
    return Refused(431, fmt::format("the request line and headers are over {} bytes", limits.max_head_bytes));
  }
  if (!head) return RequestFrame{};
  if (facts.transfer_encoding) {
    return Refused(411, "send the request body with a Content-Length (Transfer-Encoding is not accepted)");
  }
  if (facts.bad_length) return Refused(400, "the Content-Length header is not one whole number");
  const std::uint64_t body = facts.content_length.value_or(0);
  if (body > limits.max_body_bytes) {
    return Refused(413, fmt::format("the request body is over {} bytes", limits.max_body_bytes));
  }
  RequestFrame frame;
  frame.head_bytes = *head;
  frame.expects_continue = facts.expects_continue;
  if (received.size() - *head >= body) {
    frame.kind = RequestFrame::Kind::kComplete;
    frame.request_bytes = *head + static_cast<std::size_t>(body);
  }
  return frame;
}

}  // namespace memcoord::coordinator
