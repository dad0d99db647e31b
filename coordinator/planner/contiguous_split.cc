#include "coordinator/planner/contiguous_split.h"

#include <algorithm>

#include "common/bytes.h"
#include "coordinator/planner/limits.h"

namespace memcoord::planner {
namespace {

// Greedy fill at bottleneck `limit`; fills `first` when given. Returns whether every item was placed.
bool FillGreedy(const std::vector<std::uint64_t>& prefix, const std::vector<std::uint64_t>& capacities,
                const std::vector<std::uint64_t>& base, std::uint64_t limit,
                std::vector<std::size_t>* first) {
  const std::size_t n = prefix.size() - 1;
  std::size_t pos = 0;
  for (std::size_t j = 0; j < capacities.size(); ++j) {
    if (first) (*first)[j] = pos;
    const std::uint64_t cap = std::min(limit, capacities[j]);
    const std::uint64_t room = cap > base[j] ? cap - base[j] : 0;
    // Largest k with prefix[k] - prefix[pos] <= room.
    const std::uint64_t reach = prefix[pos] + room;
    pos = static_cast<std::size_t>(
              std::upper_bound(prefix.begin() + static_cast<std::ptrdiff_t>(pos), prefix.end(), reach) -
              prefix.begin()) -
          1;
    if (pos == n) {
      if (first) std::fill(first->begin() + static_cast<std::ptrdiff_t>(j) + 1, first->end(), n);
      return true;
    }
  }
  return pos == n;
}

}  // namespace

std::uint64_t ChainLowerBound(const std::vector<std::uint64_t>& items,
                              const std::vector<std::uint64_t>& capacities) {
  std::uint64_t total = 0;
  std::uint64_t largest = 0;
  for (std::uint64_t w : items) {
    total += w;
    largest = std::max(largest, w);
  }
  if (capacities.empty()) return std::max(largest, total);
  // Water-filling: smallest T with sum_j min(c_j, T) >= total.
  std::vector<std::uint64_t> caps = capacities;
  std::sort(caps.begin(), caps.end());
  std::uint64_t below = 0;  // sum of capacities smaller than the level
  std::uint64_t level = total;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    const std::uint64_t rest = caps.size() - i;
    const std::uint64_t need = total > below ? total - below : 0;
    const std::uint64_t t = (need + rest - 1) / rest;
    if (t <= caps[i]) {
      level = t;
      break;
    }
    below += caps[i];
    level = total;  // capacities too small: the bound is the total itself
  }
  return std::max(largest, level);
}

Result<ChainSplit> SplitChain(const std::vector<std::uint64_t>& items,
                              const std::vector<std::uint64_t>& capacities,
                              const std::vector<std::uint64_t>& base_loads) {
  if (capacities.empty()) return InvalidArgument("no devices to split over");
  std::vector<std::uint64_t> base(capacities.size(), 0);
  for (std::size_t j = 0; j < base_loads.size() && j < base.size(); ++j) base[j] = base_loads[j];
  std::vector<std::uint64_t> prefix(items.size() + 1, 0);
  for (std::size_t i = 0; i < items.size(); ++i) prefix[i + 1] = prefix[i] + items[i];

  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  for (std::size_t j = 0; j < capacities.size(); ++j) {
    lo = std::max(lo, base[j]);
    hi = std::max(hi, capacities[j]);
  }
  hi = std::max(hi, lo);
  if (!FillGreedy(prefix, capacities, base, hi, nullptr)) {
    std::uint64_t room = 0;
    for (std::size_t j = 0; j < capacities.size(); ++j)
      room = AddSaturated(room, capacities[j] > base[j] ? capacities[j] - base[j] : 0);
    const std::uint64_t largest = items.empty() ? 0 : *std::max_element(items.begin(), items.end());
    return ResourceExhausted("the chain needs " + FormatBytes(prefix.back()) + " (largest unit " +
                             FormatBytes(largest) + ") but the devices have " + FormatBytes(room) +
                             " free in total across " + std::to_string(capacities.size()) +
                             " devices, and no contiguous split fits");
  }
  // Invariant: hi feasible; the answer lies in [lo, hi].
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (FillGreedy(prefix, capacities, base, mid, nullptr)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  ChainSplit split;
  split.first.assign(capacities.size() + 1, items.size());
  FillGreedy(prefix, capacities, base, hi, &split.first);
  split.first[capacities.size()] = items.size();
  split.loads.assign(capacities.size(), 0);
  for (std::size_t j = 0; j < capacities.size(); ++j) {
    split.loads[j] = base[j] + prefix[split.first[j + 1]] - prefix[split.first[j]];
    split.bottleneck_bytes = std::max(split.bottleneck_bytes, split.loads[j]);
  }
  return split;
}

}  // namespace memcoord::planner
