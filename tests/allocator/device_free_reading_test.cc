// A mapping pool reads the device's free memory (cudaMemGetInfo on CUDA) on a miss that maps only when the
// last reading is old or the device is near its reserve; in between it counts what it mapped itself.
#include "allocator/detail/device_free_reading.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "allocator/backend_adaptor.h"
#include "allocator/caching_pool.h"
#include "allocator/trace.h"
#include "allocator/trace_replay.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

using detail::DeviceFreeReading;
using Clock = DeviceFreeReading::Clock;

// Counts how often the device is read. It reports what the virtual device below says, or, with `set_free`,
// exactly `free_bytes` of 32 GiB (so the default reserve is 1 GiB).
class CountingBackend final : public BackendAdaptor {
 public:
  explicit CountingBackend(DeviceBackend& upstream) : BackendAdaptor(upstream) {}
  DeviceInfo device_info() override {
    ++reads;
    DeviceInfo info = upstream().device_info();
    if (set_free) {
      info.total_bytes = 32 * kGiB;
      info.free_bytes = free_bytes;
    }
    return info;
  }
  bool set_free = false;
  std::uint64_t free_bytes = 0;
  int reads = 0;
};

struct ReadingTest : ::testing::Test {
  ReadingTest() { backend.set_free = true; }
  VirtualBackend device{64 * kGiB};
  CountingBackend backend{device};
  const Clock::time_point t0 = Clock::now();
};

TEST_F(ReadingTest, AYoungReadingWithRoomToSpareIsReusedAndCountsWhatThePoolMapped) {
  DeviceFreeReading reading(/*reserve_bytes=*/0);
  backend.free_bytes = 10 * kGiB;
  EXPECT_EQ(reading.shortfall(backend, kGiB, /*pool_reserved=*/0, t0), 0u);
  EXPECT_EQ(backend.reads, 1);
  // The pool maps 7 GiB: the estimate is 3 GiB, which leaves twice the 1 GiB reserve beyond 1 GiB.
  EXPECT_EQ(reading.shortfall(backend, kGiB, 7 * kGiB, t0 + std::chrono::milliseconds(10)), 0u);
  EXPECT_EQ(backend.reads, 1);
  // A trim gave 2 GiB back: the estimate rises with it, still without a reading.
  EXPECT_EQ(reading.shortfall(backend, 3 * kGiB, 5 * kGiB, t0 + std::chrono::milliseconds(20)), 0u);
  EXPECT_EQ(backend.reads, 1);
  EXPECT_EQ(reading.readings(), 1u);
}

TEST_F(ReadingTest, NearTheReserveItReadsAgainAndReportsTheShortfall) {
  DeviceFreeReading reading(/*reserve_bytes=*/0);
  backend.free_bytes = 10 * kGiB;
  ASSERT_EQ(reading.shortfall(backend, kGiB, 0, t0), 0u);
  // 8.5 GiB mapped since: an estimate of 1.5 GiB is too close to the reserve to trust. The device says 1.5
  // GiB too (what the pool mapped): 1 GiB more would leave 0.5 of the 1 GiB reserve.
  backend.free_bytes = kGiB + kGiB / 2;
  EXPECT_EQ(reading.shortfall(backend, kGiB, 8 * kGiB + kGiB / 2, t0), kGiB / 2);
  EXPECT_EQ(backend.reads, 2);
}

TEST_F(ReadingTest, AReadingLeavingOneReserveToSpareIsReadAgainAfterMaxAge) {
  DeviceFreeReading reading(/*reserve_bytes=*/0, std::chrono::milliseconds(50));
  backend.free_bytes = 3 * kGiB;  // a 1 GiB miss leaves the 1 GiB reserve and one more to spare
  ASSERT_EQ(reading.shortfall(backend, kGiB, 0, t0), 0u);
  ASSERT_EQ(reading.shortfall(backend, kGiB, 0, t0 + std::chrono::milliseconds(50)), 0u);
  EXPECT_EQ(backend.reads, 1);
  // Another process took 2 GiB; the next reading, 51 ms after the first, sees it.
  backend.free_bytes = kGiB;
  EXPECT_EQ(reading.shortfall(backend, kGiB, 0, t0 + std::chrono::milliseconds(51)), kGiB);
  EXPECT_EQ(backend.reads, 2);
}

