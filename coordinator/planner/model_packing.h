// PackWhole: places indivisible items (whole models) on devices, several per device allowed, minimising the
// busiest device's load within each device's capacity. Exact by branch and bound for up to
// kExactPackingItems items k (largest first, devices in identical state tried once, pruned by the best
// found and the lower bound), searching only the devices that fewer than k others dominate (no more base
// load, no less capacity), which some optimum uses alone: without base loads the k largest, so the search
// costs the same on 65,536 devices as on k. Larger instances start from the longest-processing-time rule
// (largest item to the device whose load stays lowest) and improve it by moves and swaps off the busiest
// device until neither helps, or after 2^22 steps (a scan of the devices or items counts each).
// Deterministic: ties go to the lower device and item index. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"

namespace memcoord::planner {

inline constexpr std::size_t kExactPackingItems = 12;

struct Packing {
  std::vector<std::size_t> device_of;  // per item
  std::vector<std::uint64_t> loads;    // per device, base loads included
  std::uint64_t bottleneck_bytes = 0;
  bool exact = false;  // proven optimal
};

// RESOURCE_EXHAUSTED when some item fits no device or no assignment fits all of them.
// REQUIRES: capacities non-empty; base_loads empty or of capacities' size.
Result<Packing> PackWhole(const std::vector<std::uint64_t>& items,
                          const std::vector<std::uint64_t>& capacities,
                          const std::vector<std::uint64_t>& base_loads = {});

}  // namespace memcoord::planner
