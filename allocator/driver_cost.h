// DriverCostModel: what a pool's backend calls would cost on an NVIDIA H200 (CUDA 13.0, driver 580), so that
// a replay on the `virtual` backend, whose calls are free, can say what the same calls cost on the device.
// The figures are measured on the H200 (bench/gpu/vmm_handle_cost.py, 4 GiB per run, handles of 2 to 64 MiB):
//   mapping (cuda-vmm): cuMemCreate + cuMemMap (+ cuMemSetAccess) cost 35-43 us per physical allocation
//                       whatever its size, modelled as 38 us per mapped unit; cuMemUnmap + cuMemRelease
//                       33 us per unit plus 0.25 us per MiB;
//   segments (cuda):    a cudaMalloc + cudaFree pair 61 us at 512 B rising to 439 us at 1 GiB, modelled as
//                       61 us + 0.37 us per MiB, charged when the segment is allocated.
// A pool's backend_allocations/backend_frees count units (one driver allocation each) or segments. The model
// is linear in units, bytes and calls: it ignores the driver's own caching and contention.
#pragma once

#include <cstdint>

#include "allocator/pool_stats.h"

namespace memcoord {

struct DriverCostModel {
  double map_us_per_unit = 38.0;
  double unmap_us_per_unit = 33.0;
  double unmap_us_per_mib = 0.25;
  double segment_pair_us = 61.0;
  double segment_pair_us_per_mib = 0.37;
};

// Milliseconds the backend calls counted in `stats` (or a difference of two snapshots) would take on an H200.
double ModeledDriverMs(const PoolStats& stats, const DriverCostModel& model = {});

// One line naming the model, for reports.
const char* DriverCostModelSummary();

}  // namespace memcoord
