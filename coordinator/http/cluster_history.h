// ClusterHistory: the recent past of the cluster for the dashboard's timelines: per rank, a ring of memory
// samples (allocated, reserved, limit, device free), and a ring of events (trims, quota moves, OOMs,
// deaths; see cluster_events.h). It is fed whole ClusterViews, typically a few per second by the HTTP
// server's sampler, and diffs each against the one before, so it needs no hook in the coordinator's paths.
//
// Memory is bounded: `samples_per_rank` samples (40 bytes each) per rank seen, `max_events` events.
// Thread safety: every method is thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "coordinator/http/cluster_events.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

struct MemorySample {
  std::int64_t unix_ms = 0;
  std::uint64_t allocated_bytes = 0;  // summed over the rank's pools
  std::uint64_t reserved_bytes = 0;
  std::uint64_t limit_bytes = 0;  // summed quotas (0: some pool has none)
  std::uint64_t device_free_bytes = 0;
};

struct ClusterHistoryOptions {
  std::size_t samples_per_rank = 600;  // at the sampler's 500 ms: the last 5 minutes
  std::size_t max_events = 2000;
};

class ClusterHistory {
 public:
  explicit ClusterHistory(ClusterHistoryOptions options = {});

  // Records one view taken at `unix_ms`: a sample per rank that is not dead, and the events since the
  // previous view.
  void observe(const ClusterView& view, std::int64_t unix_ms);
  // Samples of `rank` after `since_ms`, oldest first (empty for an unknown rank).
  std::vector<MemorySample> samples(int rank, std::int64_t since_ms = 0) const;
  // Ranks with samples, ascending.
  std::vector<int> ranks() const;
  // Events after `since_ms`, oldest first; at most `limit` (the newest ones).
  std::vector<ClusterEvent> events(std::int64_t since_ms = 0, std::size_t limit = 500) const;

 private:
  const ClusterHistoryOptions options_;
  mutable std::mutex mu_;
  // mu_ guards the following.
  ClusterView last_;
  std::map<int, std::deque<MemorySample>> samples_;
  std::deque<ClusterEvent> events_;
};

// One rank's memory summed over its pools, as a sample at `unix_ms`.
MemorySample SampleOf(const WorkerRecord& w, std::int64_t unix_ms);

}  // namespace memcoord::coordinator
