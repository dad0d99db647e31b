// Helpers shared by the GPU tests: skipping cleanly where no GPU is present at run time (the same binary runs
// on CI machines without one), a non-blocking stream, a device-side mismatch counter, and the mixed size
// distribution of ../shared/data/README.md.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "allocator/cuda/cuda_device.h"
#include "common/cuda_status.h"
#include "tests/gpu/test_kernels.h"

// Skips the current test, naming why, where this process sees no usable CUDA device.
#define MEMCOORD_SKIP_WITHOUT_GPU()                                                                    \
  do {                                                                                                 \
    if (!::memcoord::CudaGpuAvailable()) {                                                             \
      GTEST_SKIP() << "no CUDA GPU at run time (" << ::memcoord::CudaDeviceCount().status().ToString() \
                   << ")";                                                                             \
    }                                                                                                  \
  } while (false)

// Fails the test (fatally) when a CUDA runtime call or a kernel launch returns an error.
#define MEMCOORD_CUDA_OK(expr)                                                   \
  do {                                                                           \
    const ::memcoord::Status memcoord_cuda_status_ =                             \
        ::memcoord::CudaRuntimeStatus(static_cast<int>(expr), #expr);            \
    ASSERT_TRUE(memcoord_cuda_status_.ok()) << memcoord_cuda_status_.ToString(); \
  } while (false)

namespace memcoord::gpu_test {

// A stream that does not synchronize with the legacy default stream, so a missing wait is not hidden.
class TestStream {
 public:
  TestStream() {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) stream_ = nullptr;
  }
  ~TestStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  bool ok() const { return stream_ != nullptr; }
  std::uintptr_t id() const { return reinterpret_cast<std::uintptr_t>(stream_); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A counter in device memory that CheckKernel adds mismatching bytes to.
class MismatchCounter {
 public:
  MismatchCounter() {
    void* memory = nullptr;
    if (cudaMalloc(&memory, sizeof(unsigned long long)) == cudaSuccess)
      counter_ = static_cast<unsigned long long*>(memory);
    if (counter_ != nullptr) cudaMemset(counter_, 0, sizeof(unsigned long long));
  }
  ~MismatchCounter() {
    if (counter_ != nullptr) cudaFree(counter_);
  }
  MismatchCounter(const MismatchCounter&) = delete;
  MismatchCounter& operator=(const MismatchCounter&) = delete;
  bool ok() const { return counter_ != nullptr; }
  unsigned long long* get() const { return counter_; }
  // Waits for the whole device, then reads the count; ~0 when that fails.
  unsigned long long Read() const {
    unsigned long long value = ~0ULL;
    if (cudaDeviceSynchronize() != cudaSuccess) return value;
    if (cudaMemcpy(&value, counter_, sizeof(value), cudaMemcpyDeviceToHost) != cudaSuccess) return ~0ULL;
    return value;
  }

 private:
  unsigned long long* counter_ = nullptr;
};

// (2^k + r) & ~255 with k uniform in [min_log2, max_log2] and r uniform in [0, 2^k): README's mixed sizes.
inline std::size_t MixedSize(std::mt19937_64& rng, int min_log2 = 8, int max_log2 = 26) {
  const int k = std::uniform_int_distribution<int>(min_log2, max_log2)(rng);
  const std::uint64_t r = std::uniform_int_distribution<std::uint64_t>(0, (1ULL << k) - 1)(rng);
  return static_cast<std::size_t>(((1ULL << k) + r) & ~std::uint64_t{255});
}

// Bytes free on the current device now (cudaMemGetInfo); 0 on error.
inline std::uint64_t DeviceFreeBytes() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return free_bytes;
}

}  // namespace memcoord::gpu_test
