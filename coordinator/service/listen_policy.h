// Where the coordinator may listen, and how. The rule: an open coordinator (no token) listens on loopback
// only (127.0.0.0/8, ::1, localhost); anywhere else (0.0.0.0, [::], a host name, a routable address)
// needs a token (--token-file and/or --admin-token-file), or --insecure, which serves anyway with a loud
// warning. /metrics binds loopback unless a host is named. Plain functions: thread-safe, no gRPC here.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace memcoord::coordinator {

// True for "localhost", an IPv4 address in 127.0.0.0/8, "::1" (bracketed or not) and ::ffff:127.x.y.z.
// A host name other than localhost is not resolved: it counts as reachable from the network.
bool IsLoopbackHost(std::string_view host);

struct HostPort {
  std::string host;  // brackets of an IPv6 literal removed; never empty
  std::string port;
};
// Splits "HOST:PORT" or "[V6]:PORT" with PORT 0 to 65535 (gRPC would wrap 99999 to 34463); INVALID_ARGUMENT
// naming `flag` otherwise (":PORT" included).
Result<HostPort> SplitHostPort(const std::string& address, std::string_view flag);

// OK when `listen` may serve with this authentication; INVALID_ARGUMENT naming the address and the flags
// that would allow it otherwise. `insecure` lets a non-loopback address serve without a token.
Status CheckListenPolicy(const std::string& listen, bool has_token, bool insecure);

// The warning --insecure prints when it is what lets the coordinator serve (empty when it is not needed).
std::string InsecureWarning(const std::string& listen, bool has_token, bool insecure);

// /metrics' address: "PORT" and ":PORT" become "127.0.0.1:PORT"; "HOST:PORT" stays as named.
std::string NormalizeMetricsListen(const std::string& listen);

}  // namespace memcoord::coordinator
