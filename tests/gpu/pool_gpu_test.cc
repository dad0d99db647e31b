// The CachingPool on real GPU memory (cuda and cuda-vmm backends):
//   - the mixed pattern of ../shared/data/README.md (up to 1,000 live blocks, sizes 256 B .. 32 MiB), every
//     block filled by a kernel over its whole rounded size when allocated and every byte checked just before
//     it is freed, so any overlap between live blocks or reuse of a live block shows as mismatches;
//   - trim gives memory back to the driver (cudaMemGetInfo's free bytes rise by what the pool released) and
//     never touches live blocks;
//   - requests the device cannot hold fail cleanly and leave the pool usable.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/cuda/cuda_backends.h"
#include "tests/gpu/gpu_test_support.h"

namespace memcoord {
namespace {

using gpu_test::DeviceFreeBytes;
using gpu_test::LaunchCheck;
using gpu_test::LaunchFill;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

class PoolOnGpu : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    MEMCOORD_SKIP_WITHOUT_GPU();
    Result<std::unique_ptr<DeviceBackend>> made = MakeCudaBackend(GetParam(), 0);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    backend_ = std::move(made).value();
    ASSERT_TRUE(stream_.ok() && mismatches_.ok());
  }
  std::unique_ptr<DeviceBackend> backend_;
  gpu_test::TestStream stream_;
  gpu_test::MismatchCounter mismatches_;
};

TEST_P(PoolOnGpu, MixedPatternEveryByteWrittenAndReadBack) {
  CachingPool pool(*backend_, PoolOptions{.name = "churn"});
  struct Live {
    void* ptr;
    std::size_t bytes;  // as handed out (rounded): all of it belongs to the caller
    std::uint32_t seed;
  };
  std::mt19937_64 rng(42);
  std::vector<Live> live;
  std::uint64_t allocations = 0;
  std::uint64_t checked_bytes = 0;
  const int kOperations = 20000;
  for (int op = 0; op < kOperations; ++op) {
    const bool alloc = live.size() < 1000 && (live.empty() || (rng() & 1) != 0);
    if (alloc) {
      const std::size_t request = gpu_test::MixedSize(rng, 8, 25) + (op % 3);
      Result<void*> ptr = pool.allocate(request, stream_.id());
      ASSERT_TRUE(ptr.ok()) << ptr.status().ToString();
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(*ptr) % 512, 0u);
      Result<std::size_t> size = pool.block_size(*ptr);
      ASSERT_TRUE(size.ok());
      ASSERT_GE(*size, request);
      const auto seed = static_cast<std::uint32_t>(++allocations);
      MEMCOORD_CUDA_OK(LaunchFill(*ptr, *size, seed, stream_.id()));
      live.push_back({*ptr, *size, seed});
    } else {
      const std::size_t i = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
      const Live block = live[i];
      live[i] = live.back();
      live.pop_back();
      MEMCOORD_CUDA_OK(LaunchCheck(block.ptr, block.bytes, block.seed, mismatches_.get(), stream_.id()));
      checked_bytes += block.bytes;
      ASSERT_TRUE(pool.deallocate(block.ptr).ok());
    }
  }
  for (const Live& block : live) {
    MEMCOORD_CUDA_OK(LaunchCheck(block.ptr, block.bytes, block.seed, mismatches_.get(), stream_.id()));
    checked_bytes += block.bytes;
    ASSERT_TRUE(pool.deallocate(block.ptr).ok());
  }
  EXPECT_EQ(mismatches_.Read(), 0u) << "of " << checked_bytes << " bytes";
  const Status invariants = pool.check_invariants();
  EXPECT_TRUE(invariants.ok()) << invariants.ToString();
  const PoolStats stats = pool.stats();
  EXPECT_EQ(stats.allocations, allocations);
  EXPECT_EQ(stats.live_blocks, 0u);
  EXPECT_GT(stats.cache_hits, allocations / 2);
  std::printf(
      "[   INFO   ] %s: %llu allocations, %llu bytes written and read back, %llu cache hits, %llu backend "
      "calls, peak reserved %llu MiB for peak allocated %llu MiB\n",
      GetParam(), static_cast<unsigned long long>(allocations),
      static_cast<unsigned long long>(checked_bytes), static_cast<unsigned long long>(stats.cache_hits),
      static_cast<unsigned long long>(stats.backend_allocations),
      static_cast<unsigned long long>(stats.peak_reserved_bytes / kMiB),
      static_cast<unsigned long long>(stats.peak_allocated_bytes / kMiB));
}

