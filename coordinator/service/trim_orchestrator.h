// TrimOrchestrator: a cluster-wide cache trim that every rank performs at the end of the same step S, so
// the stall lands on one step everywhere and never inside a collective (or at once, with `now`).
//
// S is picked just ahead of every targeted rank: for each, its last reported step plus the steps it will
// have run by the time the command arrives (its step rate x (report age + lead)), then the largest of those
// plus a margin. run() sends the command through a Sender, then waits on an AckBoard until every rank acked,
// died, or the deadline passed: the outcome then names the missing ranks instead of hanging.
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

struct TrimSpec {
  std::uint64_t target_bytes = 0;  // per pool; 0 releases all cache
  bool now = false;
  std::string pool;  // empty: every pool
  std::chrono::milliseconds deadline{5000};
};

struct TrimCommandSpec {
  std::uint64_t command_id = 0;
  std::int64_t step = -1;  // -1 with `now`
  bool now = false;
  std::uint64_t target_bytes = 0;
  std::string pool;
};

struct TrimOutcome {
  std::int64_t step = -1;
  bool complete = false;
  std::vector<RankAck> acks;
  std::vector<int> missing_ranks;
  std::uint64_t released_bytes = 0;
  // `now`: send to last ack. At step S: first ack to last ack (the wait for S itself excluded).
  double fanout_ms = 0.0;
  double total_ms = 0.0;
};

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
  // Runs one trim over `targets` with `command_id` (unique across the coordinator's commands).
  TrimOutcome run(std::uint64_t command_id, const TrimSpec& spec, const std::vector<RankProgress>& targets,
                  const Sender& send);

 private:
  AckBoard& board_;
  const TrimOrchestratorOptions options_;
};

}  // namespace memcoord::coordinator
