#include <cuda_runtime.h>

#include "bench/collectives/overlap_kernel.h"

namespace memcoord::bench {
namespace {

__device__ long long GlobalNs() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void BusyWrite(float* data, std::size_t count, float value, long long busy_ns) {
  const long long until = GlobalNs() + busy_ns;
  while (GlobalNs() < until) {
  }
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    data[i] = value;
  }
}

}  // namespace

int LaunchBusyWrite(float* data, std::size_t count, float value, long long busy_ns, CUstream_st* stream) {
  // A few blocks only: the stand-in must leave SMs free for NCCL's kernels, as real backward mostly does not.
  BusyWrite<<<8, 256, 0, stream>>>(data, count, value, busy_ns);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace memcoord::bench
