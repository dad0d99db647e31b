#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/host_backend.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

class PoolTest : public ::testing::TestWithParam<PoolGrowth> {
 protected:
  VirtualBackend backend_{8 * kGiB};
  CachingPool pool_{backend_, PoolOptions{.name = "test", .growth = GetParam()}};
};

TEST_P(PoolTest, CacheHitReusesTheBlockWithoutTheBackend) {
  void* a = *pool_.allocate(3 * kMiB);
  const PoolStats s1 = pool_.stats();
  ASSERT_TRUE(pool_.deallocate(a).ok());
  void* b = *pool_.allocate(3 * kMiB);
  const PoolStats s2 = pool_.stats();
  EXPECT_EQ(a, b);
  EXPECT_EQ(s2.backend_allocations, s1.backend_allocations);
  EXPECT_EQ(s2.cache_hits, s1.cache_hits + 1);
  EXPECT_TRUE(pool_.deallocate(b).ok());
  EXPECT_TRUE(pool_.check_invariants().ok()) << pool_.check_invariants().ToString();
}

TEST_P(PoolTest, StatsTrackCurrentAndPeak) {
  void* a = *pool_.allocate(1000);
  void* b = *pool_.allocate(5 * kMiB + 1);
  PoolStats s = pool_.stats();
  EXPECT_EQ(s.requested_bytes, 1000 + 5 * kMiB + 1);
  EXPECT_EQ(s.allocated_bytes, 1024 + 5 * kMiB + 512);  // rounded to 512
  EXPECT_EQ(s.live_blocks, 2u);
  EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  EXPECT_EQ(s.reserved_bytes, backend_.used_bytes());
  ASSERT_TRUE(pool_.deallocate(b).ok());
  s = pool_.stats();
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.peak_requested_bytes, 1000 + 5 * kMiB + 1);
  EXPECT_EQ(s.live_blocks, 1u);
  EXPECT_GT(s.largest_free_bytes, 0u);
  ASSERT_TRUE(pool_.deallocate(a).ok());
}

// The cache's figures are those of the free blocks when stats() reads them, exact even when the largest free
// block sits behind more than FreeIndex::kScanLimit others of its size class (here one of 10.25 MiB freed
// before 33 of 10 MiB, each kept apart by a live block).
TEST_P(PoolTest, LargestFreeBlockIsExactWhenRead) {
  std::vector<void*> freed{*pool_.allocate(10 * kMiB + 256 * kKiB)};
  std::vector<void*> live;
  for (int i = 0; i < 33; ++i) {
    live.push_back(*pool_.allocate(3 * kMiB / 2));
    freed.push_back(*pool_.allocate(10 * kMiB));
  }
  live.push_back(*pool_.allocate(3 * kMiB / 2));
  for (void* p : freed) ASSERT_TRUE(pool_.deallocate(p).ok());
  const PoolStats s = pool_.stats();
  std::uint64_t largest = 0;
  std::uint64_t total = 0;
  for (const SegmentSnapshot& segment : pool_.snapshot().segments) {
    for (const BlockSnapshot& b : segment.blocks) {
      if (b.state != BlockSnapshot::State::kFree) continue;
      largest = std::max<std::uint64_t>(largest, b.size);
      total += b.size;
    }
  }
  EXPECT_GE(largest, 10 * kMiB + 256 * kKiB);
  EXPECT_EQ(s.largest_free_bytes, largest);
  EXPECT_DOUBLE_EQ(s.fragmentation, 1.0 - static_cast<double>(largest) / static_cast<double>(total));
  for (void* p : live) ASSERT_TRUE(pool_.deallocate(p).ok());
  EXPECT_TRUE(pool_.check_invariants().ok()) << pool_.check_invariants().ToString();
}

