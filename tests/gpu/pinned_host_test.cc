// The pinned-host backend on a real GPU: page-locked buffers a kernel writes through their (unified) address
// and the CPU reads back byte by byte, and that the CPU fills and an asynchronous copy moves to the device;
// requests larger than the machine fail with RESOURCE_EXHAUSTED.
#include <gtest/gtest.h>

#include <cstring>

#include "allocator/cuda/pinned_host_backend.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/gpu/pattern.h"

namespace memcoord {
namespace {

TEST(PinnedHost, KernelWritesCpuReadsAndCopiesRunAsync) {
  MEMCOORD_SKIP_WITHOUT_GPU();
  Result<std::unique_ptr<PinnedHostBackend>> made = PinnedHostBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  PinnedHostBackend& pinned = **made;
  const DeviceInfo info = pinned.device_info();
  EXPECT_EQ(info.kind, "pinned-host");
  EXPECT_FALSE(info.device_memory);
  EXPECT_GT(info.total_bytes, 0u);

  gpu_test::TestStream stream;
  gpu_test::MismatchCounter mismatches;
  ASSERT_TRUE(stream.ok() && mismatches.ok());
  const std::size_t bytes = (std::size_t{64} << 20) + 3;
  Result<void*> buffer = pinned.allocate(bytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  EXPECT_EQ(pinned.held_bytes(), bytes);

  MEMCOORD_CUDA_OK(gpu_test::LaunchFill(*buffer, bytes, 11, stream.id()));
  ASSERT_TRUE(pinned.synchronize(stream.id()).ok());
  const auto* host = static_cast<const std::uint8_t*>(*buffer);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < bytes; ++i) wrong += host[i] != gpu_test::PatternByte(i, 11);
  EXPECT_EQ(wrong, 0u);

  auto* writable = static_cast<std::uint8_t*>(*buffer);
  for (std::size_t i = 0; i < bytes; ++i) writable[i] = gpu_test::PatternByte(i, 12);
  void* device = nullptr;
  MEMCOORD_CUDA_OK(cudaMalloc(&device, bytes));
  MEMCOORD_CUDA_OK(cudaMemcpyAsync(device, *buffer, bytes, cudaMemcpyHostToDevice, stream.get()));
  MEMCOORD_CUDA_OK(gpu_test::LaunchCheck(device, bytes, 12, mismatches.get(), stream.id()));
  EXPECT_TRUE(pinned.stream_idle(stream.id()) || true);  // never blocks, whatever it answers
  ASSERT_TRUE(pinned.synchronize(stream.id()).ok());
  EXPECT_TRUE(pinned.stream_idle(stream.id()));
  EXPECT_EQ(mismatches.Read(), 0u);
  MEMCOORD_CUDA_OK(cudaFree(device));
  pinned.release(*buffer, bytes);
  EXPECT_EQ(pinned.held_bytes(), 0u);

  Result<void*> absurd = pinned.allocate(std::size_t{1} << 60);
  ASSERT_FALSE(absurd.ok());
  EXPECT_EQ(absurd.status().code(), StatusCode::kResourceExhausted) << absurd.status().ToString();
}

}  // namespace
}  // namespace memcoord
