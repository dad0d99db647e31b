// Plain value types for what the coordinator knows about workers: identity, pool usage, state. They carry
// no gRPC or protobuf; proto_convert.h maps them to and from memcoord.v1 messages. Copyable values, no
// thread safety of their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace memcoord::coordinator {

using Clock = std::chrono::steady_clock;

struct TagBytes {
  std::string tag;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_blocks = 0;
};

// One pool's counters as a worker reported them.
struct PoolUsage {
  std::string name;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t limit_bytes = 0;  // 0: no quota
  std::uint64_t largest_free_bytes = 0;
  std::uint64_t trims = 0;
  std::uint64_t trimmed_bytes = 0;
  std::uint64_t ooms = 0;
  std::uint64_t allocations = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t driver_map_calls = 0;    // backend map calls (or segment allocations), since the pool began
  std::uint64_t driver_unmap_calls = 0;  // backend unmap calls (or segment releases)
  std::vector<TagBytes> tags;            // largest first
};

// Who a worker is, as it said in its Register message.
struct WorkerIdentity {
  int rank = -1;
  int local_rank = 0;
  int world_size = 0;
  std::string host;
  int device = -1;
  std::string device_name;
  std::string device_uuid;  // "GPU-..." as nvidia-smi prints it; empty when the worker did not say
  std::string backend;
  std::uint64_t device_total_bytes = 0;
  std::string group = "world";
  std::int64_t pid = 0;
  std::uint32_t report_interval_ms = 100;
};

// Liveness, two-stage (see ClusterState): kLive reports on time; kSuspect has missed a few report intervals
// but still holds its rank and its session (a stall, a stopped process, a slow network); kDead is final for
// that session: the rank is free and the group was aborted.
enum class WorkerState { kLive, kSuspect, kDead };

// A live or suspect worker holds its rank: it gets commands and aborts, and a second worker cannot claim it.
inline bool HoldsRank(WorkerState state) { return state != WorkerState::kDead; }
// "live", "suspect", "dead": the names `memcoord status` prints.
inline const char* StateName(WorkerState state) {
  switch (state) {
    case WorkerState::kLive:
      return "live";
    case WorkerState::kSuspect:
      return "suspect";
    case WorkerState::kDead:
      return "dead";
  }
  return "unknown";
}

// Everything known about the worker holding one rank.
struct WorkerRecord {
  WorkerIdentity id;
  WorkerState state = WorkerState::kLive;
  std::string dead_reason;
  std::uint64_t session_id = 0;  // the session that holds the rank (0: none)
  std::int64_t step = 0;
  double steps_per_second = 0.0;         // smoothed from successive reports
  std::uint64_t last_report_age_ms = 0;  // filled in by snapshots
  std::uint64_t device_free_bytes = 0;
  std::uint64_t device_budget_bytes = 0;  // filled in by snapshots
  std::uint64_t reports = 0;
  std::vector<PoolUsage> pools;
  Clock::time_point registered_at{};
  Clock::time_point last_report_at{};
  // Step rate is measured over at least kRateWindow between anchors, and only up to a report whose step
  // moved: report arrival times alone are too noisy (a step-end report and a periodic one may land
  // microseconds apart), and a slow step (10 s) would otherwise read as alternately 0 and 5 steps/s.
  std::int64_t rate_anchor_step = 0;
  Clock::time_point rate_anchor_at{};
};

// Steady growth of live bytes in one pool and tag: a likely leak.
struct LeakAlert {
  int rank = -1;
  std::string pool;
  std::string tag;
  std::int64_t bytes_per_step = 0;
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::uint64_t live_bytes = 0;
};

// A cumulative histogram as Prometheus exposes it: counts[i] observations <= bounds_s[i]; count in all.
struct HistogramView {
  std::vector<double> bounds_s;
  std::vector<std::uint64_t> counts;
  double sum_s = 0;
  std::uint64_t count = 0;
};

struct CoordinatorStatsView {
  std::string coordinator_id;
  std::uint64_t uptime_ms = 0;
  std::uint64_t reports = 0;
  double report_handling_p50_us = 0;
  double report_handling_p99_us = 0;
  std::uint64_t live_sessions = 0;
  HistogramView trim_fanout;  // seconds from a trim command's send to its last ack (TrimOutcome::fanout_ms)
};

struct ClusterView {
  std::vector<WorkerRecord> workers;  // by rank
  std::vector<LeakAlert> leaks;
  CoordinatorStatsView stats;
};

// A device the Plan RPC places onto, built from live workers' reports (see live_plan.h).
struct LiveDevice {
  std::string name;  // "host:gpu0 (ranks 0,1)"; host backend: "host:sim<local rank> (rank r)"
  std::string host;
  int device = -1;                   // CUDA ordinal; -1 for the host backend
  std::vector<int> ranks;            // live ranks on it, ascending
  std::uint64_t free_bytes = 0;      // measured free memory, latest report of its ranks
  std::uint64_t cached_bytes = 0;    // reserved but unallocated in its pools (a trim could free it)
  std::uint64_t capacity_bytes = 0;  // what the planner was given (= free_bytes)
  std::uint64_t total_bytes = 0;     // the device's total memory
};

// A worker that just died and the reason; the group is aborted.
struct DeadWorker {
  int rank = -1;
  std::uint64_t session_id = 0;
  std::string group;
  std::string reason;
};

}  // namespace memcoord::coordinator
