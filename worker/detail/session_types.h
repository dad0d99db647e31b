// Plain types that cross between the Worker and its coordinator session (worker/detail/coordinator_session):
// pool samples going out, commands coming in, acks going back. No gRPC here. Copyable values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocator/pool_stats.h"
#include "common/status.h"

namespace memcoord::detail {

struct PoolSample {
  std::string name;
  PoolStats stats;
  std::vector<TagUsage> tags;
};

// One report: taken by the training thread at step_end (exact end-of-step values) or by the session
// thread every report interval.
struct ReportSample {
  std::int64_t step = 0;
  bool at_step_end = false;
  std::uint64_t device_free_bytes = 0;
  std::vector<PoolSample> pools;
};

struct WorkerCommand {
  enum class Kind { kTrim, kSetQuota, kAbort, kPlacement };
  Kind kind = Kind::kTrim;
  std::uint64_t command_id = 0;
  std::int64_t step = -1;  // trim: at the end of this step
  bool now = false;
  std::uint64_t bytes = 0;  // trim target or quota limit
  std::string pool;         // empty: every pool (trim)
  std::string reason;       // abort
  int dead_rank = -1;       // abort
};

struct CommandAck {
  std::uint64_t command_id = 0;
  Status status;
  std::int64_t step = 0;
  std::uint64_t released_bytes = 0;
  std::uint64_t reserved_after_bytes = 0;
  double duration_ms = 0.0;
};

struct OomAnswer {
  bool granted = false;
  std::uint64_t new_limit_bytes = 0;
  std::string message;
};

struct OomQuestion {
  std::string pool;
  std::uint64_t requested_bytes = 0;
  std::uint64_t limit_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t allocated_bytes = 0;
};

}  // namespace memcoord::detail
