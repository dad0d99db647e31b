#include "coordinator/service/quota_broker.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/bytes.h"

namespace memcoord::coordinator {
namespace {

constexpr std::uint64_t kMaxLimitBytes = 1ull << 50;  // 1 PiB: anything larger is a typo
constexpr std::chrono::milliseconds kQuotaAckWait{2000};
constexpr std::chrono::milliseconds kMinRebalanceInterval{500};

}  // namespace

std::vector<PoolQuotaView> QuotaBroker::device_pools(int rank) const {
  std::vector<PoolQuotaView> views;
  for (int peer : state_.cluster.device_peers(rank)) {
    Result<WorkerRecord> w = state_.cluster.worker(peer);
    if (!w.ok()) continue;
    for (const PoolUsage& p : w->pools) {
      views.push_back(PoolQuotaView{peer, p.name, p.allocated_bytes, p.reserved_bytes, p.limit_bytes});
    }
  }
  return views;
}

Status QuotaBroker::set_quota(const v1::SetQuotaRequest& request, v1::SetQuotaResponse* reply) {
  const std::int64_t limit = request.limit_bytes();
  if (limit < 0) return InvalidArgument(fmt::format("limit_bytes must be >= 0, got {}", limit));
  if (static_cast<std::uint64_t>(limit) > kMaxLimitBytes) {
    return InvalidArgument(
        fmt::format("limit_bytes {} is absurd (more than 1 PiB); sizes accept 4KiB, 2GiB, 80GB", limit));
  }
  Result<WorkerRecord> worker = state_.cluster.worker(request.rank());
  if (!worker.ok()) return worker.status();
  if (worker->state != WorkerState::kLive) {
    return FailedPrecondition(fmt::format("rank {} is dead ({}); quotas apply to live workers",
                                          request.rank(), worker->dead_reason));
  }
  std::vector<QuotaChange> changes;
  const auto limit_bytes = static_cast<std::uint64_t>(limit);
  if (request.pool().empty()) {
    std::vector<PoolQuotaView> views = device_pools(request.rank());
    if (limit_bytes == 0) {
      for (const PoolQuotaView& v : views) changes.push_back(QuotaChange{v.rank, v.pool, 0, false});
    } else {
      MEMCOORD_ASSIGN_OR_RETURN(changes, SplitBudget(limit_bytes, views));
    }
    MEMCOORD_RETURN_IF_ERROR(state_.cluster.set_device_budget(request.rank(), limit_bytes));
  } else {
    const bool known = std::any_of(worker->pools.begin(), worker->pools.end(),
                                   [&](const PoolUsage& p) { return p.name == request.pool(); });
    if (!known) {
      std::string names;
      for (const PoolUsage& p : worker->pools) names += (names.empty() ? "" : ", ") + p.name;
      return NotFound(
          fmt::format("rank {} has no pool '{}' (pools: {})", request.rank(), request.pool(), names));
    }
    changes.push_back(QuotaChange{request.rank(), request.pool(), limit_bytes, false});
  }
  MEMCOORD_RETURN_IF_ERROR(apply_limits(changes, /*wait_for_acks=*/true));
  for (const QuotaChange& c : changes) {
    v1::QuotaAssignment* a = reply->add_assignments();
    a->set_rank(c.rank);
    a->set_pool(c.pool);
    a->set_limit_bytes(c.limit_bytes);
  }
  return Status::Ok();
}

void QuotaBroker::rebalance(int rank, const std::vector<PoolUsage>& pools) {
  const std::uint64_t budget = state_.cluster.device_budget(rank);
  if (budget == 0) return;
  for (const PoolUsage& p : pools) {
    if (p.limit_bytes == 0 || p.allocated_bytes * 10 < p.limit_bytes * 9) continue;
    {
      std::lock_guard lock(rebalance_mu_);
      Clock::time_point& last = last_rebalance_[{rank, p.name}];
      if (Clock::now() - last < kMinRebalanceInterval) continue;
      last = Clock::now();
    }
    // Ask for an eighth of the current limit: enough headroom for a few steps, small enough to share.
    Result<std::vector<QuotaChange>> changes =
        RelievePressure(budget, device_pools(rank), rank, p.name, p.limit_bytes / 8);
    if (!changes.ok() || changes->empty()) continue;
    spdlog::info("coordinator: rank {} pool '{}' at {}% of its quota: moving quota to it", rank, p.name,
                 p.allocated_bytes * 100 / p.limit_bytes);
    (void)apply_limits(*changes, /*wait_for_acks=*/false);  // donors first: they come first in the list
  }
}

void QuotaBroker::handle_oom(WorkerSession& session, const v1::OomRequest& request) {
  v1::CoordinatorMessage message;
  v1::OomReply* reply = message.mutable_oom_reply();
  reply->set_request_id(request.request_id());
  const std::uint64_t budget = state_.cluster.device_budget(session.rank);
  if (budget == 0) {
    reply->set_message("no device budget is set for this device; nothing to rebalance");
    session.send(message);
    return;
  }
  // The requester's own pool as the request describes it (newer than its last report).
  std::vector<PoolQuotaView> views = device_pools(session.rank);
  for (PoolQuotaView& view : views) {
    if (view.rank == session.rank && view.pool == request.pool()) {
      view = PoolQuotaView{view.rank, view.pool, request.allocated_bytes(), request.reserved_bytes(),
                           request.limit_bytes()};
    }
  }
  Result<std::vector<QuotaChange>> changes =
      RelievePressure(budget, views, session.rank, request.pool(), request.requested_bytes());
  if (!changes.ok()) {
    reply->set_message(changes.status().message());
    session.send(message);
    return;
  }
  std::vector<QuotaChange> donors;
  reply->set_new_limit_bytes(request.limit_bytes());
  for (const QuotaChange& change : *changes) {
    if (change.rank == session.rank && change.pool == request.pool()) {
      reply->set_new_limit_bytes(change.limit_bytes);
      state_.cluster.note_limit(change.rank, change.pool, change.limit_bytes);
    } else {
      donors.push_back(change);
    }
  }
  // Donors shrink first (their commands are queued ahead of the reply on a shared stream).
  (void)apply_limits(donors, /*wait_for_acks=*/false);
  reply->set_granted(true);
  reply->set_message(fmt::format("limit raised to {} ({} donor pools trimmed)",
                                 FormatBytes(reply->new_limit_bytes()), donors.size()));
  spdlog::info("coordinator: rank {} pool '{}' under pressure: {}", session.rank, request.pool(),
               reply->message());
  session.send(message);
}

Status QuotaBroker::apply_limits(const std::vector<QuotaChange>& changes, bool wait_for_acks) {
  std::vector<std::pair<std::uint64_t, const QuotaChange*>> sent;
  for (const QuotaChange& change : changes) {
    const std::uint64_t id = state_.next_command_id();
    v1::CoordinatorMessage message;
    v1::SetQuotaCommand* command = message.mutable_set_quota();
    command->set_command_id(id);
    command->set_pool(change.pool);
    command->set_limit_bytes(change.limit_bytes);
    command->set_now(true);
    if (wait_for_acks) state_.acks.open(id, {change.rank});
    if (!state_.send_to_rank(change.rank, message) && wait_for_acks) state_.acks.rank_gone(change.rank);
    if (!wait_for_acks) state_.cluster.note_limit(change.rank, change.pool, change.limit_bytes);
    sent.emplace_back(id, &change);
  }
  if (!wait_for_acks) return Status::Ok();
  Status first_error;
  const Clock::time_point deadline = Clock::now() + kQuotaAckWait;
  for (const auto& [id, change] : sent) {
    AckResult result = state_.acks.wait(id, deadline);
    Status status;
    if (result.acks.empty()) {
      status = Unavailable(fmt::format("rank {} did not acknowledge the quota for pool '{}' within {} ms",
                                       change->rank, change->pool, kQuotaAckWait.count()));
    } else if (result.acks[0].code != 0) {
      status =
          Status(static_cast<StatusCode>(result.acks[0].code),
                 fmt::format("rank {} pool '{}': {}", change->rank, change->pool, result.acks[0].message));
    } else {
      state_.cluster.note_limit(change->rank, change->pool, change->limit_bytes);
    }
    if (first_error.ok() && !status.ok()) first_error = status;
  }
  return first_error;
}

}  // namespace memcoord::coordinator