TEST_P(PoolOnGpu, TrimReturnsMemoryToTheDriverAndSparesLiveBlocks) {
  CachingPool pool(*backend_, PoolOptions{.name = "trim"});
  std::vector<void*> blocks;
  for (int i = 0; i < 48; ++i) {  // ~2 GiB in the large arena, plus small blocks
    Result<void*> ptr =
        pool.allocate((std::size_t{40} << 20) + 4096 * static_cast<std::size_t>(i), stream_.id());
    ASSERT_TRUE(ptr.ok()) << ptr.status().ToString();
    blocks.push_back(*ptr);
  }
  for (int i = 0; i < 256; ++i) {
    Result<void*> ptr = pool.allocate(8192 + 512 * static_cast<std::size_t>(i), stream_.id());
    ASSERT_TRUE(ptr.ok()) << ptr.status().ToString();
    blocks.push_back(*ptr);
  }
  const std::size_t keep_bytes = std::size_t{24} << 20;
  Result<void*> keep = pool.allocate(keep_bytes, stream_.id());
  ASSERT_TRUE(keep.ok());
  MEMCOORD_CUDA_OK(LaunchFill(*keep, keep_bytes, 4242, stream_.id()));
  for (void* ptr : blocks) ASSERT_TRUE(pool.deallocate(ptr).ok());

  const std::uint64_t reserved_before = pool.stats().reserved_bytes;
  const std::uint64_t free_before = DeviceFreeBytes();
  const TrimResult trimmed = pool.trim(0);
  const std::uint64_t free_after = DeviceFreeBytes();
  EXPECT_GE(trimmed.released_bytes, reserved_before - keep_bytes - 64 * kMiB);
  EXPECT_EQ(trimmed.reserved_after_bytes, pool.stats().reserved_bytes);
  EXPECT_GE(trimmed.reserved_after_bytes, keep_bytes);
  // The driver sees the memory come back (cudaMalloc rounds segments up, so at least what the pool released).
  EXPECT_GE(free_after - free_before + 2 * kMiB, trimmed.released_bytes)
      << "cudaMemGetInfo free before " << free_before << ", after " << free_after;
  MEMCOORD_CUDA_OK(LaunchCheck(*keep, keep_bytes, 4242, mismatches_.get(), stream_.id()));
  EXPECT_EQ(mismatches_.Read(), 0u) << "trim touched a live block";
  ASSERT_TRUE(pool.deallocate(*keep).ok());
  EXPECT_EQ(pool.trim(0).reserved_after_bytes, 0u);
  const std::uint64_t free_empty = DeviceFreeBytes();
  std::printf(
      "[   INFO   ] %s: reserved %llu MiB -> trim released %llu MiB in %.2f ms; cudaMemGetInfo free +%llu MiB"
      " (%llu MiB free with the pool empty)\n",
      GetParam(), static_cast<unsigned long long>(reserved_before / kMiB),
      static_cast<unsigned long long>(trimmed.released_bytes / kMiB), trimmed.duration_ms,
      static_cast<unsigned long long>((free_after - free_before) / kMiB),
      static_cast<unsigned long long>(free_empty / kMiB));

  // The pool grows again after a trim.
  Result<void*> again = pool.allocate(std::size_t{100} << 20, stream_.id());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  MEMCOORD_CUDA_OK(LaunchFill(*again, std::size_t{100} << 20, 5, stream_.id()));
  MEMCOORD_CUDA_OK(LaunchCheck(*again, std::size_t{100} << 20, 5, mismatches_.get(), stream_.id()));
  EXPECT_EQ(mismatches_.Read(), 0u);
  ASSERT_TRUE(pool.deallocate(*again).ok());
}

TEST_P(PoolOnGpu, RequestsBeyondTheDeviceFailCleanly) {
  CachingPool pool(*backend_, PoolOptions{.name = "oom"});
  Result<void*> small = pool.allocate(1 << 20, stream_.id());
  ASSERT_TRUE(small.ok());
  const DeviceInfo info = backend_->device_info();
  for (std::uint64_t bytes : {info.total_bytes + (std::uint64_t{1} << 30), std::uint64_t{1} << 46}) {
    Result<void*> ptr = pool.allocate(static_cast<std::size_t>(bytes), stream_.id());
    ASSERT_FALSE(ptr.ok());
    EXPECT_EQ(ptr.status().code(), StatusCode::kResourceExhausted) << ptr.status().ToString();
    std::printf("[   INFO   ] %s\n", ptr.status().ToString().c_str());
  }
  Result<void*> absurd = pool.allocate(std::size_t{1} << 60, stream_.id());
  ASSERT_FALSE(absurd.ok());
  EXPECT_TRUE(absurd.status().code() == StatusCode::kInvalidArgument ||
              absurd.status().code() == StatusCode::kResourceExhausted)
      << absurd.status().ToString();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  Result<void*> after = pool.allocate(std::size_t{64} << 20, stream_.id());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_TRUE(pool.deallocate(*after).ok());
  ASSERT_TRUE(pool.deallocate(*small).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, PoolOnGpu, ::testing::Values("cuda", "cuda-vmm"),
                         [](const auto& param_info) {
                           return std::string(param_info.param) == "cuda" ? "cuda" : "cuda_vmm";
                         });

}  // namespace
}  // namespace memcoord
