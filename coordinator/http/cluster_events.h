// Cluster events derived from two successive ClusterViews: what happened between them, per rank. The
// coordinator's parts need no hooks for this: the workers' own counters (trims, trimmed bytes, OOMs) only
// grow within a session, limits change on quota moves, and liveness is a state. So a diff of two views
// loses nothing countable, whatever the time between them (several trims between two views are one event
// whose count says how many). Used by the dashboard's timeline (ClusterHistory) and `memcoord status
// --watch`. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

struct ClusterEvent {
  std::int64_t unix_ms = 0;  // when the diff saw it (wall clock)
  int rank = -1;
  // "register" (a new session took the rank), "live" (a suspect reported again), "suspect", "dead",
  // "trim" (bytes: released), "oom" (count: failed allocations), "quota" (bytes: the new limit).
  std::string kind;
  std::string pool;  // trim, oom, quota
  std::uint64_t bytes = 0;
  std::uint64_t count = 1;
  std::string detail;  // a short human sentence
};

// What changed from `before` to `after` (either may be empty), ordered by rank. A rank whose session
// changed counts as registered again: its counters restart, so no deltas are taken across it.
std::vector<ClusterEvent> DiffClusterViews(const ClusterView& before, const ClusterView& after,
                                           std::int64_t unix_ms);

}  // namespace memcoord::coordinator
