#include "coordinator/service/live_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "coordinator/planner/json_fields.h"
#include "coordinator/service/saturating.h"

namespace memcoord::coordinator {
namespace {

std::string DeviceName(const LiveDevice& d, int local_rank) {
  std::string ranks;
  for (int r : d.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  const std::string where = d.device >= 0 ? fmt::format("gpu{}", d.device) : fmt::format("sim{}", local_rank);
  return fmt::format("{}:{} (rank{} {})", d.host, where, d.ranks.size() > 1 ? "s" : "", ranks);
}

}  // namespace

std::vector<LiveDevice> LiveDevices(const std::vector<WorkerRecord>& workers) {
  struct Entry {
    LiveDevice device;
    int local_rank = 0;
    Clock::time_point latest{};
  };
  // Keyed like ClusterState's budgets: (host, ordinal, local rank for the host backend); sorted.
  std::map<std::tuple<std::string, int, int>, Entry> by_key;
  for (const WorkerRecord& w : workers) {
    if (!HoldsRank(w.state) || w.reports == 0) continue;
    const int sim = w.id.device < 0 ? w.id.local_rank : 0;
    Entry& e = by_key[{w.id.host, w.id.device, sim}];
    if (e.device.ranks.empty() || w.last_report_at > e.latest) {
      e.device.free_bytes = w.device_free_bytes;
      e.latest = w.last_report_at;
    }
    e.device.host = w.id.host;
    e.device.device = w.id.device;
    e.local_rank = sim;
    e.device.ranks.push_back(w.id.rank);
    e.device.total_bytes = std::max(e.device.total_bytes, w.id.device_total_bytes);
    for (const PoolUsage& p : w.pools) {
      e.device.cached_bytes = SatAdd(e.device.cached_bytes, SatSub(p.reserved_bytes, p.allocated_bytes));
    }
  }
  std::vector<LiveDevice> out;
  for (auto& [key, e] : by_key) {
    if (e.device.free_bytes == 0) continue;
    std::sort(e.device.ranks.begin(), e.device.ranks.end());
    e.device.capacity_bytes = e.device.free_bytes;
    e.device.name = DeviceName(e.device, e.local_rank);
    out.push_back(std::move(e.device));
  }
  return out;
}

Result<LivePlan> PlanOnCluster(std::string_view request_json, const std::vector<WorkerRecord>& workers) {
  // Checked before the request is parsed (and dumped again below, which recurses once per level).
  if (const std::size_t depth = planner::JsonNestingDepth(request_json); depth > planner::kMaxJsonDepth) {
    return InvalidArgument(
        fmt::format("the plan request nests arrays and objects {} levels deep; at most {} are accepted",
                    depth, planner::kMaxJsonDepth));
  }
  nlohmann::json root = nlohmann::json::parse(request_json, nullptr, /*allow_exceptions=*/false);
  const bool live = !root.is_discarded() && root.is_object() && !root.contains("devices");
  if (live) {
    // A stand-in device lets the planner's parser check the models; the live devices replace it below.
    root["devices"] = {{"count", 1}, {"capacity", 1}};
  }
  LivePlan out;
  MEMCOORD_ASSIGN_OR_RETURN(out.request, planner::ParsePlanRequest(live ? root.dump() : request_json));
  if (live) {
    out.devices = LiveDevices(workers);
    if (out.devices.empty()) {
      return FailedPrecondition(
          "no live worker has reported free device memory to plan on (start workers, or list \"devices\" "
          "in the request)");
    }
    out.request.devices.clear();
    for (const LiveDevice& d : out.devices) {
      out.request.devices.push_back(planner::DeviceSpec{d.name, d.capacity_bytes, 0});
    }
  }
  MEMCOORD_ASSIGN_OR_RETURN(out.plan, planner::MakePlan(out.request));
  return out;
}

}  // namespace memcoord::coordinator