TEST_P(PoolTest, TrimReleasesCacheButNeverLiveBlocks) {
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(*pool_.allocate((i + 1) * kMiB + 4096));
  void* keep = *pool_.allocate(7 * kMiB);
  for (void* p : blocks) ASSERT_TRUE(pool_.deallocate(p).ok());
  const PoolStats before = pool_.stats();
  TrimResult r = pool_.trim(0);
  const PoolStats after = pool_.stats();
  EXPECT_GT(r.released_bytes, 0u);
  EXPECT_EQ(r.released_bytes, before.reserved_bytes - after.reserved_bytes);
  EXPECT_EQ(r.reserved_after_bytes, after.reserved_bytes);
  EXPECT_GE(after.reserved_bytes, 7 * kMiB);
  EXPECT_LE(after.reserved_bytes, 7 * kMiB + 20 * kMiB);  // at most the segment holding `keep`
  EXPECT_EQ(after.trims, before.trims + 1);
  EXPECT_EQ(*pool_.block_size(keep), 7 * kMiB);
  EXPECT_TRUE(pool_.check_invariants().ok()) << pool_.check_invariants().ToString();
  ASSERT_TRUE(pool_.deallocate(keep).ok());
  pool_.trim(0);
  EXPECT_EQ(pool_.stats().reserved_bytes, 0u);
  EXPECT_EQ(backend_.used_bytes(), 0u);
}

TEST_P(PoolTest, TrimToATargetStopsThere) {
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(*pool_.allocate(32 * kMiB));
  for (void* p : blocks) ASSERT_TRUE(pool_.deallocate(p).ok());
  const std::uint64_t reserved = pool_.stats().reserved_bytes;
  TrimResult r = pool_.trim(reserved / 2);
  EXPECT_LE(r.reserved_after_bytes, reserved / 2);
  EXPECT_GT(r.reserved_after_bytes, 0u);
}

TEST_P(PoolTest, LimitIsEnforcedWithAClearError) {
  ASSERT_TRUE(pool_.set_limit(64 * kMiB).ok());
  void* a = *pool_.allocate(40 * kMiB);
  Result<void*> b = pool_.allocate(40 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = b.status().message();
  for (const char* word : {"41.94 MB", "limit 67.11 MB", "allocated 41.94 MB", "reserved",
                           "largest free block", "top tags: untagged 41.94 MB"}) {
    EXPECT_NE(m.find(word), std::string::npos) << word << " missing from: " << m;
  }
  EXPECT_EQ(pool_.stats().ooms, 1u);
  ASSERT_TRUE(pool_.deallocate(a).ok());
  b = pool_.allocate(40 * kMiB);  // room regained after the free
  EXPECT_TRUE(b.ok());
  ASSERT_TRUE(pool_.deallocate(*b).ok());
}

TEST_P(PoolTest, LimitBelowLiveUseIsRefusedAndLeavesTheLimit) {
  void* a = *pool_.allocate(10 * kMiB);
  ASSERT_TRUE(pool_.set_limit(100 * kMiB).ok());
  Status s = pool_.set_limit(kMiB);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("below"), std::string::npos);
  EXPECT_EQ(pool_.stats().limit_bytes, 100 * kMiB);
  ASSERT_TRUE(pool_.deallocate(a).ok());
}

// Memory goes back in whole units (chunks, segments): free blocks inside a unit a live block keeps stay
// reserved. A limit below what stays (above what is live) is taken, and misses are refused until frees bring
// the pool under it (caching_pool.h).
TEST_P(PoolTest, ALimitBelowWhatStaysReservedRefusesMissesUntilFreesBringThePoolUnder) {
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(*pool_.allocate(512 * 1024));  // 4 to a 2 MiB unit
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i % 4 != 3) {
      ASSERT_TRUE(pool_.deallocate(blocks[i]).ok());  // one live block left in every unit
    }
  }
  ASSERT_GE(pool_.stats().reserved_bytes, 32 * kMiB);
  ASSERT_TRUE(pool_.set_limit(24 * kMiB).ok());  // above the 8 MiB live, below what stays reserved
  EXPECT_GT(pool_.stats().reserved_bytes, 24 * kMiB);
  Result<void*> refused = pool_.allocate(4 * kMiB);  // needs new memory
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  for (std::size_t i = 3; i < blocks.size(); i += 4) ASSERT_TRUE(pool_.deallocate(blocks[i]).ok());
  Result<void*> fits = pool_.allocate(4 * kMiB);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_LE(pool_.stats().reserved_bytes, 24 * kMiB);
  ASSERT_TRUE(pool_.deallocate(*fits).ok());
}

TEST_P(PoolTest, LimitTrimsTheCacheToFit) {
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(*pool_.allocate(32 * kMiB));
  for (void* p : blocks) ASSERT_TRUE(pool_.deallocate(p).ok());
  ASSERT_GE(pool_.stats().reserved_bytes, 256 * kMiB);
  ASSERT_TRUE(pool_.set_limit(64 * kMiB).ok());
  EXPECT_LE(pool_.stats().reserved_bytes, 64 * kMiB);
}

