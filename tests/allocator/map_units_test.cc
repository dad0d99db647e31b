// UnitPieces: how the memory one miss maps is cut into driver allocations (allocator/detail/map_units.h).
#include "allocator/detail/map_units.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace memcoord::detail {
namespace {

constexpr std::size_t kMiB = 1 << 20;
constexpr std::size_t kChunk = 2 * kMiB;
constexpr std::size_t kUnit = 20 * kMiB;

std::vector<std::size_t> MiB(std::initializer_list<std::size_t> sizes) {
  std::vector<std::size_t> out;
  for (std::size_t s : sizes) out.push_back(s * kMiB);
  return out;
}

TEST(UnitPieces, UpToTheMostUnitsAMissIsCutAtTheMultiplesOfTheUnit) {
  EXPECT_EQ(UnitPieces(0, 6 * kMiB, kUnit, kChunk), MiB({6}));
  EXPECT_EQ(UnitPieces(0, 20 * kMiB, kUnit, kChunk), MiB({20}));
  EXPECT_EQ(UnitPieces(0, 50 * kMiB, kUnit, kChunk), MiB({20, 20, 10}));
  // From 16 MiB into the segment: up to the multiple at 20, then whole units, then the rest.
  EXPECT_EQ(UnitPieces(16 * kMiB, 50 * kMiB, kUnit, kChunk), MiB({4, 20, 20, 6}));
  EXPECT_EQ(UnitPieces(18 * kMiB, 4 * kMiB, kUnit, kChunk), MiB({2, 2}));
  // Exactly kMaxUnitsPerMiss units is still the grid.
  const std::vector<std::size_t> most = UnitPieces(0, kMaxUnitsPerMiss * kUnit, kUnit, kChunk);
  EXPECT_EQ(most, std::vector<std::size_t>(kMaxUnitsPerMiss, kUnit));
}

TEST(UnitPieces, ALargerMissMapsTheMostUnitsOfEqualSize) {
  // One chunk more than kMaxUnitsPerMiss units: one unit a chunk larger, wherever it starts.
  const std::size_t bytes = kMaxUnitsPerMiss * kUnit + kChunk;
  for (std::size_t offset : {std::size_t{0}, 6 * kMiB}) {
    const std::vector<std::size_t> pieces = UnitPieces(offset, bytes, kUnit, kChunk);
    ASSERT_EQ(pieces.size(), kMaxUnitsPerMiss);
    EXPECT_EQ(pieces.front(), kUnit + kChunk);
    EXPECT_EQ(std::vector<std::size_t>(pieces.begin() + 1, pieces.end()),
              std::vector<std::size_t>(kMaxUnitsPerMiss - 1, kUnit));
    EXPECT_EQ(std::accumulate(pieces.begin(), pieces.end(), std::size_t{0}), bytes);
  }
  // GPT-2's fp32 logits: 1572 MiB is 786 chunks, 18 units of 25 chunks and 14 of 24.
  const std::vector<std::size_t> logits = UnitPieces(0, 1572 * kMiB, kUnit, kChunk);
  ASSERT_EQ(logits.size(), kMaxUnitsPerMiss);
  for (std::size_t i = 0; i < logits.size(); ++i) EXPECT_EQ(logits[i], (i < 18 ? 50 : 48) * kMiB) << i;
}

TEST(UnitPieces, MergedEndsJoinTheirWholeUnitNeighbour) {
  // From 16 MiB: 4 | 20 | 20 | 6 on the grid; the ends join the whole units beside them.
  EXPECT_EQ(UnitPieces(16 * kMiB, 50 * kMiB, kUnit, kChunk, /*merge_ends=*/true), MiB({24, 26}));
  // 4 | 20 | 6: both ends join the one whole unit.
  EXPECT_EQ(UnitPieces(16 * kMiB, 30 * kMiB, kUnit, kChunk, true), MiB({30}));
  EXPECT_EQ(UnitPieces(0, 50 * kMiB, kUnit, kChunk, true), MiB({20, 30}));
  EXPECT_EQ(UnitPieces(18 * kMiB, 22 * kMiB, kUnit, kChunk, true), MiB({22}));
  // No whole-unit neighbour: the partial pieces stay on the grid, never crossing a multiple of the unit.
  EXPECT_EQ(UnitPieces(18 * kMiB, 4 * kMiB, kUnit, kChunk, true), MiB({2, 2}));
  EXPECT_EQ(UnitPieces(0, 6 * kMiB, kUnit, kChunk, true), MiB({6}));
  EXPECT_EQ(UnitPieces(0, 40 * kMiB, kUnit, kChunk, true), MiB({20, 20}));
  // Beyond kMaxUnitsPerMiss units the equal units are unchanged.
  const std::size_t bytes = kMaxUnitsPerMiss * kUnit + kChunk;
  EXPECT_EQ(UnitPieces(6 * kMiB, bytes, kUnit, kChunk, true), UnitPieces(6 * kMiB, bytes, kUnit, kChunk));
}

TEST(UnitPieces, MergedEndsAlwaysSumToTheMissAndStayUnderThreeUnits) {
  for (std::size_t offset = 0; offset < 3 * kUnit; offset += kChunk) {
    for (std::size_t bytes = kChunk; bytes <= 5 * kUnit; bytes += kChunk) {
      const std::vector<std::size_t> grid = UnitPieces(offset, bytes, kUnit, kChunk);
      const std::vector<std::size_t> merged = UnitPieces(offset, bytes, kUnit, kChunk, true);
      EXPECT_EQ(std::accumulate(merged.begin(), merged.end(), std::size_t{0}), bytes)
          << offset << " " << bytes;
      EXPECT_LE(merged.size(), grid.size());
      EXPECT_GE(merged.size() + 2, grid.size());
      std::size_t at = offset;
      for (std::size_t piece : merged) {
        EXPECT_LT(piece, 3 * kUnit);
        if (piece < kUnit) {
          EXPECT_EQ(at / kUnit, (at + piece - 1) / kUnit) << "a small piece crosses the grid";
        }
        at += piece;
      }
    }
  }
}

}  // namespace
}  // namespace memcoord::detail
