// The dashboard's JSON API bodies: the cluster (/api/cluster), per-rank timelines (/api/timeline) and
// events (/api/events). Bytes are integers, times are Unix milliseconds. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "coordinator/http/cluster_history.h"
#include "coordinator/service/cluster_json.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

// `memcoord status --json`'s fields and the dashboard's extras: ClusterViewJson(view, kDashboard).
nlohmann::json ClusterJson(const ClusterView& view);
nlohmann::json EventsJson(const std::vector<ClusterEvent>& events);
// {"ranks": [{"rank": r, "samples": [[unix_ms, allocated, reserved, limit, device_free], ...]}, ...],
//  "events": [...]}: samples as arrays, so 64 ranks x 600 samples stay a few hundred KB.
nlohmann::json TimelineJson(const ClusterHistory& history, const std::vector<int>& ranks,
                            std::int64_t since_ms);

}  // namespace memcoord::coordinator
