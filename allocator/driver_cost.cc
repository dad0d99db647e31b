#include "allocator/driver_cost.h"

namespace memcoord {

double ModeledDriverMs(const PoolStats& stats, const DriverCostModel& model) {
  const auto mib = [](std::uint64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(1 << 20);
  };
  double us = 0;
  if (stats.maps_chunks) {
    us = static_cast<double>(stats.backend_allocations) * model.map_us_per_unit +
         static_cast<double>(stats.backend_frees) * model.unmap_us_per_unit +
         mib(stats.backend_released_bytes) * model.unmap_us_per_mib;
  } else {
    us = static_cast<double>(stats.backend_allocations) * model.segment_pair_us +
         mib(stats.backend_allocated_bytes) * model.segment_pair_us_per_mib;
  }
  return us / 1000.0;
}

const char* DriverCostModelSummary() {
  return "H200 (bench/gpu/vmm_handle_cost.py): 38 us per unit mapped, 33 us + 0.25 us/MiB per unit unmapped; "
         "segments 61 us + 0.37 us/MiB per cudaMalloc/cudaFree pair";
}

}  // namespace memcoord
