#include "coordinator/service/listen_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>

#include "common/coordinator_address.h"

namespace memcoord::coordinator {

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string text(host);
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

Result<HostPort> SplitHostPort(const std::string& address, std::string_view flag) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument(fmt::format("{} must be HOST:PORT (or [IPV6]:PORT), got '{}'", flag, address));
  }
  HostPort out{address.substr(0, colon), address.substr(colon + 1)};
  if (!PortNumber(out.port)) {
    return InvalidArgument(fmt::format(
        "{}: the port of '{}' must be a number from 0 to 65535 (0: any free port)", flag, address));
  }
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  } else if (out.host.find(':') != std::string::npos) {
    return InvalidArgument(
        fmt::format("{}: an IPv6 address needs brackets, as in [::1]:7777; got '{}'", flag, address));
  }
  return out;
}

Status CheckListenPolicy(const std::string& listen, bool has_token, bool insecure) {
  MEMCOORD_ASSIGN_OR_RETURN(HostPort where, SplitHostPort(listen, "--listen"));
  if (has_token || insecure || IsLoopbackHost(where.host)) return Status::Ok();
  return InvalidArgument(fmt::format(
      "refusing to listen on '{}' without authentication: it is not a loopback address (127.0.0.0/8, ::1, "
      "localhost), so anyone who can reach it could trim, set quotas, read the bootstrap store or claim a "
      "rank; pass --token-file (the workers' token) and --admin-token-file (the admin token), or --insecure "
      "to serve it open anyway",
      listen));
}

std::string InsecureWarning(const std::string& listen, bool has_token, bool insecure) {
  if (!insecure || has_token) return {};
  auto where = SplitHostPort(listen, "--listen");
  if (where.ok() && IsLoopbackHost(where->host)) return {};
  return fmt::format(
      "WARNING: --insecure: serving on '{}' WITHOUT AUTHENTICATION. Anyone who can reach this address can "
      "trim every rank, set quotas, read and write the bootstrap store and claim ranks. Use --token-file "
      "and --admin-token-file instead.",
      listen);
}

std::string NormalizeMetricsListen(const std::string& listen) {
  if (listen.empty()) return listen;
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return "127.0.0.1:" + listen;
  if (colon == 0) return "127.0.0.1" + listen;
  return listen;
}

}  // namespace memcoord::coordinator
