#include "common/coordinator_address.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace memcoord {
namespace {

bool IsPort(std::string_view port) {
  const std::optional<int> value = PortNumber(port);
  return value && *value >= 1;
}

// A host name or IPv4 literal: letters, digits, '-', '.', '_'.
bool IsHost(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_';
  });
}

bool IsBracketedV6(std::string_view host) {
  if (host.size() < 3 || host.front() != '[' || host.back() != ']') return false;
  const std::string_view inner = host.substr(1, host.size() - 2);
  return std::all_of(inner.begin(), inner.end(), [](unsigned char c) {
    return std::isxdigit(c) != 0 || c == ':' || c == '.' || c == '%';
  });
}

}  // namespace

std::optional<int> PortNumber(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value > 65535) return std::nullopt;
  return value;
}

Status CheckCoordinatorAddress(std::string_view address, std::string_view source) {
  constexpr std::array<std::string_view, 5> kSchemes = {"dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:"};
  for (std::string_view scheme : kSchemes) {
    if (address.starts_with(scheme) && address.size() > scheme.size()) return Status::Ok();
  }
  const auto colon = address.rfind(':');
  if (colon != std::string_view::npos) {
    const std::string_view host = address.substr(0, colon);
    if ((IsHost(host) || IsBracketedV6(host)) && IsPort(address.substr(colon + 1))) return Status::Ok();
  }
  return InvalidArgument(fmt::format(
      "{} '{}' is not a coordinator address; accepted: HOST:PORT (as in 10.0.0.5:7777 or node1:7777), "
      "[IPV6]:PORT (as in [::1]:7777), or a gRPC target (dns:, ipv4:, ipv6:, unix:, unix-abstract:), with "
      "PORT 1 to 65535",
      source, address));
}

}  // namespace memcoord
