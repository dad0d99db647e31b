// DriverCostModel: what a pool's backend calls would cost on an NVIDIA H200 (CUDA 13.0, driver 580), so that
// a replay on the `virtual` backend, whose calls are free, can say what the same calls cost on the device.
// The figures are the measured per-chunk and per-call costs of ../shared/data/README.md:
//   mapping (cuda-vmm): cuMemCreate + cuMemMap + cuMemSetAccess 37.5 us per 2 MiB chunk mapped;
//                       cuMemUnmap + cuMemRelease 13.6 ms per GiB = 26.6 us per 2 MiB chunk unmapped;
//   segments (cuda):    a cudaMalloc + cudaFree pair 61 us at 512 B rising to 439 us at 1 GiB, modelled as
//                       61 us + 0.37 us per MiB, charged when the segment is allocated.
// The model is linear in chunks and calls: it ignores the driver's own caching and contention.
#pragma once

#include <cstdint>

#include "allocator/pool_stats.h"

namespace memcoord {

struct DriverCostModel {
  std::uint64_t chunk_bytes = 2ULL << 20;
  double map_us_per_chunk = 37.5;
  double unmap_us_per_chunk = 26.6;
  double segment_pair_us = 61.0;
  double segment_pair_us_per_mib = 0.37;
};

// Milliseconds the backend calls counted in `stats` (or a difference of two snapshots) would take on an H200.
double ModeledDriverMs(const PoolStats& stats, const DriverCostModel& model = {});

// One line naming the model, for reports.
const char* DriverCostModelSummary();

}  // namespace memcoord
