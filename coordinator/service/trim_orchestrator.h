// TrimOrchestrator: a cluster-wide cache trim that every rank should perform at the end of the same step S,
// so the stall lands on one step everywhere and never inside a collective (or at once, with `now`).
//
// S is a prediction, not a guarantee, so the outcome reports what happened, and S is picked to make late
// ranks rare:
//   - S is ahead of every targeted rank: for each, its last reported step plus the steps it runs before
//     the command reaches it, step rate x (report age + lead + its measured command round trip, see
//     AckBoard::round_trip), then the largest of those plus step_margin.
//   - A rank already past S when the command arrives trims at the end of its current step instead (the
//     worker's rule); its ack says which step. JudgeTrim sorts acks into ranks that trimmed at S, late
//     ranks (another step), failed ranks (an error) and missing ranks (no ack by the deadline, or died).
//     `complete` holds only when every targeted rank acked OK at S (with `now`: every rank acked OK).
//   - Deadline, unless the request gives one (TrimDeadline):
//       per rank r: need_r = (S - step_r + 1) x step_time_r + lead_r    (step_time_r = 1 / rate_r, 0 when
//                   the rate is unknown; lead_r = report age + lead + round trip; `now`: need_r = lead_r)
//       deadline = clamp(2 x max_r need_r + 1 s, kMinTrimDeadline = 5 s, kMaxTrimDeadline = 600 s)
//     so a 10 s step (a 70B model) three steps ahead waits ~81 s, not 5 s, and a fast job keeps 5 s.
// run() sends the command through a Sender, then waits on an AckBoard until every rank acked, died, or the
// deadline passed: the outcome then names the missing ranks instead of hanging.
//
// Thread safety: run() may be called from several threads at once (each trim has its own command id);
// acks and deaths are routed through the AckBoard the orchestrator was given. Does not own the board.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coordinator/service/ack_board.h"
#include "coordinator/service/cluster_state.h"

namespace memcoord::coordinator {

constexpr std::chrono::milliseconds kMinTrimDeadline{5000};
constexpr std::chrono::milliseconds kMaxTrimDeadline{600000};

struct TrimSpec {
  std::uint64_t target_bytes = 0;  // per pool; 0 releases all cache
  bool now = false;
  std::string pool;                       // empty: every pool
  std::chrono::milliseconds deadline{0};  // 0: TrimDeadline (scaled with the slowest rank's step time)
};

struct TrimCommandSpec {
  std::uint64_t command_id = 0;
  std::int64_t step = -1;  // -1 with `now`
  bool now = false;
  std::uint64_t target_bytes = 0;
  std::string pool;
};

struct TrimOutcome {
  std::int64_t step = -1;          // the requested step S; -1 for `now`
  bool complete = false;           // every targeted rank acked OK, at S (see JudgeTrim)
  std::vector<RankAck> acks;       // by rank, each with the step it trimmed at
  std::vector<int> missing_ranks;  // no ack by the deadline, or died
  std::vector<int> late_ranks;     // acked OK at a step other than S (filled by JudgeTrim)
  std::vector<int> failed_ranks;   // acked with an error (filled by JudgeTrim)
  std::uint64_t released_bytes = 0;
  // `now`: send to last ack. At step S: first ack to last ack (the wait for S itself excluded).
  double fanout_ms = 0.0;
  double total_ms = 0.0;
  std::chrono::milliseconds deadline{0};  // the deadline the trim ran with
};

// Fills complete, late_ranks and failed_ranks from step, acks and missing_ranks (the server and the CLI
// judge alike). A `now` trim (step < 0) has no late ranks.
void JudgeTrim(TrimOutcome& outcome);

struct TrimOrchestratorOptions {
  int step_margin = 2;
  std::chrono::milliseconds lead{100};  // time allowed for the command to reach every rank
};

class TrimOrchestrator {
 public:
  // Delivers a command to a rank's session; false when it could not (the rank then counts as missing).
  using Sender = std::function<bool(int rank, const TrimCommandSpec&)>;

  TrimOrchestrator(AckBoard& board, TrimOrchestratorOptions options = {});

  // The common step for `ranks` (see the header comment). 0 progress entries: the margin.
  std::int64_t pick_step(const std::vector<RankProgress>& ranks) const;
  // The deadline for a trim at `step` (-1: now) over `ranks` (see the header comment).
  std::chrono::milliseconds deadline_for(std::int64_t step, const std::vector<RankProgress>& ranks) const;
  // Runs one trim over `targets` with `command_id` (unique across the coordinator's commands).
  TrimOutcome run(std::uint64_t command_id, const TrimSpec& spec, const std::vector<RankProgress>& targets,
                  const Sender& send);

 private:
  // Report age + lead + measured round trip of `r`, in ms.
  double lead_ms(const RankProgress& r) const;

  AckBoard& board_;
  const TrimOrchestratorOptions options_;
};

}  // namespace memcoord::coordinator