TEST_P(PoolTest, BadInputGetsClearErrorsAndChangesNothing) {
  void* a = *pool_.allocate(4096);
  const PoolStats before = pool_.stats();

  Result<void*> zero = pool_.allocate(0);
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("0 bytes"), std::string::npos);

  Result<void*> negative = pool_.allocate(static_cast<std::size_t>(-5));
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("absurd"), std::string::npos);

  Result<void*> too_big = pool_.allocate(1ULL << 45);  // 32 TiB: not absurd in type, larger than the device
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);

  int local = 0;
  Status unknown = pool_.deallocate(&local);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("not a live block"), std::string::npos);
  EXPECT_EQ(pool_.deallocate(nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_.allocate(64, kDefaultStream, 42).status().code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(pool_.deallocate(a).ok());
  Status twice = pool_.deallocate(a);
  EXPECT_EQ(twice.code(), StatusCode::kNotFound);
  EXPECT_NE(twice.message().find("already freed"), std::string::npos);

  const PoolStats after = pool_.stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes - 4096);
  EXPECT_EQ(after.live_blocks, 0u);
  EXPECT_TRUE(pool_.check_invariants().ok());
}

TEST_P(PoolTest, TagsCountLiveBytes) {
  TagId act = *pool_.tag("activations");
  TagId opt = *pool_.tag("optimizer");
  EXPECT_EQ(*pool_.tag("activations"), act);
  EXPECT_EQ(pool_.tag("").status().code(), StatusCode::kInvalidArgument);
  void* a = *pool_.allocate(3 * kMiB, kDefaultStream, act);
  void* b = *pool_.allocate(kMiB, kDefaultStream, opt);
  void* c = *pool_.allocate(kMiB, kDefaultStream, act);
  std::vector<TagUsage> usage = pool_.tag_usage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].tag, "activations");
  EXPECT_EQ(usage[0].live_bytes, 4 * kMiB);
  EXPECT_EQ(usage[0].live_blocks, 2u);
  EXPECT_EQ(usage[1].tag, "optimizer");
  for (void* p : {a, b, c}) ASSERT_TRUE(pool_.deallocate(p).ok());
  EXPECT_TRUE(pool_.tag_usage().empty());
}

TEST_P(PoolTest, TooManyTagsIsAnError) {
  for (std::size_t i = 1; i < kMaxTags; ++i) ASSERT_TRUE(pool_.tag("t" + std::to_string(i)).ok());
  EXPECT_EQ(pool_.tag("one-too-many").status().code(), StatusCode::kInvalidArgument);
}

TEST_P(PoolTest, OomHookIsAskedBeforeFailing) {
  ASSERT_TRUE(pool_.set_limit(32 * kMiB).ok());
  int calls = 0;
  pool_.set_oom_hook([&](const OomEvent& e) {
    ++calls;
    EXPECT_EQ(e.requested_bytes, 48 * kMiB);
    EXPECT_EQ(e.limit_bytes, 32 * kMiB);
    return pool_.set_limit(128 * kMiB).ok();  // the coordinator granted more quota
  });
  Result<void*> p = pool_.allocate(48 * kMiB);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(pool_.deallocate(*p).ok());
  pool_.set_oom_hook([&](const OomEvent&) {
    ++calls;
    return false;
  });
  EXPECT_EQ(pool_.allocate(1ULL << 40).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(calls, 2);
}

TEST_P(PoolTest, SmallAndLargeBlocksLiveApart) {
  void* small = *pool_.allocate(4096);
  void* large = *pool_.allocate(8 * kMiB);
  const auto s = reinterpret_cast<std::uintptr_t>(small);
  const auto l = reinterpret_cast<std::uintptr_t>(large);
  EXPECT_TRUE(s + 4096 <= l || l + 8 * kMiB <= s);
  // Freed small block space is never handed out for a large request.
  ASSERT_TRUE(pool_.deallocate(small).ok());
  void* large2 = *pool_.allocate(2 * kMiB);
  EXPECT_NE(large2, small);
  for (void* p : {large, large2}) ASSERT_TRUE(pool_.deallocate(p).ok());
}

INSTANTIATE_TEST_SUITE_P(Growth, PoolTest, ::testing::Values(PoolGrowth::kMapping, PoolGrowth::kSegments),
                         [](const auto& param_info) {
                           return param_info.param == PoolGrowth::kMapping ? "Mapping" : "Segments";
                         });

TEST(PoolMapping, FreeChunksMoveToWhereTheyAreNeededInsteadOfGrowing) {
  VirtualBackend backend(8 * kGiB);
  // Exact shortfalls (grow_to_unit_end off): with it the 30 MiB miss would round up to its unit's end.
  CachingPool pool(backend, PoolOptions{.growth = PoolGrowth::kMapping, .grow_to_unit_end = false});
  // Fill 64 MiB with 2 MiB blocks, free every other one: 32 MiB free but no free range above 2 MiB.
  std::vector<void*> blocks;
  for (int i = 0; i < 32; ++i) blocks.push_back(*pool.allocate(2 * kMiB));
  for (int i = 0; i < 32; i += 2) ASSERT_TRUE(pool.deallocate(blocks[i]).ok());
  const std::uint64_t reserved = pool.stats().reserved_bytes;
  void* big = *pool.allocate(30 * kMiB);  // must not grow reserved: free chunks are remapped
  EXPECT_EQ(pool.stats().reserved_bytes, reserved);
  EXPECT_EQ(pool.stats().peak_reserved_bytes, reserved);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(big).ok());
  for (int i = 1; i < 32; i += 2) ASSERT_TRUE(pool.deallocate(blocks[i]).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(PoolDestruction, ReleasesEverythingEvenWithLiveBlocks) {
  VirtualBackend backend(8 * kGiB);
  {
    CachingPool pool(backend);
    (void)*pool.allocate(5 * kMiB);
    (void)*pool.allocate(512);
  }
  EXPECT_EQ(backend.used_bytes(), 0u);
}

}  // namespace
}  // namespace memcoord

