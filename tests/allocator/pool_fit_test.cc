// Which cached block a request takes (Arena::fit): the best fit, except that a free block followed by
// unmapped address space (a hole) ranks by its size plus the hole's, as PyTorch's expandable segments rank
// it, so the next fitting block is taken when it is smaller than that sum. A miss then grows into the kept
// block and maps only what it lacks.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

constexpr std::size_t kMiB = 1 << 20;

// Exact shortfalls (grow_to_unit_end off): the layouts below are Arena::fit's alone.
PoolOptions MappingOptions() {
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;
  options.thread_cache_bytes = 0;
  return options;
}

void* Allocate(CachingPool& pool, std::size_t bytes) {
  Result<void*> p = pool.allocate(bytes, kDefaultStream);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : nullptr;
}

// One block of each size in MiB, in order: each miss maps its own chunks at the arena's end.
std::vector<void*> AllocateInOrder(CachingPool& pool, std::initializer_list<std::size_t> mib) {
  std::vector<void*> blocks;
  for (std::size_t m : mib) blocks.push_back(Allocate(pool, m * kMiB));
  return blocks;
}

TEST(PoolFit, AmongEqualSizesTheLowestAddressIsTaken) {
  VirtualBackend backend;
  CachingPool pool(backend, MappingOptions());
  // [a 8][2][b 8][2][c 8][2]: three equal free blocks, none before unmapped space, freed b last.
  const std::vector<void*> blocks = AllocateInOrder(pool, {8, 2, 8, 2, 8, 2});
  void *a = blocks[0], *b = blocks[2], *c = blocks[4];
  ASSERT_LT(a, b);
  ASSERT_LT(b, c);
  for (void* p : {a, c, b}) ASSERT_TRUE(pool.deallocate(p).ok());
  void* first = Allocate(pool, 8 * kMiB);
  void* second = Allocate(pool, 8 * kMiB);
  EXPECT_EQ(first, a) << "not the most recently freed";
  EXPECT_EQ(second, b);
  for (void* p : {first, second, blocks[1], blocks[3], blocks[5]}) ASSERT_TRUE(pool.deallocate(p).ok());
}

// [front][separator 2][end 8][unmapped ...], the front and end blocks freed.
struct FreeFrontAndEnd {
  void* front;
  void* separator;
  void* end;
};
FreeFrontAndEnd MakeFreeFrontAndEnd(CachingPool& pool, std::size_t front_bytes) {
  FreeFrontAndEnd blocks{Allocate(pool, front_bytes), Allocate(pool, 2 * kMiB), Allocate(pool, 8 * kMiB)};
  EXPECT_TRUE(pool.deallocate(blocks.front).ok());
  EXPECT_TRUE(pool.deallocate(blocks.end).ok());
  EXPECT_EQ(pool.stats().reserved_bytes, front_bytes + 10 * kMiB);
  return blocks;
}

TEST(PoolFit, AFreeBlockAtTheGrowingEndIsTakenLast) {
  VirtualBackend backend;
  CachingPool pool(backend, MappingOptions());
  const auto [middle, separator, end] = MakeFreeFrontAndEnd(pool, 12 * kMiB);

  // The end block fits 6 MiB best, but the middle one is the better fit once the end's growth counts.
  void* six = Allocate(pool, 6 * kMiB);
  EXPECT_EQ(six, middle);
  // A miss of 20 MiB now grows into the whole free end block: 12 MiB mapped, not 18.
  void* twenty = Allocate(pool, 20 * kMiB);
  EXPECT_EQ(twenty, end);
  EXPECT_EQ(pool.stats().reserved_bytes, 34 * kMiB);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  for (void* p : {six, separator, twenty}) ASSERT_TRUE(pool.deallocate(p).ok());
}

// Layout: [8 live][4 free][8 unmapped][2 live][`other_mib` free][2 live]. A 3 MiB request's best fit is the
// 4 MiB block, which ranks as 12 MiB with the hole after it. Returns whether the request took `other`.
bool ThreeMiBTakesTheOtherBlock(std::size_t other_mib) {
  VirtualBackend backend;
  CachingPool pool(backend, MappingOptions());
  const std::vector<void*> blocks = AllocateInOrder(pool, {8, 4, 8, 2, other_mib, 2});
  void *b = blocks[1], *c = blocks[2], *other = blocks[4];
  EXPECT_TRUE(pool.deallocate(b).ok());
  EXPECT_TRUE(pool.deallocate(c).ok());  // one free block of 12 MiB in two units, 4 and 8 MiB
  const std::uint64_t reserved = pool.stats().reserved_bytes;
  pool.trim(reserved - 8 * kMiB);  // unmaps the top unit: 4 MiB free before an 8 MiB hole
  EXPECT_EQ(pool.stats().reserved_bytes, reserved - 8 * kMiB);
  EXPECT_TRUE(pool.deallocate(other).ok());
  void* three = Allocate(pool, 3 * kMiB);
  EXPECT_TRUE(three == b || three == other) << three;
  EXPECT_EQ(pool.stats().reserved_bytes, reserved - 8 * kMiB) << "a cache hit maps nothing";
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  for (void* p : {blocks[0], blocks[3], blocks[5], three}) EXPECT_TRUE(pool.deallocate(p).ok());
  return three == other;
}

TEST(PoolFit, ABlockBeforeASmallHoleGivesWayOnlyToABlockSmallerThanItsReach) {
  EXPECT_TRUE(ThreeMiBTakesTheOtherBlock(10)) << "10 MiB is below 4 + 8";
  EXPECT_FALSE(ThreeMiBTakesTheOtherBlock(14)) << "14 MiB is above 4 + 8: best fit wins";
}

TEST(PoolFit, WithNoOtherFitTheBlockAtTheGrowingEndIsTaken) {
  VirtualBackend backend;
  CachingPool pool(backend, MappingOptions());
  const auto [small, separator, end] = MakeFreeFrontAndEnd(pool, 4 * kMiB);
  void* six = Allocate(pool, 6 * kMiB);  // the 4 MiB block cannot hold it
  EXPECT_EQ(six, end);
  EXPECT_EQ(pool.stats().reserved_bytes, 14 * kMiB);
  for (void* p : {six, separator}) ASSERT_TRUE(pool.deallocate(p).ok());
}

}  // namespace
}  // namespace memcoord
