// Out-of-memory recovery: before reporting OOM the pool frees everything it caches, synchronizing busy
// streams if it must (the last-resort pass). Reclaimable cache must never end in an OOM.
#include <gtest/gtest.h>

#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/detail/arena.h"
#include "common/bytes.h"
#include "tests/allocator/stream_test_backend.h"

namespace memcoord {
namespace {

constexpr StreamId kStreamS = 0x51;
constexpr StreamId kStreamT = 0x52;

// Issue 11: the last-resort pass asked a mapping arena to release UINT64_MAX bytes; rounding that up to
// whole chunks wrapped to 0, so it released nothing (and left zero-size holes), and a pool at its quota
// whose cache sat on a busy stream reported OOM while holding the memory it needed.
// No marker at frees (testing::kNoFreeMarkers): no marker covers the cached block, as when its free follows
// the pool's last miss within the interval. Exact shortfalls (grow_to_unit_end off): with it the 30 MiB miss
// maps to its unit's end, 40 MiB, and the 36 MiB request is a cache hit on that block instead.
TEST(PoolOom, AtItsLimitWithCacheOnABusyStreamTheLastResortFreesIt) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend, PoolOptions{.limit_bytes = 40 * kMiB,
                                        .grow_to_unit_end = false,
                                        .large_free_marker_interval_us = testing::kNoFreeMarkers});
  void* a = *pool.allocate(30 * kMiB, kStreamS);
  ASSERT_TRUE(pool.deallocate(a).ok());
  backend.busy.insert(kStreamS);  // S still has work queued on the cached block
  Result<void*> b = pool.allocate(36 * kMiB, kStreamT);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(pool.stats().ooms, 0u);
  EXPECT_LE(pool.stats().reserved_bytes, 40 * kMiB);
  EXPECT_NE(std::find(backend.synchronized.begin(), backend.synchronized.end(), kStreamS),
            backend.synchronized.end());
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(*b).ok());
}

// Two streams hold cache next to each other: the last resort settles them (merging across streams) and
// must still leave a consistent pool and serve the request.
TEST(PoolOom, LastResortWithCacheOnTwoBusyStreamsKeepsThePoolConsistent) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend, PoolOptions{.limit_bytes = 24 * kMiB,
                                        .large_free_marker_interval_us = testing::kNoFreeMarkers});
  void* a = *pool.allocate(8 * kMiB, kStreamS);
  void* b = *pool.allocate(8 * kMiB, kStreamT);
  ASSERT_TRUE(pool.deallocate(a).ok());
  ASSERT_TRUE(pool.deallocate(b).ok());
  backend.busy = {kStreamS, kStreamT};
  // 20 MiB on T: the placement extends T's free block (8 MiB) into the hole after it; S's block precedes.
  Result<void*> c = pool.allocate(20 * kMiB, kStreamT);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  EXPECT_LE(pool.stats().reserved_bytes, 24 * kMiB);
  ASSERT_TRUE(pool.deallocate(*c).ok());
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  pool.trim(0);
  EXPECT_EQ(backend.used_bytes(), 0u);
}

// The arena on its own: releasing "everything" (UINT64_MAX bytes) unmaps every whole free chunk.
TEST(ArenaRelease, EverythingMeansEveryWholeFreeChunk) {
  testing::StreamTestBackend backend;
  detail::BlockSlab slab;
  std::vector<StreamId> streams = {kDefaultStream};
  detail::Arena arena(backend, detail::ArenaConfig{.mapping = true, .range_bytes = 64 * kMiB}, slab, streams);
  Result<detail::Placement> p = arena.plan(10 * kMiB, 0);
  ASSERT_TRUE(p.ok());
  Result<detail::Block*> b = arena.map_and_take(*p, 10 * kMiB, 0);
  ASSERT_TRUE(b.ok());
  arena.release(*b);
  EXPECT_EQ(arena.release_free_memory(UINT64_MAX, detail::ReleaseWait::kIdleOnly), 10 * kMiB);
  EXPECT_EQ(arena.reserved_bytes(), 0u);
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_TRUE(arena.check_invariants().ok()) << arena.check_invariants().ToString();
}

// Settling streams merges free blocks across streams; the blocks a caller asked to keep (a placement's
// neighbours) must survive it, or the placement would later use a recycled block.
TEST(ArenaRelease, SettlingStreamsKeepsTheBlocksItWasToldToKeep) {
  testing::StreamTestBackend backend;
  detail::BlockSlab slab;
  std::vector<StreamId> streams = {kDefaultStream, kStreamS, kStreamT};
  detail::Arena arena(backend, detail::ArenaConfig{.mapping = true, .range_bytes = 64 * kMiB}, slab, streams);
  auto take = [&](std::size_t bytes, std::uint8_t stream) {
    Result<detail::Placement> p = arena.plan(bytes, stream);
    EXPECT_TRUE(p.ok());
    return *arena.map_and_take(*p, bytes, stream);
  };
  detail::Block* on_s = take(8 * kMiB, 1);
  detail::Block* on_t = take(8 * kMiB, 2);
  arena.release(on_s);
  arena.release(on_t);
  backend.busy = {kStreamS, kStreamT};
  Result<detail::Placement> placement = arena.plan(20 * kMiB, 2);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->left, on_t);
  const std::uintptr_t kept_address = on_t->address;
  arena.release_free_memory(UINT64_MAX, detail::ReleaseWait::kSettle, placement->hole->prev,
                            placement->hole->next);
  EXPECT_EQ(on_t->address, kept_address);
  EXPECT_EQ(on_t->state, detail::BlockState::kFree);
  EXPECT_EQ(on_t->size, 8 * kMiB);
  EXPECT_TRUE(arena.check_invariants().ok()) << arena.check_invariants().ToString();
  Result<detail::Block*> c = arena.map_and_take(*placement, 20 * kMiB, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->address, kept_address);
  EXPECT_TRUE(arena.check_invariants().ok()) << arena.check_invariants().ToString();
}

}  // namespace
}  // namespace memcoord
