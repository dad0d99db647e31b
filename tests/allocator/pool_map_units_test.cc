// The large arena maps physical memory in units (PoolOptions::large_map_unit_bytes, default 40 MiB): one
// backend map call per unit, never across a multiple of the unit (but for a miss of more than
// detail::kMaxUnitsPerMiss units, which maps that many equal ones), and a unit is unmapped only whole (the
// CUDA driver cannot unmap part of a physical allocation). UnitCheckingBackend records every map range and
// counts each unmap that would cut one, so every test here also checks the arena never asks for that.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/detail/map_units.h"
#include "allocator/virtual_backend.h"
#include "tests/support/forwarding_backend.h"

namespace memcoord {
namespace {

constexpr std::size_t kMiB = 1 << 20;

class UnitCheckingBackend final : public testing::ForwardingBackend<VirtualBackend> {
 public:
  explicit UnitCheckingBackend(std::uint64_t capacity = 8ULL << 30) : ForwardingBackend(capacity) {}

  Status map(std::uintptr_t a, std::size_t bytes) override {
    MEMCOORD_RETURN_IF_ERROR(inner().map(a, bytes));
    std::lock_guard<std::mutex> lock(mu_);
    mapped_.emplace(a, bytes);
    map_sizes.push_back(bytes);
    return Status::Ok();
  }
  Status map_pieces(std::uintptr_t a, std::span<const std::size_t> pieces) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      run_lengths.push_back(pieces.size());
    }
    return DeviceBackend::map_pieces(a, pieces);  // each piece through map() above
  }
  // Counts a violation unless [a, a+bytes) is exactly a run of whole mapped ranges.
  void unmap(std::uintptr_t a, std::size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    std::uintptr_t at = a;
    while (at < a + bytes) {
      auto it = mapped_.find(at);
      if (it == mapped_.end() || at + it->second > a + bytes) {
        ++cut_units;
        return;
      }
      at += it->second;
      mapped_.erase(it);
    }
    inner().unmap(a, bytes);
  }
  std::string_view kind() const override { return "unit-checking"; }
  std::uint64_t used_bytes() const { return inner().used_bytes(); }

  std::vector<std::size_t> map_sizes;
  std::vector<std::size_t> run_lengths;  // pieces per map_pieces call
  int cut_units = 0;

 private:
  std::mutex mu_;
  std::map<std::uintptr_t, std::size_t> mapped_;
};

// Exact shortfalls (grow_to_unit_end off): the tests below count the units of each miss's own grid, 20 MiB
// unless they name another (the default, 40 MiB, is TheDefaultMapsFortyMiBUnitsAndGrowsByTwenty's);
// GrowingToTheUnitEndLeavesSlackTheNextRequestsTake turns the rule (the default) back on.
PoolOptions MappingOptions(std::size_t unit = 20 * kMiB) {
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;
  options.large_map_unit_bytes = unit;
  options.thread_cache_bytes = 0;
  return options;
}

// Frees the pool's last live block and trims: every unit goes back to the backend whole.
void ExpectEverythingGivenBack(CachingPool& pool, UnitCheckingBackend& backend, void* last) {
  ASSERT_TRUE(pool.deallocate(last).ok());
  pool.trim(0);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(backend.cut_units, 0);
}

TEST(PoolMapUnits, ALargeMissMapsAFewUnitsInsteadOfAChunkEach) {
  UnitCheckingBackend backend;
  CachingPool pool(backend, MappingOptions());
  void* p = *pool.allocate(200 * kMiB, kDefaultStream);
  // 200 MiB in 20 MiB windows: 10 units, 11 when the range does not start on a window.
  EXPECT_GE(backend.map_sizes.size(), 10u);
  EXPECT_LE(backend.map_sizes.size(), 11u);
  std::size_t total = 0;
  for (std::size_t s : backend.map_sizes) {
    EXPECT_LE(s, 20 * kMiB);
    total += s;
  }
  EXPECT_EQ(total, 200 * kMiB);
  EXPECT_EQ(backend.run_lengths, std::vector<std::size_t>{backend.map_sizes.size()})
      << "the miss's units go to the backend in one call (CUDA sets their access once)";
  EXPECT_EQ(pool.stats().backend_allocations, backend.map_sizes.size());
  ASSERT_TRUE(pool.deallocate(p).ok());
  pool.trim(0);
  EXPECT_EQ(pool.stats().backend_frees, backend.map_sizes.size());
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(backend.cut_units, 0);
}

