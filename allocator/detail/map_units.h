// How a mapping arena cuts the memory a miss maps into units, one driver allocation each. A pure function of
// offsets and sizes, so the same events cut the same units on any backend.
//   The driver charges per allocation, not per byte (cuMemCreate plus cuMemSetAccess: 45-85 us each in a
//   first training step on an H200), and a unit is unmapped only whole (the driver cannot unmap part of a
//   physical allocation). Units of at most the arena's unit, cut on a grid of its multiples, keep packing and
//   trims fine-grained; a miss of more than kMaxUnitsPerMiss units (a logits block, a long sequence's
//   activations) would pay for that grain in driver calls on every first step, so it maps fewer, larger
//   units.
#pragma once

#include <cstddef>
#include <vector>

namespace memcoord::detail {

// A miss that would map more units than this maps exactly this many, of equal size, instead: GPT-2's
// 1.5 GiB fp32 logits block is 32 driver allocations of ~49 MiB instead of 79 of 20 MiB. Replays of
// bench/traces (memcoord replay, the virtual backend) peak at the same bytes as with 20 MiB units throughout
// on all but gpt2_bf16_varlen (+92 MiB, 22,914 against 22,822; expandable_segments' model reserves 24,384)
// and map 16% fewer units on alternating and gpt2_fp32, 33% fewer on varlen (re-measured with Arena::fit;
// before it, +88 MiB and 19%). 16 mapped fewer still (24-42%) but cost varlen 174 MiB, and its replay at
// --gpu-lag 200 without markers at frees peaked 102 MiB above the one with them
// (tests/allocator/replay_test.cc allows 64); those two figures predate Arena::fit.
inline constexpr std::size_t kMaxUnitsPerMiss = 32;

// The units of `bytes` of new memory (a positive multiple of `chunk`) mapped at `offset` from its segment's
// base (a multiple of `chunk`); `unit` is a multiple of `chunk`. Up to kMaxUnitsPerMiss * unit bytes: cut
// at the multiples of `unit` from the base (at most `unit` each). Beyond: kMaxUnitsPerMiss units of equal
// size in chunks (the first ones a chunk larger when the chunks do not divide evenly). They sum to `bytes`.
// With `merge_ends` (PoolOptions::merge_unit_ends), a grid cut's first or last piece smaller than `unit`
// joins its neighbour when that one is at least `unit`: one or two driver allocations fewer per miss, each
// under three units; a piece smaller than `unit` still never crosses a multiple of it.
std::vector<std::size_t> UnitPieces(std::size_t offset, std::size_t bytes, std::size_t unit,
                                    std::size_t chunk, bool merge_ends = false);

}  // namespace memcoord::detail
