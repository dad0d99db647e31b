// StepReporter: the progress display and the final report of memcoord-train. Every rank hands in one
// StepRecord per step; they are gathered over the world communicator (one small MPI allgather, host memory)
// and world rank 0 prints: a progress line every print_every steps (loss per model, reserved memory per
// rank), an evaluation line when models were evaluated, and a trim line in the step where any rank applied
// a coordinator trim (reserved before -> after on every rank, and whether all ranks trimmed at that step).
// finish() gathers each rank's summary and prints the final report: loss per model (first -> last, eval),
// whether every rank of a model holds identical weights (checksums), per-rank peak and reserved memory and
// the trims. Returns the verdict every rank agrees on.
//
// Collective over `world` at every call. Thread safety: one thread. Ownership: borrows the communicator.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "examples/train/group_plan.h"

namespace memcoord::train {

struct StepRecord {
  int model = 0;
  std::int64_t step = 0;
  double loss = 0;
  int batch = 0;
  std::uint64_t reserved_before = 0;  // all of the rank's pools, before step_end
  std::uint64_t reserved_after = 0;   // and after (a trim applied at this step shows here)
  std::int64_t trim_step = -1;        // a trim applied in this step_end: its step
  std::uint64_t released = 0;
  double eval_loss = -1;  // >= 0 when this step evaluated (the group's mean)
  double step_ms = 0;
};

struct RankSummary {
  int model = 0;
  std::uint64_t checksum = 0;
  std::uint64_t peak_reserved = 0;
  std::uint64_t reserved = 0;
  std::uint64_t peak_allocated = 0;
  int device = -1;
};

struct Verdict {
  bool losses_fell = false;
  bool weights_identical = false;
  bool trims_aligned = false;  // at least one trim, and every rank applied each trim at the same step
  int trims = 0;
};

class StepReporter {
 public:
  StepReporter(Communicator& world, std::vector<ModelConfig> models, GroupPlan plan, int total_steps,
               int print_every);
  Status record(const StepRecord& mine);
  Result<Verdict> finish(const RankSummary& mine);

 private:
  void Print(const std::vector<StepRecord>& all);
  void PrintModelTable(const std::vector<RankSummary>& ranks, Verdict& v) const;
  void PrintTrimsAndVerdict(Verdict& v) const;
  Communicator& world_;
  std::vector<ModelConfig> models_;
  GroupPlan plan_;
  int total_steps_;
  int print_every_;
  // Rank 0 only: history for the report.
  std::vector<std::vector<double>> losses_;                // per model, per step (mean over its ranks)
  std::vector<std::vector<double>> eval_losses_;           // per model
  std::map<std::int64_t, std::vector<StepRecord>> trims_;  // trim step -> the records that applied it
  bool trims_aligned_ = true;
};

}  // namespace memcoord::train
