#include "coordinator/service/trim_orchestrator.h"

#include <algorithm>
#include <cmath>

namespace memcoord::coordinator {
namespace {

double MillisSince(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

TrimOrchestrator::TrimOrchestrator(AckBoard& board, TrimOrchestratorOptions options)
    : board_(board), options_(options) {}

std::int64_t TrimOrchestrator::pick_step(const std::vector<RankProgress>& ranks) const {
  std::int64_t ahead = 0;
  const double lead_ms = static_cast<double>(options_.lead.count());
  for (const RankProgress& r : ranks) {
    const double elapsed_ms = static_cast<double>(r.report_age_ms) + lead_ms;
    const auto expected =
        r.step + static_cast<std::int64_t>(std::ceil(r.steps_per_second * elapsed_ms / 1000.0));
    ahead = std::max(ahead, expected);
  }
  return ahead + options_.step_margin;
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

  std::vector<int> ranks;
  for (const RankProgress& r : targets) ranks.push_back(r.rank);
  board_.open(command_id, ranks);
  for (int rank : ranks) {
    if (!send(rank, command)) board_.rank_gone(rank);
  }
  AckResult acks = board_.wait(command_id, start + spec.deadline);
  const Clock::time_point end = Clock::now();

  TrimOutcome out;
  out.step = command.step;
  out.missing_ranks = std::move(acks.missing_ranks);
  out.acks = std::move(acks.acks);
  out.complete = out.missing_ranks.empty();
  Clock::time_point first = end, last = start;
  for (const RankAck& a : out.acks) {
    out.released_bytes += a.released_bytes;
    first = std::min(first, a.received_at);
    last = std::max(last, a.received_at);
  }
  if (!out.acks.empty()) out.fanout_ms = MillisSince(spec.now ? start : first, last);
  out.total_ms = MillisSince(start, end);
  return out;
}

}  // namespace memcoord::coordinator
