#include <cuda_runtime.h>

#include "tests/gpu/pattern.h"
#include "tests/gpu/test_kernels.h"

namespace memcoord::gpu_test {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 2048;

unsigned int BlocksFor(std::size_t items) {
  const std::size_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks == 0 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

__global__ void FillKernel(unsigned char* ptr, std::size_t bytes, std::uint32_t seed) {
  const std::size_t words = bytes / 4;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  auto* word_ptr = reinterpret_cast<std::uint32_t*>(ptr);  // blocks are 512-byte aligned
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += stride) {
    word_ptr[w] = PatternWord(w, seed);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::size_t i = words * 4; i < bytes; ++i) ptr[i] = PatternByte(i, seed);
  }
}

__global__ void CheckKernel(const unsigned char* ptr, std::size_t bytes, std::uint32_t seed,
                            unsigned long long* mismatches) {
  const std::size_t words = bytes / 4;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto* word_ptr = reinterpret_cast<const std::uint32_t*>(ptr);
  unsigned long long bad = 0;
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += stride) {
    const std::uint32_t diff = word_ptr[w] ^ PatternWord(w, seed);
    bad += ((diff & 0xFFu) != 0) + ((diff & 0xFF00u) != 0) + ((diff & 0xFF0000u) != 0) +
           ((diff & 0xFF000000u) != 0);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::size_t i = words * 4; i < bytes; ++i) bad += ptr[i] != PatternByte(i, seed);
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

__global__ void SpinKernel(std::uint64_t nanoseconds) {
  std::uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  std::uint64_t now = start;
  while (now - start < nanoseconds) {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
}

cudaStream_t AsStream(std::uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

}  // namespace

int LaunchFill(void* ptr, std::size_t bytes, std::uint32_t seed, std::uintptr_t stream) {
  FillKernel<<<BlocksFor(bytes / 4), kThreads, 0, AsStream(stream)>>>(static_cast<unsigned char*>(ptr), bytes,
                                                                      seed);
  return static_cast<int>(cudaGetLastError());
}

int LaunchCheck(const void* ptr, std::size_t bytes, std::uint32_t seed, unsigned long long* mismatches,
                std::uintptr_t stream) {
  CheckKernel<<<BlocksFor(bytes / 4), kThreads, 0, AsStream(stream)>>>(static_cast<const unsigned char*>(ptr),
                                                                       bytes, seed, mismatches);
  return static_cast<int>(cudaGetLastError());
}

int LaunchSpin(std::uint64_t nanoseconds, std::uintptr_t stream) {
  SpinKernel<<<1, 1, 0, AsStream(stream)>>>(nanoseconds);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace memcoord::gpu_test