// A miss of more than kMaxUnitsPerMiss units maps that many equal units in one call (GPT-2's 1.5 GiB logits:
// 32 driver allocations instead of 79); a trim gives them all back, and a block that reuses the front of the
// freed range keeps only the units it touches.
TEST(PoolMapUnits, AMissOfMoreThanTheMostUnitsMapsThatManyEqualOnes) {
  UnitCheckingBackend backend;
  CachingPool pool(backend, MappingOptions());
  void* logits = *pool.allocate(1572 * kMiB, kDefaultStream);
  ASSERT_EQ(backend.map_sizes.size(), detail::kMaxUnitsPerMiss);
  std::size_t total = 0;
  for (std::size_t s : backend.map_sizes) {
    EXPECT_TRUE(s == 48 * kMiB || s == 50 * kMiB) << s;  // 786 chunks: 18 units of 25 chunks, 14 of 24
    total += s;
  }
  EXPECT_EQ(total, 1572 * kMiB);
  EXPECT_EQ(backend.run_lengths, std::vector<std::size_t>{detail::kMaxUnitsPerMiss});
  ASSERT_TRUE(pool.deallocate(logits).ok());
  void* front = *pool.allocate(30 * kMiB, kDefaultStream);  // the freed range's front: its first unit
  EXPECT_EQ(backend.map_sizes.size(), detail::kMaxUnitsPerMiss) << "served from the cache";
  pool.trim(0);
  EXPECT_EQ(pool.stats().reserved_bytes, 50 * kMiB) << "the one unit the live block touches";
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ExpectEverythingGivenBack(pool, backend, front);
}

// The units one miss of `bytes` maps with large_map_unit_bytes = `unit`.
std::vector<std::size_t> UnitsOfOneMiss(std::size_t unit, std::size_t bytes) {
  UnitCheckingBackend backend;
  CachingPool pool(backend, MappingOptions(unit));
  void* p = *pool.allocate(bytes, kDefaultStream);
  EXPECT_TRUE(pool.deallocate(p).ok());
  return backend.map_sizes;
}

TEST(PoolMapUnits, ChunkSizedUnitsMapEveryChunkAlone) {
  EXPECT_EQ(UnitsOfOneMiss(2 * kMiB, 20 * kMiB), std::vector<std::size_t>(10, 2 * kMiB));
}

TEST(PoolMapUnits, AUnitIsRoundedUpToTheChunk) {
  EXPECT_EQ(UnitsOfOneMiss(3 * kMiB, 16 * kMiB), std::vector<std::size_t>(4, 4 * kMiB));  // 4 MiB units
}

// An absurd unit (past the address range) is bounded by the range: one unit per miss, nothing overflows.
TEST(PoolMapUnits, AnAbsurdUnitMapsEachMissAsOneUnit) {
  UnitCheckingBackend backend;
  CachingPool pool(backend, MappingOptions(~std::size_t{0}));
  void* p = *pool.allocate(100 * kMiB, kDefaultStream);
  void* q = *pool.allocate(60 * kMiB, kDefaultStream);
  EXPECT_EQ(backend.map_sizes, (std::vector<std::size_t>{100 * kMiB, 60 * kMiB}));
  ASSERT_TRUE(pool.deallocate(p).ok());
  ASSERT_TRUE(pool.deallocate(q).ok());
  pool.trim(0);
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(backend.cut_units, 0);
}

