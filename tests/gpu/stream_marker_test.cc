// Stream markers on a real GPU (DeviceBackend::record_marker, CUDA events), and the pool's packing wait
// that uses them (allocator/detail/stream_marks.h):
//   a marker queued between a 20 ms and a 300 ms spin is waited for in about 20 ms, and the stream is still
//   busy afterwards; a query never blocks;
//   a pool at its high-water mark packs a block freed before an earlier miss by waiting for that miss's
//   marker: the miss takes about the block's own 20 ms of work, not the 300 ms queued after it, and counts
//   one packing wait and no whole-stream synchronization.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "allocator/caching_pool.h"
#include "allocator/cuda/cuda_backends.h"
#include "tests/gpu/gpu_test_support.h"

namespace memcoord {
namespace {

using gpu_test::LaunchSpin;

constexpr std::uint64_t kShortSpinNs = 20'000'000;
constexpr std::uint64_t kLongSpinNs = 300'000'000;
constexpr std::size_t kMiB = std::size_t{1} << 20;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

class StreamMarkers : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    MEMCOORD_SKIP_WITHOUT_GPU();
    Result<std::unique_ptr<DeviceBackend>> made = MakeCudaBackend(GetParam(), 0);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    backend_ = std::move(*made);
  }
  std::unique_ptr<DeviceBackend> backend_;
};

TEST_P(StreamMarkers, AWaitStopsAtTheMarkerWhileLaterWorkRuns) {
  gpu_test::TestStream stream;
  ASSERT_TRUE(stream.ok());
  MEMCOORD_CUDA_OK(LaunchSpin(kShortSpinNs, stream.id()));
  const MarkerId marker = backend_->record_marker(stream.id());
  ASSERT_NE(marker, kNoMarker);
  MEMCOORD_CUDA_OK(LaunchSpin(kLongSpinNs, stream.id()));
  const auto queried = std::chrono::steady_clock::now();
  EXPECT_FALSE(backend_->marker_reached(marker));
  EXPECT_LT(MsSince(queried), 5.0) << "a marker query must not block";
  const auto waited = std::chrono::steady_clock::now();
  ASSERT_TRUE(backend_->wait_marker(marker).ok());
  const double wait_ms = MsSince(waited);
  EXPECT_TRUE(backend_->marker_reached(marker));
  EXPECT_FALSE(backend_->stream_idle(stream.id())) << "the 300 ms spin after the marker must still run";
  EXPECT_LT(wait_ms, 150.0) << "the wait went past its marker";
  backend_->release_marker(marker);
  ASSERT_TRUE(backend_->synchronize(stream.id()).ok());
  std::printf("marker wait: %.1f ms (the spin before it: 20 ms; after it: 300 ms)\n", wait_ms);
}

TEST_P(StreamMarkers, PackingWaitsForTheFreedBlocksMarkerNotTheWholeQueue) {
  if (backend_->chunk_bytes() == 0) GTEST_SKIP() << GetParam() << " does not map: no packing";
  gpu_test::TestStream stream;
  ASSERT_TRUE(stream.ok());
  PoolOptions options;
  options.name = "packing";
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;   // exact shortfalls, as pool_packing_streams_test.cc's twin of this test
  options.pack_waits_at_mark = true;  // the wait this test is about (off by default since 2026-12-06)
  double miss_ms = 0;
  {
    CachingPool pool(*backend_, options);
    void* a = *pool.allocate(64 * kMiB, stream.id());
    void* b = *pool.allocate(64 * kMiB, stream.id());
    MEMCOORD_CUDA_OK(LaunchSpin(kShortSpinNs, stream.id()));  // stands for the kernels that use A
    ASSERT_TRUE(pool.deallocate(a).ok());
    void* small = *pool.allocate(4096, stream.id());         // a miss: its marker follows A's last use
    MEMCOORD_CUDA_OK(LaunchSpin(kLongSpinNs, stream.id()));  // later work, not touching A
    const auto started = std::chrono::steady_clock::now();
    auto d = pool.allocate(96 * kMiB, stream.id());  // at the high-water mark: packs A's units
    miss_ms = MsSince(started);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    const PoolStats stats = pool.stats();
    EXPECT_EQ(stats.pack_waits, 1u);
    EXPECT_EQ(stats.pack_stream_syncs, 0u);
    EXPECT_EQ(stats.peak_reserved_bytes, 160 * kMiB + 2 * kMiB);  // A's 64 MiB moved, not grown
    EXPECT_FALSE(backend_->stream_idle(stream.id())) << "packing drained the queue";
    EXPECT_LT(miss_ms, 150.0) << "packing waited past A's marker";
    for (void* p : {b, small, *d}) ASSERT_TRUE(pool.deallocate(p).ok());
  }
  std::printf("miss that packed A: %.1f ms (A's work: 20 ms; queued after it: 300 ms)\n", miss_ms);
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamMarkers, ::testing::Values("cuda", "cuda-vmm"),
                         [](const auto& param_info) {
                           return std::string(param_info.param) == "cuda" ? "cuda" : "cuda_vmm";
                         });

}  // namespace
}  // namespace memcoord
