// A caching pool caches: memory is packed (free chunks unmapped and mapped again where a request needs them)
// under pressure (a limit, a nearly full device, a trim) and, sparingly, at the pool's own high-water mark;
// never on a miss below the mark. These tests count
// the backend's (the driver's) calls, which is what packing costs on a real GPU.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/host_backend.h"
#include "allocator/trace.h"
#include "allocator/trace_replay.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

std::unique_ptr<DeviceBackend> MakeTestBackend(const std::string& kind, std::uint64_t capacity) {
  if (kind == "host") return std::make_unique<HostBackend>(capacity);
  return std::make_unique<VirtualBackend>(capacity);
}

class SteadyLoop : public ::testing::TestWithParam<std::string> {};

// Issue 11: 512 B, 4 KiB, 1 MiB, 8 MiB, one block live at a time, used to cost one map and one unmap per
// two allocations (the small and the large arena traded one chunk back and forth).
TEST_P(SteadyLoop, StopsCallingTheBackendAfterItsFirstRound) {
  std::unique_ptr<DeviceBackend> backend = MakeTestBackend(GetParam(), 4 * kGiB);
  CachingPool pool(*backend);
  const std::size_t sizes[] = {512, 4 * kKiB, kMiB, 8 * kMiB};
  auto round = [&] {
    for (std::size_t bytes : sizes) {
      Result<void*> p = pool.allocate(bytes);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      ASSERT_TRUE(pool.deallocate(*p).ok());
    }
  };
  round();
  const PoolStats first = pool.stats();
  EXPECT_GT(first.backend_allocations, 0u);
  for (int i = 1; i < 5000; ++i) round();
  const PoolStats after = pool.stats();
  EXPECT_EQ(after.backend_allocations, first.backend_allocations) << "maps after the first round";
  EXPECT_EQ(after.backend_frees, first.backend_frees) << "unmaps after the first round";
  EXPECT_EQ(after.allocations, 20000u);
  EXPECT_EQ(after.cache_hits, 20000u - (first.allocations - first.cache_hits));  // misses: first round only
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

INSTANTIATE_TEST_SUITE_P(Backends, SteadyLoop, ::testing::Values("virtual", "host"),
                         [](const auto& param_info) { return param_info.param; });

// The same loop as a trace file (tests/allocator/data), which `memcoord replay` reads too.
TEST(SteadyLoopTrace, ReplayMakesOnlyTheFirstRoundsBackendCalls) {
  Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TEST_DATA_DIR) + "/steady_loop.trace.gz");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->allocations, 20000u);
  VirtualBackend backend;
  CachingPool pool(backend);
  Result<ReplayResult> r = Replay(*trace, pool);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cache_hits, 20000u - 2);   // one miss per arena, in the first round
  EXPECT_LE(r->backend_allocations, 4u);  // the units those two misses mapped
  EXPECT_EQ(r->backend_frees, 0u);
}

// Fills the small arena's cache with `mib` MiB of freed 1 MiB blocks.
void CacheSmallBlocks(CachingPool& pool, int mib) {
  std::vector<void*> blocks;
  for (int i = 0; i < mib; ++i) blocks.push_back(*pool.allocate(kMiB));
  for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
}

// The pool's first growth to a high-water mark of its own: a large miss there takes the small arena's idle
// chunks before it maps new memory (all but what the thread's cache keeps: ThreadCacheAdaptor, 2 MiB).
TEST(Packing, AtItsMarkALargeMissTakesTheIdleSmallCacheBeforeGrowing) {
  VirtualBackend backend(8 * kGiB);
  CachingPool pool(backend);
  CacheSmallBlocks(pool, 16);
  const PoolStats before = pool.stats();
  ASSERT_EQ(before.reserved_bytes, 16 * kMiB);
  void* big = *pool.allocate(40 * kMiB);
  const PoolStats after = pool.stats();
  EXPECT_GT(after.backend_frees, before.backend_frees);  // the small cache's chunks, unmapped
  EXPECT_LE(after.reserved_bytes, 40 * kMiB + 2 * kMiB);
  EXPECT_EQ(after.peak_reserved_bytes, after.reserved_bytes);  // never 16 + 40 on the way
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(big).ok());
}

// Below its high-water mark (here after a trim) a pool without pressure grows and keeps its cache.
TEST(Packing, BelowItsMarkALargeMissGrowsAndKeepsTheSmallCache) {
  VirtualBackend backend(8 * kGiB);
  CachingPool pool(backend);
  ASSERT_TRUE(pool.deallocate(*pool.allocate(100 * kMiB)).ok());
  pool.trim();  // reserved 0, mark 100 MiB
  CacheSmallBlocks(pool, 16);
  const PoolStats before = pool.stats();
  void* big = *pool.allocate(40 * kMiB);
  const PoolStats after = pool.stats();
  EXPECT_EQ(after.backend_frees, before.backend_frees);  // nothing unmapped
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes + 40 * kMiB);
  ASSERT_TRUE(pool.deallocate(big).ok());
}