// A free block that covers part of a unit keeps that unit mapped (its other part is live); once the live
// block is freed too, the whole unit goes back.
TEST(PoolMapUnits, ATrimKeepsUnitsThatALiveBlockStillShares) {
  UnitCheckingBackend backend;
  CachingPool pool(backend, MappingOptions(16 * kMiB));
  void* a = *pool.allocate(24 * kMiB, kDefaultStream);
  ASSERT_TRUE(pool.deallocate(a).ok());
  // Both reuse the 24 MiB block in place: b its front 10 MiB, c the next 12 MiB.
  void* b = *pool.allocate(10 * kMiB, kDefaultStream);
  void* c = *pool.allocate(12 * kMiB, kDefaultStream);
  ASSERT_TRUE(pool.deallocate(b).ok());
  pool.trim(0);
  // With 2 MiB units the trim would keep only c's chunks (12 MiB + the chunk it starts in); with 16 MiB
  // units every unit c touches stays: at least c, at most c plus the units around it.
  const std::uint64_t kept = pool.stats().reserved_bytes;
  EXPECT_GE(kept, 12 * kMiB);
  EXPECT_LE(kept, 24 * kMiB);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ExpectEverythingGivenBack(pool, backend, c);
}

// 3000 random allocations (small and up to 161 MiB, two streams) and frees under the pool's limit, a trim
// every 500, the invariants checked every 50; then everything is freed and trimmed. Fatal failures return
// from here: callers wrap it in ASSERT_NO_FATAL_FAILURE.
void RandomTraffic(CachingPool& pool, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<void*> live;
  for (int i = 0; i < 3000; ++i) {
    const std::uint64_t r = rng();
    if (r % 3 != 0 || live.empty()) {
      const std::size_t size = (r >> 8) % 4 == 0 ? 1024 + (r >> 16) % kMiB : kMiB + (r >> 16) % (160 * kMiB);
      const StreamId stream = (r >> 40) % 2 == 0 ? kDefaultStream : 5;
      Result<void*> p = pool.allocate(size, stream);
      if (p.ok()) live.push_back(*p);
    } else {
      const std::size_t at = (r >> 8) % live.size();
      ASSERT_TRUE(pool.deallocate(live[at]).ok());
      live[at] = live.back();
      live.pop_back();
    }
    if (i % 500 == 499) pool.trim(0);
    if (i % 50 == 0) {
      ASSERT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
    }
  }
  for (void* p : live) ASSERT_TRUE(pool.deallocate(p).ok());
  pool.trim(0);
}

// Random sizes from 1 KiB to 160 MiB on two streams under a 1 GiB limit (so the pool packs), with trims:
// the arena's invariants hold after every step (unit starts against mapped runs included) and no unmap
// ever cuts a unit; at the end everything goes back.
TEST(PoolMapUnits, RandomTrafficUnderALimitNeverCutsAUnit) {
  for (std::size_t unit : {std::size_t{2} * kMiB, std::size_t{20} * kMiB, std::size_t{64} * kMiB}) {
    SCOPED_TRACE(unit);
    UnitCheckingBackend backend;
    PoolOptions options = MappingOptions(unit);
    options.limit_bytes = 1ULL << 30;
    CachingPool pool(backend, options);
    ASSERT_NO_FATAL_FAILURE(RandomTraffic(pool, 42));
    EXPECT_EQ(pool.stats().reserved_bytes, 0u);
    EXPECT_EQ(backend.used_bytes(), 0u);
    EXPECT_EQ(backend.cut_units, 0);
  }
}

// The same with misses of more than kMaxUnitsPerMiss units among the others: at most six blocks live, one in
// four of 650-900 MiB, under a 3 GiB limit. Their larger units are packed, trimmed and reused beside the
// grid's without an unmap cutting one, and the invariants hold throughout.
TEST(PoolMapUnits, RandomTrafficWithMissesOfMoreThanTheMostUnitsNeverCutsAUnit) {
  UnitCheckingBackend backend;
  PoolOptions options = MappingOptions();
  options.limit_bytes = 3ULL << 30;
  CachingPool pool(backend, options);
  std::mt19937_64 rng(7);
  std::vector<void*> live;
  int large_misses = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t r = rng();
    if (live.size() == 6 || (r % 3 == 0 && !live.empty())) {
      const std::size_t at = (r >> 8) % live.size();
      ASSERT_TRUE(pool.deallocate(live[at]).ok());
      live[at] = live.back();
      live.pop_back();
    } else {
      const bool large = (r >> 8) % 4 == 0;
      const std::size_t size =
          large ? 650 * kMiB + (r >> 16) % (250 * kMiB) : kMiB + (r >> 16) % (160 * kMiB);
      const std::size_t maps_before = backend.map_sizes.size();
      Result<void*> p = pool.allocate(size, (r >> 40) % 2 == 0 ? kDefaultStream : 5);
      if (p.ok()) live.push_back(*p);
      if (large && backend.map_sizes.size() - maps_before == detail::kMaxUnitsPerMiss) ++large_misses;
    }
    if (i % 250 == 249) pool.trim(0);
    if (i % 25 == 0) {
      ASSERT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
    }
  }
  EXPECT_GT(large_misses, 0) << "no miss mapped kMaxUnitsPerMiss equal units";
  for (void* p : live) ASSERT_TRUE(pool.deallocate(p).ok());
  pool.trim(0);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(backend.cut_units, 0);
}

