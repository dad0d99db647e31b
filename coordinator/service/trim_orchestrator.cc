#include "coordinator/service/trim_orchestrator.h"

#include <algorithm>
#include <cmath>

#include "coordinator/service/saturating.h"

namespace memcoord::coordinator {
namespace {

double MillisSince(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

void JudgeTrim(TrimOutcome& outcome) {
  outcome.late_ranks.clear();
  outcome.failed_ranks.clear();
  for (const RankAck& a : outcome.acks) {
    if (a.code != 0) {
      outcome.failed_ranks.push_back(a.rank);
    } else if (outcome.step >= 0 && a.step != outcome.step) {
      outcome.late_ranks.push_back(a.rank);
    }
  }
  outcome.complete =
      outcome.missing_ranks.empty() && outcome.late_ranks.empty() && outcome.failed_ranks.empty();
}

TrimOrchestrator::TrimOrchestrator(AckBoard& board, TrimOrchestratorOptions options)
    : board_(board), options_(options) {}

double TrimOrchestrator::lead_ms(const RankProgress& r) const {
  const double round_trip_ms = std::chrono::duration<double, std::milli>(board_.round_trip(r.rank)).count();
  return static_cast<double>(r.report_age_ms) + static_cast<double>(options_.lead.count()) + round_trip_ms;
}

std::int64_t TrimOrchestrator::pick_step(const std::vector<RankProgress>& ranks) const {
  std::int64_t ahead = 0;
  for (const RankProgress& r : ranks) {
    // A worker's step may be anything up to INT64_MAX: saturate rather than wrap.
    const double steps = std::ceil(r.steps_per_second * lead_ms(r) / 1000.0);
    ahead = std::max(ahead, SatAdd(r.step, ClampToInt64(std::isfinite(steps) ? steps : 0.0)));
  }
  return SatAdd(ahead, std::int64_t{options_.step_margin});
}

std::chrono::milliseconds TrimOrchestrator::deadline_for(std::int64_t step,
                                                         const std::vector<RankProgress>& ranks) const {
  double need_ms = 0.0;
  for (const RankProgress& r : ranks) {
    double rank_ms = lead_ms(r);
    if (step >= 0 && r.steps_per_second > 0.0) {
      const double steps_left = static_cast<double>(std::max<std::int64_t>(step - r.step, 0)) + 1.0;
      rank_ms += steps_left * 1000.0 / r.steps_per_second;
    }
    need_ms = std::max(need_ms, rank_ms);
  }
  const double deadline_ms = std::clamp(2.0 * need_ms + 1000.0, static_cast<double>(kMinTrimDeadline.count()),
                                        static_cast<double>(kMaxTrimDeadline.count()));
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(deadline_ms)));
}

TrimOutcome TrimOrchestrator::run(std::uint64_t command_id, const TrimSpec& spec,
                                  const std::vector<RankProgress>& targets, const Sender& send) {
  const Clock::time_point start = Clock::now();
  TrimCommandSpec command;
  command.command_id = command_id;
  command.now = spec.now;
  command.step = spec.now ? -1 : pick_step(targets);
  command.target_bytes = spec.target_bytes;
  command.pool = spec.pool;
  const std::chrono::milliseconds deadline =
      spec.deadline.count() > 0 ? spec.deadline : deadline_for(command.step, targets);

  std::vector<int> ranks;
  for (const RankProgress& r : targets) ranks.push_back(r.rank);
  board_.open(command_id, ranks, /*immediate=*/spec.now);
  for (int rank : ranks) {
    if (!send(rank, command)) board_.rank_gone(rank);
  }
  AckResult acks = board_.wait(command_id, start + deadline);
  const Clock::time_point end = Clock::now();

  TrimOutcome out;
  out.step = command.step;
  out.deadline = deadline;
  out.missing_ranks = std::move(acks.missing_ranks);
  out.acks = std::move(acks.acks);
  JudgeTrim(out);
  Clock::time_point first = end, last = start;
  for (const RankAck& a : out.acks) {
    out.released_bytes = SatAdd(out.released_bytes, a.released_bytes);
    first = std::min(first, a.received_at);
    last = std::max(last, a.received_at);
  }
  if (!out.acks.empty()) out.fanout_ms = MillisSince(spec.now ? start : first, last);
  out.total_ms = MillisSince(start, end);
  return out;
}

}  // namespace memcoord::coordinator
