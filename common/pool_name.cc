#include "common/pool_name.h"

#include <fmt/format.h>

#include <string>

namespace memcoord {
namespace {

// Length of the UTF-8 sequence at `s` (strict: no overlong forms, no surrogates, at most U+10FFFF), or 0.
std::size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// `name` with every byte outside printable ASCII as \xNN, for the error message.
std::string Printable(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, kMaxPoolNameBytes)) {
    const auto u = static_cast<unsigned char>(c);
    out += u >= 0x20 && u < 0x7F ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  if (name.size() > kMaxPoolNameBytes) out += "...";
  return out;
}

Status Bad(std::string_view kind, std::string_view name, std::string_view what) {
  return InvalidArgument(
      fmt::format("{} '{}' {}; accepted: 1 to {} bytes of UTF-8 text without control characters", kind,
                  Printable(name), what, kMaxPoolNameBytes));
}

}  // namespace

Status CheckPoolName(std::string_view name) { return CheckName(name, "pool name"); }

Status CheckName(std::string_view name, std::string_view kind) {
  if (name.empty()) return Bad(kind, name, "is empty");
  if (name.size() > kMaxPoolNameBytes) return Bad(kind, name, fmt::format("is {} bytes long", name.size()));
  for (std::size_t i = 0; i < name.size();) {
    const std::size_t length = Utf8SequenceLength(name.substr(i));
    if (length == 0) return Bad(kind, name, fmt::format("is not valid UTF-8 at byte {}", i));
    const auto c = static_cast<unsigned char>(name[i]);
    if (length == 1 && (c < 0x20 || c == 0x7F)) {
      return Bad(kind, name, fmt::format("holds a control character at byte {}", i));
    }
    i += length;
  }
  return Status::Ok();
}

}  // namespace memcoord