// RandomTraffic on a pool of `options` under a 1 GiB limit: it ends with everything given back and no unit
// ever cut. Returns what the backend mapped.
std::vector<std::size_t> RandomTrafficMaps(PoolOptions options, std::uint64_t seed) {
  UnitCheckingBackend backend;
  options.limit_bytes = 1ULL << 30;
  CachingPool pool(backend, options);
  RandomTraffic(pool, seed);
  if (::testing::Test::HasFatalFailure()) return backend.map_sizes;
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(backend.cut_units, 0);
  return backend.map_sizes;
}

// PoolOptions::merge_unit_ends: a miss's partial end pieces join their whole-unit neighbours, so a 50 MiB
// miss from a 16 MiB offset maps two units where the grid maps four; packing, trims and reuse under random
// traffic never cut one, and the invariants (small units stay on the grid) hold throughout.
TEST(PoolMapUnits, MergedEndsMapFewerUnitsAndRandomTrafficNeverCutsOne) {
  {
    UnitCheckingBackend backend;
    PoolOptions options = MappingOptions();
    options.merge_unit_ends = true;
    CachingPool pool(backend, options);
    void* first = *pool.allocate(16 * kMiB, kDefaultStream);
    void* second = *pool.allocate(50 * kMiB, kDefaultStream);
    EXPECT_EQ(backend.map_sizes, (std::vector<std::size_t>{16 * kMiB, 24 * kMiB, 26 * kMiB}));
    ASSERT_TRUE(pool.deallocate(first).ok());
    ExpectEverythingGivenBack(pool, backend, second);
  }
  PoolOptions options = MappingOptions();
  options.merge_unit_ends = true;
  std::size_t merged = 0;
  for (std::size_t s : RandomTrafficMaps(options, 11)) merged += s > 20 * kMiB ? 1 : 0;
  EXPECT_GT(merged, 0u) << "no end piece was merged";
}

// Allocates 6, 8 and 10 MiB (a unit is 20 MiB) in a fresh pool of `options` and returns what the backend
// mapped, after checking the pool's reserve and misses and giving everything back.
std::vector<std::size_t> SixEightTen(PoolOptions options, std::uint64_t reserved, std::uint64_t misses) {
  UnitCheckingBackend backend;
  CachingPool pool(backend, options);
  void* first = *pool.allocate(6 * kMiB, kDefaultStream);
  void* second = *pool.allocate(8 * kMiB, kDefaultStream);
  Result<void*> third = pool.allocate(10 * kMiB, kDefaultStream);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(pool.stats().reserved_bytes, reserved);
  EXPECT_EQ(pool.stats().misses, misses);
  EXPECT_TRUE(pool.deallocate(first).ok());
  EXPECT_TRUE(pool.deallocate(second).ok());
  if (third.ok()) ExpectEverythingGivenBack(pool, backend, *third);
  return backend.map_sizes;
}