namespace memcoord {
namespace {

// Random sizes from 256 B to 64 MiB with random frees, repeated: the churn a packed pool pays for.
std::pair<std::uint64_t, std::uint64_t> ChurnPasses(RemapPolicy policy, int passes) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend, PoolOptions{.remap = policy});
  std::uint64_t last_pass_backend_calls = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::mt19937_64 rng(42);
    std::vector<void*> live;
    const PoolStats before = pool.stats();
    for (int op = 0; op < 20000; ++op) {
      if (live.size() < 300 && (live.empty() || rng() % 2 == 0)) {
        const int k = std::uniform_int_distribution<int>(8, 25)(rng);
        const std::size_t bytes = (std::size_t{1} << k) + rng() % (std::size_t{1} << k);
        live.push_back(*pool.allocate(bytes));
      } else {
        const std::size_t i = rng() % live.size();
        EXPECT_TRUE(pool.deallocate(live[i]).ok());
        live[i] = live.back();
        live.pop_back();
      }
    }
    for (void* p : live) EXPECT_TRUE(pool.deallocate(p).ok());
    const PoolStats after = pool.stats();
    last_pass_backend_calls = (after.backend_allocations - before.backend_allocations) +
                              (after.backend_frees - before.backend_frees);
  }
  EXPECT_TRUE(pool.check_invariants().ok());
  return {last_pass_backend_calls, pool.stats().peak_reserved_bytes};
}

TEST(PoolRemapPolicy, DefaultStopsCallingTheDriverUnderChurnEveryMissStaysSmaller) {
  auto [every_miss_calls, every_miss_peak] = ChurnPasses(RemapPolicy::kEveryMiss, 4);
  auto [default_calls, default_peak] = ChurnPasses(RemapPolicy::kUnderPressure, 4);
  EXPECT_GT(every_miss_calls, 0u);
  // Units mapped and unmapped in the fourth pass of 20,000 operations: a handful once warm (measured 6 with
  // today's 40 MiB units, every-miss 16; with 20 MiB units 3 and 18, and 13 and 44 before grow_to_unit_end;
  // before Arena::fit ranked blocks before a hole by their reach, 6 and 24, at a peak 42 MB lower for the
  // default and 38 MB higher for every-miss: random sizes and lifetimes are not what that rule is for, see
  // pool_fit_test.cc).
  EXPECT_LE(default_calls, 16u);
  EXPECT_LE(default_calls * 2, every_miss_calls);
  EXPECT_LT(default_calls, every_miss_calls);
  EXPECT_LE(every_miss_peak, default_peak);
  EXPECT_LE(default_peak, every_miss_peak + every_miss_peak / 4);  // for at most a quarter more memory
}

}  // namespace
}  // namespace memcoord
