// Logging set-up: one call at program start. Level from MEMCOORD_LOG_LEVEL (trace, debug, info, warn,
// error, off; default warn for libraries and tests, so test output stays readable). Rank, when known,
// prefixes every line so interleaved mpirun output can be told apart.
#pragma once

#include <string>

namespace memcoord {

void SetUpLogging(const std::string& program, int rank = -1);

// The same for memcoord as a library inside someone else's program (libmemcoord_capi.so: PyTorch, a C++
// trainer): the level and prefix above, and lines go to stderr, never stdout, which belongs to the program
// (spdlog's own default logger writes to stdout at level info). Replaces spdlog's default logger of the
// process once; later calls only set the level and the prefix (a rank known after the worker attached).
void SetUpLibraryLogging(int rank = -1);

}  // namespace memcoord
