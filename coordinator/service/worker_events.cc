#include "coordinator/service/worker_events.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/service/proto_convert.h"

namespace memcoord::coordinator {

Status WorkerEvents::on_message(WorkerSession& session, const v1::WorkerMessage& message) {
  if (session.id == 0) {
    if (message.kind_case() != v1::WorkerMessage::kRegister) {
      return InvalidArgument(
          fmt::format("the first message of an Attach session must be Register (field 1), got field {}",
                      static_cast<int>(message.kind_case())));
    }
    return on_register(session, message.register_());
  }
  switch (message.kind_case()) {
    case v1::WorkerMessage::kReport:
      return on_report(session, message.report());
    case v1::WorkerMessage::kAck:
      state_.acks.deliver(message.ack().command_id(), FromProto(message.ack(), session.rank));
      return Status::Ok();
    case v1::WorkerMessage::kOom:
      quotas_.handle_oom(session, message.oom());
      return Status::Ok();
    case v1::WorkerMessage::kDetach:
      on_detach(session, message.detach());
      return Status::Ok();  // the worker closes its side next; the read that ends finds the session gone
    case v1::WorkerMessage::kRegister:
      return InvalidArgument("Register may be sent only once per session");
    case v1::WorkerMessage::KIND_NOT_SET:
      return Status::Ok();  // an empty or newer message kind: ignored, the session goes on
  }
  return Status::Ok();
}

Status WorkerEvents::on_register(WorkerSession& session, const v1::Register& request) {
  const WorkerIdentity identity = FromProto(request);
  MEMCOORD_ASSIGN_OR_RETURN(
      session.id, state_.cluster.register_worker(identity, FromProto(request.pools()), Clock::now()));
  state_.leaks.forget(identity.rank);
  session.rank = identity.rank;
  state_.sessions.add(&session);
  spdlog::info("coordinator: rank {} registered (host {}, pid {}, session {})", identity.rank, identity.host,
               identity.pid, session.id);
  v1::CoordinatorMessage hello;
  hello.mutable_registered()->set_coordinator_id(state_.coordinator_id);
  session.send(hello);
  // A group stays aborted until all its ranks left (cluster_state.h): a rank registering late, or again
  // after a reset, gets the same Abort. Asked after the session was added, so an abort recorded meanwhile
  // is either seen here or reaches the session through on_dead's broadcast (then perhaps twice: harmless).
  if (const std::optional<GroupAbort> aborted = state_.cluster.abort_for(session.id)) {
    const auto ago_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - aborted->at);
    spdlog::warn(
        "coordinator: rank {} registered into group '{}', aborted {} ms ago: sending it the abort ({})",
        identity.rank, aborted->group, ago_ms.count(), aborted->reason);
    v1::CoordinatorMessage message;
    message.mutable_abort()->set_reason(aborted->reason);
    message.mutable_abort()->set_dead_rank(aborted->dead_rank);
    session.send(message);
  }
  return Status::Ok();
}

Status WorkerEvents::on_report(WorkerSession& session, const v1::Report& report) {
  const Clock::time_point start = Clock::now();
  std::vector<PoolUsage> pools = FromProto(report.pools());
  if (report.at_step_end()) state_.leaks.observe(session.rank, report.step(), pools);
  const bool near_limit = std::any_of(pools.begin(), pools.end(), [](const PoolUsage& p) {
    return NearLimit(p.allocated_bytes, p.limit_bytes);
  });
  std::vector<PoolUsage> hot;
  if (near_limit) hot = pools;
  Status result =
      state_.cluster.report(session.id, report.step(), report.device_free_bytes(), std::move(pools), start);
  state_.report_latency.record(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  if (near_limit && result.ok()) quotas_.rebalance(session.rank, hot);
  return result;
}

void WorkerEvents::on_end(WorkerSession& session, bool broken, const Status& result) {
  const bool dead = broken || !result.ok();
  const std::string reason = !result.ok() ? result.message()
                             : broken     ? "session stream broke (process died or connection lost)"
                                          : "detached (closed its session)";
  leave(session, dead, reason);
}

void WorkerEvents::on_detach(WorkerSession& session, const v1::Detach& detach) {
  if (!detach.failed()) {
    leave(session, /*dead=*/false, "detached (closed its session)");
    return;
  }
  std::string reason = detach.reason().empty() ? std::string("failed (it gave no reason)") : detach.reason();
  if (reason.size() > kMaxDetachReasonBytes) {
    std::size_t cut = kMaxDetachReasonBytes;
    while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    reason.resize(cut);
    reason += "...";
  }
  spdlog::info("coordinator: rank {} detached as failed: {}", session.rank, reason);
  leave(session, /*dead=*/true, reason);
}

void WorkerEvents::leave(WorkerSession& session, bool dead, const std::string& reason) {
  if (!state_.sessions.remove(&session)) return;  // never registered, or already ended
  if (state_.stop.raised()) {
    state_.cluster.mark_dead(session.id, "coordinator shut down");
    return;
  }
  if (auto marked = state_.cluster.mark_dead(session.id, reason)) {
    if (dead) {
      on_dead(*marked);
    } else {
      state_.acks.rank_gone(marked->rank);
    }
  }
}

void WorkerEvents::on_dead(const DeadWorker& dead) {
  state_.acks.rank_gone(dead.rank);
  if (state_.stop.raised()) return;
  std::string who = fmt::format("rank {}", dead.rank);
  if (auto w = state_.cluster.worker(dead.rank); w.ok() && w->session_id == dead.session_id) {
    who = fmt::format("rank {} (host {}, pid {})", dead.rank, w->id.host, w->id.pid);
  }
  const std::string reason = fmt::format("{} is dead: {}", who, dead.reason);
  spdlog::warn("coordinator: {}; aborting group '{}'", reason, dead.group);
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_reason(reason);
  message.mutable_abort()->set_dead_rank(dead.rank);
  // Recorded, so a rank registering into the group later is told too (on_register).
  const std::vector<int> ranks =
      state_.cluster.abort_group(GroupAbort{dead.group, dead.rank, reason, Clock::now()});
  for (int rank : ranks) state_.send_to_rank(rank, message);
}

}  // namespace memcoord::coordinator
