#include "coordinator/http/api_json.h"

namespace memcoord::coordinator {

nlohmann::json ClusterJson(const ClusterView& view) {
  return ClusterViewJson(view, ClusterJsonFields::kDashboard);
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
