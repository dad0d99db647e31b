// What an authentication token may hold. Tokens travel in a gRPC metadata value ("authorization: Bearer
// <token>"), which gRPC accepts only as printable ASCII: any other byte makes gRPC abort the process
// ("Illegal header value"), so every place that reads a token checks it first.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace memcoord {

inline constexpr std::size_t kMaxTokenBytes = 4096;

// OK for 1 to kMaxTokenBytes bytes of printable ASCII (0x20-0x7e); otherwise INVALID_ARGUMENT naming
// `source` (where the token came from), the first bad byte and its position, never the token itself.
Status CheckToken(std::string_view token, std::string_view source);

}  // namespace memcoord
