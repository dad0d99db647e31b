// StatsAdaptor alone over a FakeResource: figures follow successful calls only, peaks hold until reset.
#include "allocator/stats_adaptor.h"

#include <gtest/gtest.h>

#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

template <typename Upstream>
PoolStats Read(const StatsAdaptor<Upstream>& stats) {
  PoolStats s;
  stats.fill_stats(s);
  return s;
}

TEST(StatsAdaptor, CountsLiveBytesBlocksAndPeaks) {
  testing::FakeResource fake;
  StatsAdaptor stats(fake);
  Allocation a = *stats.allocate(1000);
  Allocation b = *stats.allocate(5000);
  PoolStats s = Read(stats);
  EXPECT_EQ(s.allocated_bytes, 1024u + 5120u);
  EXPECT_EQ(s.requested_bytes, 6000u);
  EXPECT_EQ(s.active_bytes, s.allocated_bytes);
  EXPECT_EQ(s.live_blocks, 2u);
  EXPECT_EQ(s.allocations, 2u);
  ASSERT_TRUE(stats.deallocate(b.ptr).ok());
  s = Read(stats);
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_allocated_bytes, 1024u + 5120u);
  EXPECT_EQ(s.peak_requested_bytes, 6000u);
  EXPECT_EQ(s.live_blocks, 1u);
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.allocated_bytes_total, 1024u + 5120u);
  EXPECT_EQ(s.freed_bytes_total, 5120u);
  stats.reset_peaks();
  s = Read(stats);
  EXPECT_EQ(s.peak_allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_requested_bytes, 1000u);
  EXPECT_EQ(s.peak_active_bytes, 1024u);
  EXPECT_EQ(s.allocations, 2u) << "counters are not peaks";
  ASSERT_TRUE(stats.deallocate(a.ptr).ok());
  EXPECT_EQ(Read(stats).allocated_bytes, 0u);
}

TEST(StatsAdaptor, FailedCallsChangeNoFigure) {
  testing::FakeResource fake;
  StatsAdaptor stats(fake);
  Allocation a = *stats.allocate(4096);
  const PoolStats before = Read(stats);
  fake.fail_next_allocations = 1;
  EXPECT_EQ(stats.allocate(4096).status().code(), StatusCode::kResourceExhausted);
  int local = 0;
  EXPECT_EQ(stats.deallocate(&local).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(stats.allocate(0).status().code(), StatusCode::kInvalidArgument);
  const PoolStats after = Read(stats);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.live_blocks, before.live_blocks);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.allocated_bytes_total, before.allocated_bytes_total);
  EXPECT_EQ(after.freed_bytes_total, before.freed_bytes_total);
  ASSERT_TRUE(stats.deallocate(a.ptr).ok());
}

TEST(StatsAdaptor, ForwardsTrimAndRecordStream) {
  testing::FakeResource fake;
  StatsAdaptor stats(fake);
  Allocation a = *stats.allocate(4096);
  EXPECT_TRUE(stats.record_stream(a.ptr, 0x51).ok());
  (void)stats.trim(0);
  EXPECT_EQ(fake.record_stream_calls, 1);
  EXPECT_EQ(fake.trim_calls, 1);
  ASSERT_TRUE(stats.deallocate(a.ptr).ok());
}

}  // namespace
}  // namespace memcoord
