// ClusterViewJson: the cluster as JSON — the one serializer behind `memcoord status --json` and the
// dashboard's /api/cluster. Bytes and counts are integers, rates and latencies doubles; object keys come
// out sorted (nlohmann::json), so the same view always gives the same text. Two field sets:
//   kStatus     what `memcoord status --json` prints: {"workers": [...], "leaks": [...], "coordinator":
//               {...}} with each worker's identity (device_uuid included: "GPU-..." on CUDA backends,
//               empty on host/virtual), state, step and pools (counters and tags' live bytes). Scripts
//               read it: keys are only ever added (tests/coordinator/cluster_json_test.cc pins the text).
//   kDashboard  kStatus plus the dashboard's extras: per worker steps_per_second, per pool
//               allocations, cache_hits, driver_map_calls and driver_unmap_calls, per tag live_blocks,
//               and coordinator.trims (trims completed).
// Pure function of the view; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

enum class ClusterJsonFields { kStatus, kDashboard };

nlohmann::json ClusterViewJson(const ClusterView& view, ClusterJsonFields fields);

}  // namespace memcoord::coordinator
