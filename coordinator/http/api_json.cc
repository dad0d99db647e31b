#include "coordinator/http/api_json.h"

namespace memcoord::coordinator {
namespace {

nlohmann::json PoolJson(const PoolUsage& p) {
  nlohmann::json tags = nlohmann::json::array();
  for (const TagBytes& t : p.tags) {
    tags.push_back({{"tag", t.tag}, {"live_bytes", t.live_bytes}, {"live_blocks", t.live_blocks}});
  }
  return {{"name", p.name},
          {"allocated_bytes", p.allocated_bytes},
          {"peak_allocated_bytes", p.peak_allocated_bytes},
          {"reserved_bytes", p.reserved_bytes},
          {"peak_reserved_bytes", p.peak_reserved_bytes},
          {"limit_bytes", p.limit_bytes},
          {"largest_free_bytes", p.largest_free_bytes},
          {"trims", p.trims},
          {"trimmed_bytes", p.trimmed_bytes},
          {"ooms", p.ooms},
          {"allocations", p.allocations},
          {"cache_hits", p.cache_hits},
          {"driver_map_calls", p.driver_map_calls},
          {"driver_unmap_calls", p.driver_unmap_calls},
          {"tags", tags}};
}

nlohmann::json WorkerJson(const WorkerRecord& w) {
  nlohmann::json pools = nlohmann::json::array();
  for (const PoolUsage& p : w.pools) pools.push_back(PoolJson(p));
  return {{"rank", w.id.rank},
          {"local_rank", w.id.local_rank},
          {"world_size", w.id.world_size},
          {"host", w.id.host},
          {"device", w.id.device},
          {"device_name", w.id.device_name},
          {"device_uuid", w.id.device_uuid},
          {"backend", w.id.backend},
          {"group", w.id.group},
          {"pid", w.id.pid},
          {"state", StateName(w.state)},
          {"dead_reason", w.dead_reason},
          {"step", w.step},
          {"steps_per_second", w.steps_per_second},
          {"last_report_age_ms", w.last_report_age_ms},
          {"device_total_bytes", w.id.device_total_bytes},
          {"device_free_bytes", w.device_free_bytes},
          {"device_budget_bytes", w.device_budget_bytes},
          {"pools", pools}};
}

}  // namespace

nlohmann::json ClusterJson(const ClusterView& view) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerRecord& w : view.workers) workers.push_back(WorkerJson(w));
  nlohmann::json leaks = nlohmann::json::array();
  for (const LeakAlert& l : view.leaks) {
    leaks.push_back({{"rank", l.rank},
                     {"pool", l.pool},
                     {"tag", l.tag},
                     {"bytes_per_step", l.bytes_per_step},
                     {"first_step", l.first_step},
                     {"last_step", l.last_step},
                     {"live_bytes", l.live_bytes}});
  }
  return {{"workers", workers},
          {"leaks", leaks},
          {"coordinator",
           {{"id", view.stats.coordinator_id},
            {"uptime_ms", view.stats.uptime_ms},
            {"reports", view.stats.reports},
            {"report_handling_p50_us", view.stats.report_handling_p50_us},
            {"report_handling_p99_us", view.stats.report_handling_p99_us},
            {"live_sessions", view.stats.live_sessions},
            {"trims", view.stats.trim_fanout.count}}}};
}

nlohmann::json EventsJson(const std::vector<ClusterEvent>& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const ClusterEvent& e : events) {
    out.push_back({{"t", e.unix_ms},
                   {"rank", e.rank},
                   {"kind", e.kind},
                   {"pool", e.pool},
                   {"bytes", e.bytes},
                   {"count", e.count},
                   {"detail", e.detail}});
  }
  return out;
}

nlohmann::json TimelineJson(const ClusterHistory& history, const std::vector<int>& ranks,
                            std::int64_t since_ms) {
  nlohmann::json out_ranks = nlohmann::json::array();
  for (int rank : ranks) {
    nlohmann::json samples = nlohmann::json::array();
    for (const MemorySample& s : history.samples(rank, since_ms)) {
      samples.push_back({s.unix_ms, s.allocated_bytes, s.reserved_bytes, s.limit_bytes, s.device_free_bytes});
    }
    out_ranks.push_back({{"rank", rank}, {"samples", std::move(samples)}});
  }
  return {{"ranks", std::move(out_ranks)}, {"events", EventsJson(history.events(since_ms))}};
}

}  // namespace memcoord::coordinator
