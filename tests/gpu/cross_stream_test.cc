// Cross-stream reuse on a real GPU, built so that a missing wait is caught, not just unlikely:
//   stream A: a 20 ms spin, then a kernel fills block X with pattern A and another checks it;
//   X is freed (on A, with all that still queued) and reused on stream B, where a kernel fills it with
//   pattern B at once. After everything finished X must hold pattern B and A's check must have seen A.
// Without a device-side wait, B's fill runs during A's spin and A's later fill overwrites it, so X ends up
// holding pattern A: every byte mismatches. The control test shows exactly that on the raw backend (no wait),
// then the same sequence with backend.wait_for, then through the CachingPool on cuda and cuda-vmm, which must
// hand X itself to B and make B wait (an event, never a host synchronize).
#include <gtest/gtest.h>

#include <chrono>

#include "allocator/caching_pool.h"
#include "allocator/cuda/cuda_backends.h"
#include "tests/gpu/gpu_test_support.h"

namespace memcoord {
namespace {

using gpu_test::LaunchCheck;
using gpu_test::LaunchFill;
using gpu_test::LaunchSpin;

constexpr std::uint64_t kSpinNs = 20'000'000;  // long enough that B's work surely runs first if it may

struct Streams {
  gpu_test::TestStream a;
  gpu_test::TestStream b;
  gpu_test::MismatchCounter seen_by_a;  // A's check of its own pattern
  gpu_test::MismatchCounter final_b;    // the last check of B's pattern, after everything
  bool ok() const { return a.ok() && b.ok() && seen_by_a.ok() && final_b.ok(); }
};

// Queues A's producer work on `block`.
void Produce(Streams& s, void* block, std::size_t bytes, std::uint32_t seed) {
  MEMCOORD_CUDA_OK(LaunchSpin(kSpinNs, s.a.id()));
  MEMCOORD_CUDA_OK(LaunchFill(block, bytes, seed, s.a.id()));
  MEMCOORD_CUDA_OK(LaunchCheck(block, bytes, seed, s.seen_by_a.get(), s.a.id()));
}

// Queues B's consumer work, waits for the device, then checks that B's pattern is what stayed.
void ConsumeAndVerify(Streams& s, void* block, std::size_t bytes, std::uint32_t seed) {
  MEMCOORD_CUDA_OK(LaunchFill(block, bytes, seed, s.b.id()));
  MEMCOORD_CUDA_OK(cudaDeviceSynchronize());
  MEMCOORD_CUDA_OK(LaunchCheck(block, bytes, seed, s.final_b.get(), s.b.id()));
  MEMCOORD_CUDA_OK(cudaDeviceSynchronize());
}

TEST(CrossStream, ControlWithoutWaitIsDetectedAndWaitForFixesIt) {
  MEMCOORD_SKIP_WITHOUT_GPU();
  Result<std::unique_ptr<DeviceBackend>> made = MakeCudaBackend("cuda", 0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DeviceBackend& backend = **made;
  const std::size_t bytes = std::size_t{8} << 20;
  Result<void*> block = backend.allocate(bytes);
  ASSERT_TRUE(block.ok()) << block.status().ToString();

  {  // the control: no wait, so the race must show
    Streams s;
    ASSERT_TRUE(s.ok());
    Produce(s, *block, bytes, 101);
    ConsumeAndVerify(s, *block, bytes, 202);
    EXPECT_GT(s.seen_by_a.Read() + s.final_b.Read(), 0u) << "the test cannot see a missing wait";
  }
  {  // the same with the backend's device-side wait
    Streams s;
    ASSERT_TRUE(s.ok());
    Produce(s, *block, bytes, 103);
    const auto queued = std::chrono::steady_clock::now();
    ASSERT_TRUE(backend.wait_for(s.b.id(), s.a.id()).ok());
    const double wait_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - queued).count();
    EXPECT_LT(wait_ms, 5.0) << "wait_for must not block the host";
    EXPECT_FALSE(backend.stream_idle(s.a.id()));
    ConsumeAndVerify(s, *block, bytes, 204);
    EXPECT_EQ(s.seen_by_a.Read(), 0u);
    EXPECT_EQ(s.final_b.Read(), 0u);
    EXPECT_TRUE(backend.stream_idle(s.a.id()));
  }
  backend.release(*block, bytes);
}

class PoolCrossStream : public ::testing::TestWithParam<const char*> {};

TEST_P(PoolCrossStream, BlockFreedOnAReusedOnBWaitsForA) {
  MEMCOORD_SKIP_WITHOUT_GPU();
  Result<std::unique_ptr<DeviceBackend>> made = MakeCudaBackend(GetParam(), 0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Streams s;
  ASSERT_TRUE(s.ok());
  int reused = 0;
  const std::size_t sizes[] = {4096, 512 * 1024 + 512, std::size_t{3} << 20, std::size_t{40} << 20};
  std::uint32_t seed = 1000;
  for (std::size_t bytes : sizes) {
    for (int round = 0; round < 3; ++round) {
      // A fresh pool each round: B's own cache is empty, so the pool's only choice is A's block (after a
      // wait). Without per-thread caches: they keep a small block freed on A for A alone (reused only on the
      // same stream), so with them the pool would give B other memory and the race would not be exercised.
      CachingPool pool(**made, PoolOptions{.name = "cross-stream", .thread_cache_bytes = 0});
      Result<void*> x = pool.allocate(bytes, s.a.id());
      ASSERT_TRUE(x.ok()) << x.status().ToString();
      Produce(s, *x, bytes, ++seed);
      const auto freed = std::chrono::steady_clock::now();
      ASSERT_TRUE(pool.deallocate(*x).ok());
      Result<void*> y = pool.allocate(bytes, s.b.id());
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      const double host_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - freed).count();
      EXPECT_LT(host_ms, 5.0) << "free + cross-stream reuse must not block the host on A's 20 ms of work";
      reused += *y == *x;
      ConsumeAndVerify(s, *y, bytes, ++seed);
      ASSERT_TRUE(pool.deallocate(*y).ok());
      EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
    }
  }
  EXPECT_EQ(s.seen_by_a.Read(), 0u) << "B wrote into the block while A still used it";
  EXPECT_EQ(s.final_b.Read(), 0u) << "A's queued work overwrote B's data: B did not wait for A";
  EXPECT_EQ(reused, 12) << "the pool gave B other memory, so the race was not exercised";
  std::printf("[   INFO   ] %s: %d of 12 cross-stream reallocations reused A's block\n", GetParam(), reused);
}

INSTANTIATE_TEST_SUITE_P(Backends, PoolCrossStream, ::testing::Values("cuda", "cuda-vmm"),
                         [](const auto& param_info) {
                           return std::string(param_info.param) == "cuda" ? "cuda" : "cuda_vmm";
                         });

}  // namespace
}  // namespace memcoord