// PoolOptions::grow_to_unit_end: a miss that grows upward maps on to the next multiple of the unit, so the
// requests after it fit in the slack without a miss (expandable segments' rule); the next miss starts at that
// multiple. Random traffic never cuts a unit, and everything goes back.
TEST(PoolMapUnits, GrowingToTheUnitEndLeavesSlackTheNextRequestsTake) {
  EXPECT_TRUE(PoolOptions{}.grow_to_unit_end);  // the default
  PoolOptions grow = MappingOptions();
  grow.grow_to_unit_end = true;
  // The 8 MiB request fits in the first unit's slack; 6 MiB are left there for the 10 MiB one: a miss.
  EXPECT_EQ(SixEightTen(grow, 40 * kMiB, 2), (std::vector<std::size_t>{20 * kMiB, 20 * kMiB}));
  // Without it, each request maps its own shortfall (the third cut at the unit's boundary): three misses,
  // 24 MiB.
  EXPECT_EQ(SixEightTen(MappingOptions(), 24 * kMiB, 3),
            (std::vector<std::size_t>{6 * kMiB, 8 * kMiB, 6 * kMiB, 4 * kMiB}));
  // Slack never presses on a limit: at 24 MiB, the third request maps its 4 MiB shortfall alone, where the
  // unit's end would have taken the pool to 40 MiB and failed it.
  PoolOptions limited = grow;
  limited.limit_bytes = 24 * kMiB;
  EXPECT_EQ(SixEightTen(limited, 24 * kMiB, 2), (std::vector<std::size_t>{20 * kMiB, 4 * kMiB}));

  RandomTrafficMaps(grow, 13);
}

// The defaults: units of up to 40 MiB on a 40 MiB grid (fewer driver allocations, each of which the driver
// charges whatever its size), while a growing miss maps on to the next multiple of 20 MiB, expandable
// segments' page, as with 20 MiB units: how far memory grows does not follow the unit. 100 MiB in a fresh
// pool is two 40 MiB units and a 20 MiB one (five with 20 MiB units); 30 MiB more grow the pool to 140 MiB,
// not 160, in two units cut at the grid's multiple of 120 MiB.
TEST(PoolMapUnits, TheDefaultMapsFortyMiBUnitsAndGrowsByTwenty) {
  EXPECT_EQ(PoolOptions::kDefaultLargeMapUnit, 40 * kMiB);
  EXPECT_EQ(PoolOptions::kDefaultLargeGrowStep, 20 * kMiB);
  PoolOptions defaults;
  defaults.growth = PoolGrowth::kMapping;
  defaults.thread_cache_bytes = 0;
  UnitCheckingBackend backend;
  CachingPool pool(backend, defaults);
  void* first = *pool.allocate(100 * kMiB, kDefaultStream);
  EXPECT_EQ(backend.map_sizes, (std::vector<std::size_t>{40 * kMiB, 40 * kMiB, 20 * kMiB}));
  void* second = *pool.allocate(30 * kMiB, kDefaultStream);
  EXPECT_EQ(backend.map_sizes,
            (std::vector<std::size_t>{40 * kMiB, 40 * kMiB, 20 * kMiB, 20 * kMiB, 20 * kMiB}));
  EXPECT_EQ(pool.stats().reserved_bytes, 140 * kMiB);
  EXPECT_EQ(pool.stats().backend_allocations, 5u);
  ASSERT_TRUE(pool.deallocate(first).ok());
  ExpectEverythingGivenBack(pool, backend, second);

  // A step of the unit's size grows as far as the unit: 100 MiB maps on to 120.
  PoolOptions coarse = defaults;
  coarse.large_grow_step_bytes = 40 * kMiB;
  UnitCheckingBackend coarse_backend;
  CachingPool coarse_pool(coarse_backend, coarse);
  void* p = *coarse_pool.allocate(100 * kMiB, kDefaultStream);
  EXPECT_EQ(coarse_backend.map_sizes, (std::vector<std::size_t>{40 * kMiB, 40 * kMiB, 40 * kMiB}));
  ExpectEverythingGivenBack(coarse_pool, coarse_backend, p);
  RandomTrafficMaps(defaults, 17);
}

// A map that fails part-way (the device is full) undoes the units it mapped: nothing stays mapped.
TEST(PoolMapUnits, AFailedMissLeavesNoUnitMapped) {
  UnitCheckingBackend backend(100 * kMiB);
  CachingPool pool(backend, MappingOptions());
  Result<void*> p = pool.allocate(150 * kMiB, kDefaultStream);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted) << p.status().ToString();
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_TRUE(pool.check_invariants().ok());
  EXPECT_EQ(backend.cut_units, 0);
  void* q = *pool.allocate(60 * kMiB, kDefaultStream);  // and the pool still works
  ASSERT_TRUE(pool.deallocate(q).ok());
}

}  // namespace
}  // namespace memcoord
