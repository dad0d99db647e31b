// Trim: a synchronized (or immediate) cache release on every live rank of a group (see rpc_handlers.h).
#include <fmt/format.h>

#include "coordinator/service/rpc_handlers.h"

namespace memcoord::coordinator {
namespace {

constexpr auto kMaxDeadlineMs = static_cast<std::uint32_t>(kMaxTrimDeadline.count());

bool SendTrimCommand(ServiceState& state, int rank, const TrimCommandSpec& command) {
  v1::CoordinatorMessage message;
  v1::TrimCommand* trim = message.mutable_trim();
  trim->set_command_id(command.command_id);
  trim->set_step(command.step);
  trim->set_now(command.now);
  trim->set_target_bytes(command.target_bytes);
  trim->set_pool(command.pool);
  return state.send_to_rank(rank, message);
}

void FillTrimResponse(const TrimOutcome& outcome, v1::TrimResponse* reply) {
  reply->set_step(outcome.step);
  reply->set_complete(outcome.complete);
  for (const RankAck& a : outcome.acks) {
    v1::TrimAck* ack = reply->add_acks();
    ack->set_rank(a.rank);
    ack->set_step(a.step);
    ack->set_released_bytes(a.released_bytes);
    ack->set_duration_ms(a.duration_ms);
    ack->set_code(a.code);
    ack->set_message(a.message);
  }
  for (int rank : outcome.missing_ranks) reply->add_missing_ranks(rank);
  reply->set_released_bytes(outcome.released_bytes);
  reply->set_fanout_ms(outcome.fanout_ms);
  reply->set_total_ms(outcome.total_ms);
  reply->set_deadline_ms(static_cast<std::uint32_t>(outcome.deadline.count()));
  for (int rank : outcome.late_ranks) reply->add_late_ranks(rank);
  for (int rank : outcome.failed_ranks) reply->add_failed_ranks(rank);
}

}  // namespace

Status HandleTrim(ServiceState& state, const v1::TrimRequest& request, v1::TrimResponse* reply) {
  if (request.deadline_ms() > kMaxDeadlineMs) {
    return InvalidArgument(
        fmt::format("deadline_ms must be at most {}, got {}", kMaxDeadlineMs, request.deadline_ms()));
  }
  const std::vector<int> ranks = state.cluster.live_ranks(request.group());
  if (ranks.empty()) {
    return FailedPrecondition(request.group().empty()
                                  ? std::string("no live workers to trim")
                                  : fmt::format("no live workers in group '{}'", request.group()));
  }
  TrimSpec spec;
  spec.target_bytes = request.target_bytes();
  spec.now = request.now();
  spec.pool = request.pool();
  spec.deadline = std::chrono::milliseconds(request.deadline_ms());  // 0: scaled (trim_orchestrator.h)
  TrimOutcome outcome = state.trims.run(
      state.next_command_id(), spec, state.cluster.progress(ranks, Clock::now()),
      [&state](int rank, const TrimCommandSpec& command) { return SendTrimCommand(state, rank, command); });
  state.trim_fanout.observe(outcome.fanout_ms / 1e3);
  FillTrimResponse(outcome, reply);
  return Status::Ok();
}

}  // namespace memcoord::coordinator
