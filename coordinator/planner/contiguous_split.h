// SplitChain: the optimal contiguous split of a chain of items (a model's layers, in order) over devices
// taken in their given order (pipeline order). Device j receives the items [first[j], first[j+1]), possibly
// none, and must stay within capacities[j] - base_loads[j]. The split minimises the busiest device's
// total load max_j(base_loads[j] + chain load on j) — exactly, also with unequal capacities.
//
// Method: the optimum T* is an integer; a bottleneck T is feasible iff the greedy fill (each device, in
// order, takes the longest run of the remaining items that keeps it within min(T, capacity)) places every
// item — a device taking fewer items never helps the ones after it. Binary search over integers finds T*
// in O(log(total) · devices · log(items)) using prefix sums. Deterministic: among optimal splits it returns
// the greedy one (earlier devices filled first). Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"

namespace memcoord::planner {

struct ChainSplit {
  std::vector<std::size_t> first;      // size devices + 1; first[devices] == items
  std::vector<std::uint64_t> loads;    // base load + chain items, per device
  std::uint64_t bottleneck_bytes = 0;  // max over loads
};

// RESOURCE_EXHAUSTED when no contiguous split fits (the message gives the bytes needed and available).
// REQUIRES: capacities non-empty; base_loads empty or of capacities' size. A device whose base load already
// exceeds its capacity takes no items (its base load still counts in the bottleneck).
Result<ChainSplit> SplitChain(const std::vector<std::uint64_t>& items,
                              const std::vector<std::uint64_t>& capacities,
                              const std::vector<std::uint64_t>& base_loads = {});

// A lower bound on the busiest device's load for any placement (contiguous or not): the largest item, and
// the smallest level T with sum_j min(capacity_j, T) >= total (ceil(total / devices) with equal capacities).
std::uint64_t ChainLowerBound(const std::vector<std::uint64_t>& items,
                              const std::vector<std::uint64_t>& capacities);

}  // namespace memcoord::planner
