// TraceHistory (allocator/trace_history.h) alone and under a CachingPool: the ring keeps the newest events in
// order, counts what it overwrote, resets; a pool with a history records every allocation and free,
// including those its thread caches would have served, and stops when the history is detached.
#include "allocator/trace_history.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

TEST(TraceHistory, KeepsTheNewestEventsOldestFirstAndCountsWhatItOverwrote) {
  TraceHistory history(3);
  for (std::uintptr_t a = 1; a <= 5; ++a) history.record_alloc(a * 0x1000, a * 100, 7);
  history.record_free(0x5000, 500, 7);
  const std::vector<TraceHistory::Event> events = history.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].address, 0x4000u);
  EXPECT_TRUE(events[0].alloc);
  EXPECT_EQ(events[1].address, 0x5000u);
  EXPECT_EQ(events[2].address, 0x5000u);
  EXPECT_FALSE(events[2].alloc);
  EXPECT_EQ(events[2].bytes, 500u);
  EXPECT_EQ(events[2].stream, 7u);
  EXPECT_LE(events[0].time_us, events[2].time_us);
  EXPECT_GT(events[0].time_us, 1'600'000'000'000'000);  // microseconds since the epoch (after 2020)
  EXPECT_EQ(history.overwritten(), 3u);
  history.reset(2);
  EXPECT_TRUE(history.events().empty());
  EXPECT_EQ(history.overwritten(), 0u);
  EXPECT_EQ(history.capacity(), 2u);
}

TEST(TraceHistory, ConcurrentWritersLoseNothingBelowCapacity) {
  TraceHistory history(40000);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&history, t] {
      for (std::uintptr_t i = 0; i < 10000; ++i) history.record_alloc(i, 64, static_cast<StreamId>(t));
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(history.events().size(), 40000u);
  EXPECT_EQ(history.overwritten(), 0u);
}

TEST(TraceHistory, APoolRecordsEveryCallWhileAttachedEvenThoseItsThreadCacheWouldServe) {
  VirtualBackend backend;
  CachingPool pool(backend, PoolOptions{.name = "history"});
  void* warm = *pool.allocate(4096);  // a small block: the thread cache keeps it once freed
  ASSERT_TRUE(pool.deallocate(warm).ok());
  TraceHistory history(100);
  pool.set_history(&history);
  for (int i = 0; i < 3; ++i) {
    void* p = *pool.allocate(4096, 5);
    ASSERT_TRUE(pool.deallocate(p).ok());
  }
  std::vector<TraceHistory::Event> events = history.events();
  ASSERT_EQ(events.size(), 6u);
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].alloc, i % 2 == 0) << i;
    EXPECT_EQ(events[i].bytes, 4096u);
    EXPECT_EQ(events[i].stream, 5u);
  }
  EXPECT_EQ(events[0].address, events[1].address);
  pool.set_history(nullptr);
  void* after = *pool.allocate(4096);
  ASSERT_TRUE(pool.deallocate(after).ok());
  EXPECT_EQ(history.events().size(), 6u);  // detached: nothing more
  EXPECT_TRUE(pool.check_invariants().ok());
}

}  // namespace
}  // namespace memcoord