// A loop whose small and large requests take each other's idle chunks at the mark (16 MiB of 1 MiB blocks,
// then 40 MiB, freed in turn) trades chunks between the arenas only while the pool's moves at its mark are
// under 1/16 of the mark; then it grows once and every round is cache hits.
TEST(Packing, ALoopTradingChunksBetweenTheArenasStopsCallingTheDriver) {
  VirtualBackend backend(8 * kGiB);
  CachingPool pool(backend);
  auto round = [&] {
    CacheSmallBlocks(pool, 16);
    ASSERT_TRUE(pool.deallocate(*pool.allocate(40 * kMiB)).ok());
  };
  for (int i = 0; i < 10; ++i) round();
  const PoolStats settled = pool.stats();
  for (int i = 0; i < 1000; ++i) round();
  const PoolStats after = pool.stats();
  EXPECT_EQ(after.backend_allocations, settled.backend_allocations) << "maps after ten rounds";
  EXPECT_EQ(after.backend_frees, settled.backend_frees) << "unmaps after ten rounds";
  EXPECT_LE(after.peak_reserved_bytes, 16 * kMiB + 40 * kMiB);  // never more than keeping both
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

// The same trade in a pool whose mark is large (4 GiB held live), where 1/16 of it (256 MiB) would take many
// rounds of trading: a chunk that would come back at an unchanged mark is not taken, the pool grows instead,
// and from the third round on every round is cache hits; the pool holds at most what keeping both arenas'
// memory needs.
TEST(Packing, ATradeThatComesBackAtTheSameMarkEndsAtOnce) {
  VirtualBackend backend(8 * kGiB);
  CachingPool pool(backend);
  Result<void*> held = pool.allocate(4 * kGiB);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto round = [&] {
    CacheSmallBlocks(pool, 16);
    ASSERT_TRUE(pool.deallocate(*pool.allocate(40 * kMiB)).ok());
  };
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(round());
  const PoolStats settled = pool.stats();
  EXPECT_GT(settled.backend_frees, 0u);  // it did trade before it stopped
  for (int i = 0; i < 200; ++i) ASSERT_NO_FATAL_FAILURE(round());
  const PoolStats after = pool.stats();
  EXPECT_EQ(after.backend_allocations, settled.backend_allocations) << "maps after three rounds";
  EXPECT_EQ(after.backend_frees, settled.backend_frees) << "unmaps after three rounds";
  // The held 4 GiB mapped on to its 20 MiB unit's end (grow_to_unit_end): 4 MiB of slack.
  EXPECT_LE(after.peak_reserved_bytes, 4 * kGiB + 4 * kMiB + 16 * kMiB + 40 * kMiB);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(*held).ok());
}

TEST(Packing, ALimitThatWouldBeExceededPacksTheOtherArenasCache) {
  VirtualBackend backend(8 * kGiB);
  CachingPool pool(backend);
  CacheSmallBlocks(pool, 16);
  ASSERT_TRUE(pool.set_limit(40 * kMiB).ok());
  const PoolStats before = pool.stats();
  Result<void*> big = pool.allocate(30 * kMiB);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const PoolStats after = pool.stats();
  EXPECT_GT(after.backend_frees, before.backend_frees);
  EXPECT_LE(after.reserved_bytes, 40 * kMiB);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(*big).ok());
}

TEST(Packing, ANearlyFullDevicePacksBeforeItsReserveIsTaken) {
  VirtualBackend backend(64 * kMiB);
  CachingPool pool(backend, PoolOptions{.device_reserve_bytes = 4 * kMiB});
  // A mark of 60 MiB first, so that what follows is below it: only pressure can pack there.
  ASSERT_TRUE(pool.deallocate(*pool.allocate(60 * kMiB)).ok());
  pool.trim();
  CacheSmallBlocks(pool, 16);
  const std::uint64_t frees_before = pool.stats().backend_frees;  // the trim's
  // 16 MiB cached + 44 MiB would leave 4 MiB free: no pressure yet.
  void* a = *pool.allocate(44 * kMiB);
  EXPECT_EQ(pool.stats().backend_frees, frees_before);
  ASSERT_TRUE(pool.deallocate(a).ok());
  // 16 + 46 MiB would leave 2 MiB, under the reserve: 2 MiB of the small cache go first.
  const PoolStats before = pool.stats();
  void* b = *pool.allocate(46 * kMiB);
  const PoolStats after = pool.stats();
  EXPECT_GT(after.backend_frees, before.backend_frees);
  EXPECT_GE(backend.device_info().free_bytes, 4 * kMiB);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(b).ok());
}

}  // namespace
}  // namespace memcoord
