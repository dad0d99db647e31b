// What a worker accepts as the coordinator's address ($MEMCOORD_COORDINATOR, WorkerOptions::coordinator):
// HOST:PORT, [IPV6]:PORT, or a gRPC target URI (dns:, ipv4:, ipv6:, unix:, unix-abstract:), which gRPC
// itself checks further. PORT is 1 to 65535. Anything else is INVALID_ARGUMENT naming `source` and the
// accepted forms, so a typo fails at init instead of leaving the rank quietly unattached.
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"

namespace memcoord {

Status CheckCoordinatorAddress(std::string_view address, std::string_view source);

// `text` as a TCP port number 0..65535 (decimal digits only), or nothing. Listeners accept 0 (any free
// port); an address to connect to needs 1 or more.
std::optional<int> PortNumber(std::string_view text);

}  // namespace memcoord
