// What a pool may be called. Names travel to the coordinator (protobuf strings, which must be UTF-8), into
// JSON snapshots and status tables, and onto command lines, so a pool name is 1 to kMaxPoolNameBytes bytes
// of valid UTF-8 without control characters. Anything else is INVALID_ARGUMENT naming the rule.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace memcoord {

inline constexpr std::size_t kMaxPoolNameBytes = 128;

Status CheckPoolName(std::string_view name);
// The same rule for another kind of name (a worker group's): `what` starts the message ("group name").
Status CheckName(std::string_view name, std::string_view what);

}  // namespace memcoord
