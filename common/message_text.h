// Text from input (a field, a path, a value) as an error message quotes it: whole when short, else its first
// `keep` bytes and its length, so a megabyte-long field does not make a megabyte-long message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace memcoord {

inline std::string ShortForMessage(std::string_view text, std::size_t keep = 80) {
  if (text.size() <= keep) return std::string(text);
  return std::string(text.substr(0, keep)) + "... (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace memcoord
