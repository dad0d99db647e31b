// ClusterState: the coordinator's record of workers by rank: identity, pools, step, last report time and
// liveness, plus each device's memory budget. It is the single source of truth for who holds a rank; the
// service turns session events into calls here.
//
// Liveness is two-stage, so a stall never costs a training job while a dead process is still seen at once:
//
//   Register ──> kLive ──(silent > silence_factor x report interval)──> kSuspect ──(report)──> kLive
//                  │                                                      │
//                  └──────(silent > dead_after; or mark_dead)─────────────┴──> kDead (final for the session)
//
// "Silent" is the time since the last report. sweep() moves workers along the silent edges; mark_dead (the
// session's stream broke or closed: the process died) is immediate from either state. The dead bound is
// max(dead_after, the suspect bound), so a worker with a long report interval is never dead before it could
// be suspect. Defaults: 3 x the interval (100 ms from workers: suspect after 300 ms), dead after 3
// s. A suspect still holds its rank (HoldsRank): it is targeted by trims and quotas, gets aborts, and a
// second Register for its rank is refused. A dead rank may be claimed again by a new Register; a held one may
// not (ALREADY_EXISTS). Sessions are identified by the id register_worker returns, so a stale session cannot
// touch the rank after a newer session took it.
//
// Aborted groups. A worker's death aborts its group (every rank the group holds gets an Abort naming it), and
// the group stays aborted: abort_group records the dead rank, the reason and the time, and any Register into
// the group while the record stands is answered with that same Abort (abort_for), so a rank that registers
// late, or re-registers after its connection was reset (whose own "death" caused the abort), is told too.
// Lifetime: the record ends when the group holds no rank any more (every rank, live or suspect, has died or
// detached): the job is gone, and a restarted job (memcoord-launch reruns the whole job with the same group
// names, new processes) registers into a clean group. A death in a group that holds no other rank records
// nothing (no rank was told, so none can be out of step). The first cause is kept: the deaths an abort causes
// (aborted ranks exit) do not overwrite it. A rank of the old job that registers only after every other
// rank left is indistinguishable from a restarted job and is not aborted (its launcher stops it). Records
// live in memory only: a restarted coordinator knows of no abort.
//
// Thread safety: every method is thread-safe (one mutex). Failure: bad input returns a Status naming it and
// changes nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

struct ClusterStateOptions {
  int silence_factor = 3;        // silent for this many report intervals: suspect
  int max_world_size = 1 << 16;  // larger world sizes are refused as absurd
  // Silent this long: dead (never before the suspect bound). Must be positive.
  std::chrono::milliseconds dead_after{3000};
};

// Why a group was aborted: the rank whose death did it, the reason the Abort gives, and when.
struct GroupAbort {
  std::string group;
  int dead_rank = -1;
  std::string reason;
  Clock::time_point at{};
};

// Step information the trim orchestrator needs about one live rank.
struct RankProgress {
  int rank = -1;
  std::int64_t step = 0;
  double steps_per_second = 0.0;
  std::uint64_t report_age_ms = 0;
};

// Parses the coordinator's --dead-after: "3s", "500ms", "1.5s", "2m", or plain milliseconds ("3000").
// INVALID_ARGUMENT naming the text and what is accepted: a number with ms, s or m, from 100 ms to 1 hour.
Result<std::chrono::milliseconds> ParseDeadAfter(std::string_view text);

class ClusterState {
 public:
  explicit ClusterState(ClusterStateOptions options = {});

  // Claims `id.rank` for a new session and returns the session id.
  // Errors: INVALID_ARGUMENT (rank outside [0, world_size), world size <= 0 or absurd, report interval
  // outside [1, 60000] ms); ALREADY_EXISTS when a live worker holds the rank.
  Result<std::uint64_t> register_worker(const WorkerIdentity& id, std::vector<PoolUsage> pools,
                                        Clock::time_point now);
  // Records a report from `session_id`; a suspect that reports is live again. FAILED_PRECONDITION when that
  // session no longer holds a rank.
  Status report(std::uint64_t session_id, std::int64_t step, std::uint64_t device_free_bytes,
                std::vector<PoolUsage> pools, Clock::time_point now);
  // Marks the rank held by `session_id` dead, live or suspect. Returns it when it held the rank (the caller
  // aborts its group).
  std::optional<DeadWorker> mark_dead(std::uint64_t session_id, const std::string& reason);
  // Moves silent workers along the liveness edges (see the header comment). Returns the workers that just
  // died; the ranks that just became suspect are appended to `new_suspects` when given.
  std::vector<DeadWorker> sweep(Clock::time_point now, std::vector<int>* new_suspects = nullptr);

  // Records that `abort.group` was aborted (unless already aborted: the first cause stands) and returns the
  // ranks the group holds, who must be sent the Abort; records nothing when it holds none. Atomic with
  // register_worker: a rank registering concurrently is either returned here or sees the record in
  // abort_for.
  std::vector<int> abort_group(const GroupAbort& abort);
  // The abort recorded for the group of the rank `session_id` holds; nullopt when that group is not aborted
  // or the session holds no rank.
  std::optional<GroupAbort> abort_for(std::uint64_t session_id) const;

  // Rank held by a live or suspect session, or -1.
  int rank_of(std::uint64_t session_id) const;
  // The live or suspect session holding `rank`, or 0.
  std::uint64_t session_of(int rank) const;
  // Ranks held (live or suspect) in `group` (every group when empty), ascending.
  std::vector<int> live_ranks(const std::string& group = "") const;
  std::vector<RankProgress> progress(const std::vector<int>& ranks, Clock::time_point now) const;
  Result<WorkerRecord> worker(int rank) const;
  std::vector<WorkerRecord> snapshot(Clock::time_point now) const;

  // Device budgets, keyed by the worker's host and device. NOT_FOUND for an unknown rank.
  Status set_device_budget(int rank, std::uint64_t budget_bytes);
  std::uint64_t device_budget(int rank) const;
  // Held ranks sharing `rank`'s device (itself included).
  std::vector<int> device_peers(int rank) const;
  // Records a quota the coordinator assigned (so snapshots and policy see it before the next report).
  void note_limit(int rank, const std::string& pool, std::uint64_t limit_bytes);

 private:
  static std::string DeviceKey(const WorkerIdentity& id);
  static ClusterStateOptions Normalized(ClusterStateOptions options);
  // Ends `group`'s abort record when the group holds no rank. REQUIRES: mu_ held.
  void forget_abort_if_empty(const std::string& group);

  const ClusterStateOptions options_;
  mutable std::mutex mu_;
  // mu_ guards the following.
  std::map<int, WorkerRecord> workers_;
  std::map<std::uint64_t, int> session_rank_;  // sessions holding a rank (live or suspect) only
  std::map<std::string, std::uint64_t> budgets_;
  std::map<std::string, GroupAbort> aborted_;  // by group; only groups that hold a rank
  std::uint64_t next_session_ = 1;
};

}  // namespace memcoord::coordinator
