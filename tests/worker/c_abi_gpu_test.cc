// The C ABI on a real GPU (label gpu; skips without one): CUDA graph capture through a private pool works,
// capture without one fails at once with a message and leaves the capture intact, device routing puts
// each device's blocks on that device, and cacheInfo counts cached blocks. Run on the H200
// (bench/worker/run_on_gpu.sh).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "worker/memcoord.h"

namespace {

int GpuCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

#define SKIP_WITHOUT_GPU() \
  if (GpuCount() == 0) GTEST_SKIP() << "no usable CUDA device (cudaGetDeviceCount failed or found none)"

class CAbiGpu : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    setenv("MEMCOORD_BACKEND", GetParam(), 1);
    unsetenv("MEMCOORD_COORDINATOR");
    ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    EXPECT_EQ(memcoord_shutdown(), 0);
  }
  cudaStream_t stream_ = nullptr;
};

int OnlyStream(uintptr_t stream, void* user) { return stream == reinterpret_cast<uintptr_t>(user) ? 1 : 0; }

TEST_P(CAbiGpu, CaptureWithoutAPrivatePoolFailsAtOnceAndKeepsTheCapture) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* p = memcoord_torch_malloc(4 << 20, 0, stream_);
  const std::string error = memcoord_last_error();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(error.find("being captured"), std::string::npos) << error;
  EXPECT_NE(error.find("memcoord_begin_allocate_to_pool"), std::string::npos) << error;
  EXPECT_EQ(ended, cudaSuccess) << cudaGetErrorString(ended);  // memcoord did nothing to break it
  if (graph != nullptr) cudaGraphDestroy(graph);
}

TEST_P(CAbiGpu, CaptureIntoAPrivatePoolWorksAndReplays) {
  void* user = stream_;
  ASSERT_EQ(memcoord_begin_allocate_to_pool(0, 7, 1, OnlyStream, user), 0) << memcoord_last_error();
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* a = memcoord_torch_malloc(4 << 20, 0, stream_);  // a miss: the private pool maps memory
  const std::string error = memcoord_last_error();
  if (a != nullptr) cudaMemsetAsync(a, 7, 4 << 20, stream_);
  void* b = a != nullptr ? memcoord_torch_malloc(1 << 20, 0, stream_) : nullptr;
  if (b != nullptr) cudaMemcpyAsync(b, a, 1 << 20, cudaMemcpyDeviceToDevice, stream_);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  ASSERT_EQ(memcoord_end_allocate_to_pool(0, 7, 1), 0) << memcoord_last_error();
  ASSERT_NE(a, nullptr) << error;
  ASSERT_NE(b, nullptr) << memcoord_last_error();
  ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorString(ended);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::vector<unsigned char> host(1 << 20);
  ASSERT_EQ(cudaMemcpy(host.data(), b, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host.front(), 7);
  EXPECT_EQ(host.back(), 7);
  memcoord_device_stats s{};
  s.struct_size = sizeof(s);
  ASSERT_EQ(memcoord_device_stats_get(0, &s), 0);
  EXPECT_EQ(s.pools, 2);  // default + the capture's private pool
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  memcoord_torch_free(a, 4 << 20, 0, stream_);
  memcoord_torch_free(b, 1 << 20, 0, stream_);
  ASSERT_EQ(memcoord_release_pool(0, 7, 1), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_device_stats_get(0, &s), 0);
  EXPECT_EQ(s.pools, 1);
  EXPECT_EQ(s.allocated_bytes, 0u);
}

TEST_P(CAbiGpu, EachDeviceGetsItsOwnMemory) {
  const int n = GpuCount();
  ASSERT_EQ(memcoord_device_count(), n);
  for (int d = 0; d < n; ++d) {
    void* p = memcoord_torch_malloc(2 << 20, d, nullptr);
    ASSERT_NE(p, nullptr) << "device " << d << ": " << memcoord_last_error();
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
    EXPECT_EQ(attributes.device, d);
    memcoord_torch_free(p, 2 << 20, d, nullptr);
  }
  uint64_t released = 0;
  ASSERT_EQ(memcoord_empty_cache(0, &released), 0) << memcoord_last_error();
  EXPECT_GT(released, 0u);
}

// PyTorch's cacheInfo on a real device: with 60% of the free memory cached, the answer is that block (the
// device's free memory is then smaller), and after empty_cache the device's free memory again.
TEST_P(CAbiGpu, CacheInfoAnswersTheLargestCachedBlockWhenTheDeviceHasLessFree) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  const std::size_t big = free_bytes / 10 * 6 / (2 << 20) * (2 << 20);
  void* p = memcoord_torch_malloc(static_cast<std::ptrdiff_t>(big), 0, nullptr);
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  memcoord_torch_free(p, static_cast<std::ptrdiff_t>(big), 0, nullptr);
  uint64_t largest = 0;
  ASSERT_EQ(memcoord_cache_info(0, &largest), 0) << memcoord_last_error();
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  EXPECT_LT(free_bytes, big);
  EXPECT_GE(largest, big);
  ASSERT_EQ(memcoord_empty_cache(0, nullptr), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_cache_info(0, &largest), 0) << memcoord_last_error();
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  EXPECT_GT(largest, big);                                   // the device has it back
  EXPECT_LE(largest, free_bytes + (std::size_t{64} << 20));  // the device's free memory, read just before
}

INSTANTIATE_TEST_SUITE_P(Backends, CAbiGpu, ::testing::Values("cuda-vmm", "cuda"));

}  // namespace
