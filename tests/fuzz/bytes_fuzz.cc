// Fuzzes ParseBytes (common/bytes.h) with arbitrary text. Besides "never crash", checks the contract: an
// accepted size formats without failing, and a plain decimal number parses to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memcoord::Result<std::uint64_t> parsed = memcoord::ParseBytes(text);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // errors must say what was wrong
    return 0;
  }
  (void)memcoord::FormatBytes(*parsed);
  (void)memcoord::FormatBytesBinary(*parsed);
  // Digits only (no unit): the value is the number itself.
  if (!text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string_view::npos) {
    std::uint64_t expected = 0;
    for (char c : text) expected = expected * 10 + static_cast<std::uint64_t>(c - '0');
    if (*parsed != expected) std::abort();
  }
  return 0;
}
