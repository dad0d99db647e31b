#include "coordinator/http/cluster_history.h"

#include <algorithm>

namespace memcoord::coordinator {

MemorySample SampleOf(const WorkerRecord& w, std::int64_t unix_ms) {
  MemorySample s;
  s.unix_ms = unix_ms;
  bool unlimited = w.pools.empty();
  for (const PoolUsage& p : w.pools) {
    s.allocated_bytes += p.allocated_bytes;
    s.reserved_bytes += p.reserved_bytes;
    s.limit_bytes += p.limit_bytes;
    unlimited = unlimited || p.limit_bytes == 0;
  }
  if (unlimited) s.limit_bytes = 0;
  s.device_free_bytes = w.device_free_bytes;
  return s;
}

ClusterHistory::ClusterHistory(ClusterHistoryOptions options) : options_(options) {}

void ClusterHistory::observe(const ClusterView& view, std::int64_t unix_ms) {
  std::lock_guard lock(mu_);
  for (ClusterEvent& e : DiffClusterViews(last_, view, unix_ms)) events_.push_back(std::move(e));
  while (events_.size() > options_.max_events) events_.pop_front();
  for (const WorkerRecord& w : view.workers) {
    if (w.state == WorkerState::kDead) continue;
    std::deque<MemorySample>& ring = samples_[w.id.rank];
    ring.push_back(SampleOf(w, unix_ms));
    while (ring.size() > options_.samples_per_rank) ring.pop_front();
  }
  last_ = view;
}

std::vector<MemorySample> ClusterHistory::samples(int rank, std::int64_t since_ms) const {
  std::lock_guard lock(mu_);
  auto it = samples_.find(rank);
  if (it == samples_.end()) return {};
  std::vector<MemorySample> out;
  for (const MemorySample& s : it->second) {
    if (s.unix_ms > since_ms) out.push_back(s);
  }
  return out;
}

std::vector<int> ClusterHistory::ranks() const {
  std::lock_guard lock(mu_);
  std::vector<int> out;
  for (const auto& [rank, ring] : samples_) out.push_back(rank);
  return out;
}

std::vector<ClusterEvent> ClusterHistory::events(std::int64_t since_ms, std::size_t limit) const {
  std::lock_guard lock(mu_);
  std::vector<ClusterEvent> out;
  for (const ClusterEvent& e : events_) {
    if (e.unix_ms > since_ms) out.push_back(e);
  }
  if (out.size() > limit) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(limit));
  return out;
}

}  // namespace memcoord::coordinator
