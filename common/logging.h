// Logging set-up: one call at program start. Level from MEMCOORD_LOG_LEVEL (trace, debug, info, warn,
// error, off; default warn for libraries and tests, so test output stays readable). Rank, when known,
// prefixes every line so interleaved mpirun output can be told apart.
#pragma once

#include <string>

namespace memcoord {

void SetUpLogging(const std::string& program, int rank = -1);

}  // namespace memcoord
