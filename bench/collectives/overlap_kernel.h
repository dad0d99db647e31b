// The overlap bench's stand-in for one layer's backward on the GPU: a kernel that keeps the device busy for a
// set time (by %globaltimer, so it does not depend on the clock rate) and then writes the layer's gradient.
#pragma once

#include <cstddef>

struct CUstream_st;

namespace memcoord::bench {

// Enqueues on `stream`: busy for `busy_ns`, then data[i] = value for i < count. Returns the launch's
// cudaError_t (0 on success).
int LaunchBusyWrite(float* data, std::size_t count, float value, long long busy_ns, CUstream_st* stream);

}  // namespace memcoord::bench