// The room a reading leaves buys it time: max_age for each reserve to spare, up to kMaxStretch of them. As
// the pool maps, the room shrinks and so does the reading's trust.
TEST_F(ReadingTest, AReadingIsTrustedForMaxAgePerReserveToSpareAndAtMostTheStretch) {
  using std::chrono::milliseconds;
  DeviceFreeReading reading(/*reserve_bytes=*/0, milliseconds(50));
  backend.free_bytes = 12 * kGiB;  // a 1 GiB miss leaves 10 reserves to spare: trusted for 500 ms
  ASSERT_EQ(reading.shortfall(backend, kGiB, 0, t0), 0u);
  EXPECT_EQ(reading.shortfall(backend, kGiB, 0, t0 + milliseconds(500)), 0u);
  EXPECT_EQ(backend.reads, 1);
  // The pool mapped 6 GiB since: 4 reserves to spare, 200 ms of trust, and the reading is 300 ms old.
  EXPECT_EQ(reading.shortfall(backend, kGiB, 6 * kGiB, t0 + milliseconds(300)), 0u);
  EXPECT_EQ(backend.reads, 2);
  // At the cap: 30 GiB free leaves 28 reserves to spare, but a reading is trusted for 20 x 50 ms at most.
  backend.free_bytes = 30 * kGiB;
  reading.invalidate();
  const Clock::time_point t1 = t0 + milliseconds(1000);
  ASSERT_EQ(reading.shortfall(backend, kGiB, 0, t1), 0u);
  ASSERT_EQ(backend.reads, 3);
  EXPECT_EQ(reading.shortfall(backend, kGiB, 0, t1 + DeviceFreeReading::kMaxStretch * milliseconds(50)), 0u);
  EXPECT_EQ(backend.reads, 3);
  // Another process took all but 1.5 GiB: the reading 1,001 ms old is read again and the shortfall seen.
  backend.free_bytes = kGiB + kGiB / 2;
  EXPECT_EQ(reading.shortfall(backend, kGiB, 0, t1 + milliseconds(1001)), kGiB / 2);
  EXPECT_EQ(backend.reads, 4);
}

TEST_F(ReadingTest, InvalidateMakesTheNextMissRead) {
  DeviceFreeReading reading(/*reserve_bytes=*/2 * kGiB);
  backend.free_bytes = 20 * kGiB;
  ASSERT_EQ(reading.shortfall(backend, kGiB, 0, t0), 0u);
  reading.invalidate();
  backend.free_bytes = 2 * kGiB;
  EXPECT_EQ(reading.shortfall(backend, kGiB, 0, t0), kGiB);  // the option's 2 GiB reserve, not total / 32
  EXPECT_EQ(backend.reads, 2);
}

// Through a pool: replaying a real training trace (256 misses, well under 50 ms on the virtual device) reads
// the device once, not once a miss; and the peak is what it was when every miss read it.
TEST(PoolDeviceReadings, AGrowingPoolReadsTheDeviceAtMostOncePerMaxAgeNotOncePerMiss) {
  Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/gpt2_fp32.trace.gz");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  VirtualBackend device(80 * kGiB);
  CountingBackend backend(device);
  CachingPool pool(backend);
  const int reads_at_start = backend.reads;  // the constructor sizes its address ranges from the total
  const auto started = Clock::now();
  Result<ReplayResult> r = Replay(*trace, pool);
  const auto elapsed = Clock::now() - started;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PoolStats stats = pool.stats();
  ASSERT_GT(stats.misses, 200u);
  const auto max_age = DeviceFreeReading::kDefaultMaxAge;
  EXPECT_LE(backend.reads - reads_at_start, 1 + elapsed / max_age) << stats.misses << " misses";
  EXPECT_EQ(stats.peak_reserved_bytes, 15110 * kMiB);  // the replay's figure (README, bench/traces)
}

// Two pools share one device, as two processes share a GPU. Pool A's young reading does not see what pool B
// took; when a mapping then fails, A's next miss reads the device again instead of trusting the reading.
TEST(PoolDeviceReadings, AFailedMappingMakesTheNextMissReadTheDevice) {
  VirtualBackend device(8 * kGiB);
  CountingBackend backend_a(device);
  CachingPool a(backend_a);
  CachingPool b(device);
  const int reads_at_start = backend_a.reads;  // the constructor sizes its address ranges from the total
  void* first = *a.allocate(kGiB);
  ASSERT_EQ(backend_a.reads - reads_at_start, 1);
  // All but one chunk of what A left (A's miss mapped on to its 20 MiB unit's end: 1,040 MiB).
  Result<void*> rest = b.allocate(8 * kGiB - a.stats().reserved_bytes - 2 * kMiB);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  Result<void*> more = a.allocate(kGiB);  // A's reading says 7 GiB free: it maps, and the device refuses
  EXPECT_FALSE(more.ok());
  EXPECT_EQ(a.stats().ooms, 1u);
  const int reads_after_failure = backend_a.reads;
  ASSERT_TRUE(b.deallocate(*rest).ok());
  b.trim(0);
  Result<void*> again = a.allocate(kGiB);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_GT(backend_a.reads, reads_after_failure) << "the next miss read the device again";
  ASSERT_TRUE(a.deallocate(first).ok());
  ASSERT_TRUE(a.deallocate(*again).ok());
}

}  // namespace
}  // namespace memcoord
