// Reading the PEM files of the coordinator's TLS (server: --tls-cert, --tls-key, --tls-client-ca; CLI
// client: MEMCOORD_TLS_CA, MEMCOORD_TLS_CERT, MEMCOORD_TLS_KEY), so a bad path fails at start naming the
// flag or variable and the path, not later as a failed handshake. Plain functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace memcoord::coordinator {

// The whole file. INVALID_ARGUMENT naming `source` (a flag or variable) and `path` when it cannot be read
// or holds no "-----BEGIN " line; `what` says what was expected there ("the server's certificate").
Result<std::string> ReadPemFile(const std::string& path, std::string_view source, std::string_view what);

}  // namespace memcoord::coordinator
