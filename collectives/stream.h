// CommStream: a CUDA stream in the collectives' interfaces, as an opaque integer (a cudaStream_t's value;
// 0 is the legacy default stream; the MPI communicator ignores streams). The representation is the
// allocator's StreamId (std::uintptr_t), so a StreamId or a cudaStream_t cast to it passes as is, while
// collectives/ depends on common/ only.
#pragma once

#include <cstdint>

namespace memcoord {

using CommStream = std::uintptr_t;
inline constexpr CommStream kDefaultCommStream = 0;

}  // namespace memcoord
