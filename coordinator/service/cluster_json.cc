#include "coordinator/service/cluster_json.h"

namespace memcoord::coordinator {
namespace {

nlohmann::json TagJson(const TagBytes& t, bool dashboard) {
  nlohmann::json out = {{"tag", t.tag}, {"live_bytes", t.live_bytes}};
  if (dashboard) out["live_blocks"] = t.live_blocks;
  return out;
}

nlohmann::json PoolJson(const PoolUsage& p, bool dashboard) {
  nlohmann::json tags = nlohmann::json::array();
  for (const TagBytes& t : p.tags) tags.push_back(TagJson(t, dashboard));
  nlohmann::json out = {{"name", p.name},
                        {"allocated_bytes", p.allocated_bytes},
                        {"peak_allocated_bytes", p.peak_allocated_bytes},
                        {"reserved_bytes", p.reserved_bytes},
                        {"peak_reserved_bytes", p.peak_reserved_bytes},
                        {"limit_bytes", p.limit_bytes},
                        {"largest_free_bytes", p.largest_free_bytes},
                        {"trims", p.trims},
                        {"trimmed_bytes", p.trimmed_bytes},
                        {"ooms", p.ooms},
                        {"tags", tags}};
  if (dashboard) {
    out["allocations"] = p.allocations;
    out["cache_hits"] = p.cache_hits;
    out["driver_map_calls"] = p.driver_map_calls;
    out["driver_unmap_calls"] = p.driver_unmap_calls;
  }
  return out;
}

nlohmann::json WorkerJson(const WorkerRecord& w, bool dashboard) {
  nlohmann::json pools = nlohmann::json::array();
  for (const PoolUsage& p : w.pools) pools.push_back(PoolJson(p, dashboard));
  nlohmann::json out = {{"rank", w.id.rank},
                        {"local_rank", w.id.local_rank},
                        {"world_size", w.id.world_size},
                        {"host", w.id.host},
                        {"device", w.id.device},
                        {"device_name", w.id.device_name},
                        {"backend", w.id.backend},
                        {"group", w.id.group},
                        {"pid", w.id.pid},
                        {"state", StateName(w.state)},
                        {"dead_reason", w.dead_reason},
                        {"step", w.step},
                        {"last_report_age_ms", w.last_report_age_ms},
                        {"device_total_bytes", w.id.device_total_bytes},
                        {"device_uuid", w.id.device_uuid},
                        {"device_free_bytes", w.device_free_bytes},
                        {"device_budget_bytes", w.device_budget_bytes},
                        {"pools", pools}};
  if (dashboard) {
    out["steps_per_second"] = w.steps_per_second;
  }
  return out;
}

nlohmann::json LeakJson(const LeakAlert& l) {
  return {{"rank", l.rank},
          {"pool", l.pool},
          {"tag", l.tag},
          {"bytes_per_step", l.bytes_per_step},
          {"first_step", l.first_step},
          {"last_step", l.last_step},
          {"live_bytes", l.live_bytes}};
}

nlohmann::json CoordinatorJson(const CoordinatorStatsView& s, bool dashboard) {
  nlohmann::json out = {{"id", s.coordinator_id},
                        {"uptime_ms", s.uptime_ms},
                        {"reports", s.reports},
                        {"report_handling_p50_us", s.report_handling_p50_us},
                        {"report_handling_p99_us", s.report_handling_p99_us},
                        {"live_sessions", s.live_sessions}};
  if (dashboard) out["trims"] = s.trim_fanout.count;
  return out;
}

}  // namespace

nlohmann::json ClusterViewJson(const ClusterView& view, ClusterJsonFields fields) {
  const bool dashboard = fields == ClusterJsonFields::kDashboard;
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerRecord& w : view.workers) workers.push_back(WorkerJson(w, dashboard));
  nlohmann::json leaks = nlohmann::json::array();
  for (const LeakAlert& l : view.leaks) leaks.push_back(LeakJson(l));
  return {{"workers", workers}, {"leaks", leaks}, {"coordinator", CoordinatorJson(view.stats, dashboard)}};
}

}  // namespace memcoord::coordinator
