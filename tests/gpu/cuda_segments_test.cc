// Segment backends on a real GPU (cuda: cudaMalloc; cuda-vmm: reserve+map per segment): thousands of
// allocations of mixed sizes, each filled by a kernel and every byte read back before it is released, so
// overlapping or short segments would show; absurd and too-large requests fail with RESOURCE_EXHAUSTED and
// leave the device usable; held_bytes() and DeviceBytesUsedOutside() account for what the backend holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string_view>
#include <vector>

#include "allocator/cuda/cuda_backend.h"
#include "allocator/cuda/cuda_backends.h"
#include "allocator/cuda/cuda_vmm_backend.h"
#include "tests/gpu/gpu_test_support.h"

namespace memcoord {
namespace {

using gpu_test::LaunchCheck;
using gpu_test::LaunchFill;

class CudaSegments : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaSegments, EveryByteOfThousandsOfSegmentsWritesAndReadsBack) {
  MEMCOORD_SKIP_WITHOUT_GPU();
  Result<std::unique_ptr<DeviceBackend>> made = MakeCudaBackend(GetParam(), 0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DeviceBackend& backend = **made;
  gpu_test::TestStream stream;
  gpu_test::MismatchCounter mismatches;
  ASSERT_TRUE(stream.ok() && mismatches.ok());

  struct Live {
    void* ptr;
    std::size_t bytes;
    std::uint32_t seed;
  };
  std::mt19937_64 rng(7);
  std::vector<Live> live;
  std::uint64_t checked_bytes = 0;
  const int kAllocations = 3000;
  for (int i = 0; i < kAllocations; ++i) {
    // cudaMalloc costs 60-90 us a pair, cuda-vmm a few chunk maps: sizes up to 4 MiB keep this a few seconds.
    const std::size_t bytes = gpu_test::MixedSize(rng, 8, 22) + (i % 3);  // odd sizes exercise the tail bytes
    Result<void*> ptr = backend.allocate(bytes);
    ASSERT_TRUE(ptr.ok()) << ptr.status().ToString();
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(*ptr) % 512, 0u);
    const auto seed = static_cast<std::uint32_t>(i + 1);
    MEMCOORD_CUDA_OK(LaunchFill(*ptr, bytes, seed, stream.id()));
    live.push_back({*ptr, bytes, seed});
    if (live.size() > 200 || i == kAllocations - 1) {  // check and release a random half
      std::shuffle(live.begin(), live.end(), rng);
      const std::size_t keep = i == kAllocations - 1 ? 0 : live.size() / 2;
      while (live.size() > keep) {
        const Live block = live.back();
        live.pop_back();
        MEMCOORD_CUDA_OK(LaunchCheck(block.ptr, block.bytes, block.seed, mismatches.get(), stream.id()));
        checked_bytes += block.bytes;
        ASSERT_TRUE(backend.synchronize(stream.id()).ok());
        backend.release(block.ptr, block.bytes);
      }
    }
  }
  EXPECT_EQ(mismatches.Read(), 0u) << "of " << checked_bytes << " bytes checked";
  std::printf("[   INFO   ] %s: %d segments, %llu bytes written and read back\n", GetParam(), kAllocations,
              static_cast<unsigned long long>(checked_bytes));
}

TEST_P(CudaSegments, AbsurdAndTooLargeRequestsAreResourceExhausted) {
  MEMCOORD_SKIP_WITHOUT_GPU();
  Result<std::unique_ptr<DeviceBackend>> made = MakeCudaBackend(GetParam(), 0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DeviceBackend& backend = **made;
  const DeviceInfo info = backend.device_info();
  std::vector<std::size_t> sizes = {std::size_t{1} << 60, ~std::size_t{0},
                                    static_cast<std::size_t>(info.total_bytes) + 1};
  // Below the device's size but above what is free: the driver itself refuses. (cuda-vmm's map-time refusal
  // and its roll-back are tested in cuda_vmm_mapping_test.cc; mapping 140 GB twice would only cost time.)
  if (std::string_view(GetParam()) == "cuda") {
    sizes.push_back(static_cast<std::size_t>(info.total_bytes - (info.total_bytes - info.free_bytes) / 2));
  }
  for (std::size_t bytes : sizes) {
    Result<void*> ptr = backend.allocate(bytes);
    ASSERT_FALSE(ptr.ok()) << bytes;
    EXPECT_EQ(ptr.status().code(), StatusCode::kResourceExhausted) << ptr.status().ToString();
    std::printf("[   INFO   ] %s\n", ptr.status().ToString().c_str());
  }
  EXPECT_EQ(backend.allocate(0).status().code(), StatusCode::kInvalidArgument);
  // Nothing sticky was left behind: a launch-error check and a normal allocation both still succeed.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  Result<void*> ok = backend.allocate(1 << 20);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  backend.release(*ok, 1 << 20);
}

TEST(CudaBackendAccounting, HeldBytesAndMemoryUsedOutside) {
  MEMCOORD_SKIP_WITHOUT_GPU();
  Result<std::unique_ptr<CudaBackend>> made = CudaBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  CudaBackend& backend = **made;
  Result<std::uint64_t> outside_before = DeviceBytesUsedOutside(0, backend.held_bytes());
  ASSERT_TRUE(outside_before.ok()) << outside_before.status().ToString();
  const std::size_t kBytes = std::size_t{1} << 30;
  Result<void*> ptr = backend.allocate(kBytes);
  ASSERT_TRUE(ptr.ok()) << ptr.status().ToString();
  EXPECT_EQ(backend.held_bytes(), kBytes);
  Result<std::uint64_t> outside_during = DeviceBytesUsedOutside(0, backend.held_bytes());
  ASSERT_TRUE(outside_during.ok());
  // Our gigabyte is not counted as outside use (a few MiB of rounding and other threads' noise allowed).
  EXPECT_LT(*outside_during, *outside_before + (std::uint64_t{16} << 20));
  // Memory taken behind the pool's back (here: a raw cudaMalloc) is.
  void* foreign = nullptr;
  MEMCOORD_CUDA_OK(cudaMalloc(&foreign, std::size_t{256} << 20));
  Result<std::uint64_t> outside_foreign = DeviceBytesUsedOutside(0, backend.held_bytes());
  ASSERT_TRUE(outside_foreign.ok());
  EXPECT_GE(*outside_foreign, *outside_during + (std::uint64_t{255} << 20));
  MEMCOORD_CUDA_OK(cudaFree(foreign));
  backend.release(*ptr, kBytes);
  EXPECT_EQ(backend.held_bytes(), 0u);
  std::printf("[   INFO   ] outside the pool: %llu bytes (the CUDA context and others)\n",
              static_cast<unsigned long long>(*outside_before));
  EXPECT_EQ(DeviceBytesUsedOutside(99, 0).status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, CudaSegments, ::testing::Values("cuda", "cuda-vmm"),
                         [](const auto& param_info) {
                           return std::string(param_info.param) == "cuda" ? "cuda" : "cuda_vmm";
                         });

}  // namespace
}  // namespace memcoord
