#include "common/token.h"

#include <fmt/format.h>

namespace memcoord {

Status CheckToken(std::string_view token, std::string_view source) {
  constexpr std::string_view kAccepted = "a token is 1 to 4096 bytes of printable ASCII (0x20-0x7e)";
  if (token.empty()) return InvalidArgument(fmt::format("{}: the token is empty; {}", source, kAccepted));
  if (token.size() > kMaxTokenBytes) {
    return InvalidArgument(
        fmt::format("{}: the token is {} bytes long; {}", source, token.size(), kAccepted));
  }
  for (std::size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c < 0x20 || c > 0x7e) {
      return InvalidArgument(
          fmt::format("{}: the token holds byte {:#04x} at position {}; {}", source, c, i, kAccepted));
    }
  }
  return Status::Ok();
}

}  // namespace memcoord
