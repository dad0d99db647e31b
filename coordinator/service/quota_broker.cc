#include "coordinator/service/quota_broker.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/bytes.h"
#include "coordinator/service/quota_transaction.h"
#include "coordinator/service/saturating.h"

namespace memcoord::coordinator {
namespace {

constexpr std::uint64_t kMaxLimitBytes = 1ull << 50;  // 1 PiB: anything larger is a typo
constexpr std::chrono::milliseconds kQuotaAckWait{2000};
// An OOM'd worker waits 500 ms (WorkerOptions::oom_wait) for its answer; peers' cache trims must fit in it.
constexpr std::chrono::milliseconds kCacheTrimWait{300};
constexpr std::chrono::milliseconds kMinRebalanceInterval{500};

}  // namespace

// Sends each change as a SetQuota command applied on receipt, and maps the acks to transaction outcomes.
class QuotaBroker::SessionPort final : public QuotaPort {
 public:
  explicit SessionPort(ServiceState& state) : state_(state) {}

  std::vector<QuotaAckOutcome> apply(const std::vector<QuotaMoveStep>& changes) override {
    std::vector<std::uint64_t> ids;
    for (const QuotaMoveStep& change : changes) {
      const std::uint64_t id = state_.next_command_id();
      v1::CoordinatorMessage message;
      v1::SetQuotaCommand* command = message.mutable_set_quota();
      command->set_command_id(id);
      command->set_pool(change.pool);
      command->set_limit_bytes(change.to_bytes);
      command->set_now(true);
      state_.acks.open(id, {change.rank}, /*immediate=*/true);  // a round-trip sample for trims
      if (!state_.send_to_rank(change.rank, message)) state_.acks.rank_gone(change.rank);
      ids.push_back(id);
    }
    std::vector<QuotaAckOutcome> out;
    const Clock::time_point deadline = Clock::now() + kQuotaAckWait;
    for (std::size_t i = 0; i < changes.size(); ++i) {
      AckResult result = state_.acks.wait(ids[i], deadline);
      if (result.acks.empty()) {
        const bool gone = state_.cluster.session_of(changes[i].rank) == 0;
        out.push_back({gone ? QuotaAckKind::kGone : QuotaAckKind::kTimedOut, StatusCode::kOk,
                       gone ? std::string("its session ended")
                            : fmt::format("no ack within {} ms", kQuotaAckWait.count())});
      } else if (result.acks[0].code != 0) {
        out.push_back(
            {QuotaAckKind::kRefused, static_cast<StatusCode>(result.acks[0].code), result.acks[0].message});
      } else {
        out.push_back({QuotaAckKind::kOk, StatusCode::kOk, ""});
      }
    }
    return out;
  }

  void record(int rank, const std::string& pool, std::uint64_t limit_bytes) override {
    state_.cluster.note_limit(rank, pool, limit_bytes);
  }

 private:
  ServiceState& state_;
};

QuotaBroker::QuotaBroker(ServiceState& state) : state_(state) {}

QuotaBroker::~QuotaBroker() { jobs_.stop(); }

void QuotaBroker::post(std::function<void()> job) { (void)jobs_.post(std::move(job)); }

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

Status QuotaBroker::move(const std::vector<QuotaChange>& changes, const std::vector<PoolQuotaView>& views) {
  SessionPort port(state_);
  return RunQuotaMove(MoveSteps(changes, views), port);
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
  if (!HoldsRank(worker->state)) {
    return FailedPrecondition(fmt::format("rank {} is dead ({}); quotas apply to live workers",
                                          request.rank(), worker->dead_reason));
  }
  std::lock_guard move_lock(quota_mu_);
  std::vector<QuotaChange> changes;
  const auto limit_bytes = static_cast<std::uint64_t>(limit);
  const std::vector<PoolQuotaView> views = device_pools(request.rank());
  if (request.pool().empty()) {
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
    const std::uint64_t budget = state_.cluster.device_budget(request.rank());
    if (budget > 0) {
      std::uint64_t sum = limit_bytes;
      for (const PoolQuotaView& v : views) {
        if (v.rank != request.rank() || v.pool != request.pool()) sum = SatAdd(sum, v.limit_bytes);
      }
      if (limit_bytes == 0 || sum > budget) {
        return FailedPrecondition(fmt::format(
            "rank {} pool '{}': {} would take the limits on its device to {}, over the device budget {}; "
            "raise the budget (memcoord quota set --rank {} SIZE) or lower other pools first",
            request.rank(), request.pool(),
            limit_bytes == 0 ? std::string("no limit") : FormatBytes(limit_bytes),
            limit_bytes == 0 ? std::string("unbounded") : FormatBytes(sum), FormatBytes(budget),
            request.rank()));
      }
    }
    changes.push_back(QuotaChange{request.rank(), request.pool(), limit_bytes, false});
  }
  MEMCOORD_RETURN_IF_ERROR(move(changes, views));
  for (const QuotaChange& c : changes) {
    v1::QuotaAssignment* a = reply->add_assignments();
    a->set_rank(c.rank);
    a->set_pool(c.pool);
    a->set_limit_bytes(c.limit_bytes);
  }
  return Status::Ok();
}

void QuotaBroker::rebalance(int rank, const std::vector<PoolUsage>& pools) {
  if (state_.cluster.device_budget(rank) == 0) return;
  for (const PoolUsage& p : pools) {
    if (!NearLimit(p.allocated_bytes, p.limit_bytes)) continue;
    {
      std::lock_guard lock(rebalance_mu_);
      Clock::time_point& last = last_rebalance_[{rank, p.name}];
      if (Clock::now() - last < kMinRebalanceInterval) continue;
      last = Clock::now();
    }
    // Ask for an eighth of the current limit: enough headroom for a few steps, small enough to share.
    post([this, rank, name = p.name, want = p.limit_bytes / 8] { relieve(rank, name, want); });
  }
}

void QuotaBroker::relieve(int rank, const std::string& pool, std::uint64_t requested_bytes) {
  std::lock_guard move_lock(quota_mu_);
  const std::uint64_t budget = state_.cluster.device_budget(rank);
  if (budget == 0) return;
  const std::vector<PoolQuotaView> views = device_pools(rank);
  Result<std::vector<QuotaChange>> changes = RelievePressure(budget, views, rank, pool, requested_bytes);
  if (!changes.ok() || changes->empty()) return;
  spdlog::info("coordinator: rank {} pool '{}' near its quota: moving {} to it", rank, pool,
               FormatBytes(requested_bytes));
  Status moved = move(*changes, views);
  if (!moved.ok())
    spdlog::warn("coordinator: quota move to rank {} pool '{}' failed: {}", rank, pool, moved.ToString());
}

void QuotaBroker::handle_oom(WorkerSession& session, const v1::OomRequest& request) {
  post([this, id = session.id, rank = session.rank, request] { answer_oom(id, rank, request); });
}

std::uint64_t QuotaBroker::free_peer_cache(int rank, const std::string& pool, std::string* detail) {
  std::vector<std::pair<int, std::string>> targets;
  for (const PoolQuotaView& v : device_pools(rank)) {
    if ((v.rank != rank || v.pool != pool) && v.reserved_bytes > v.allocated_bytes)
      targets.emplace_back(v.rank, v.pool);
  }
  std::vector<std::uint64_t> ids;
  for (const auto& [peer, name] : targets) {
    const std::uint64_t id = state_.next_command_id();
    v1::CoordinatorMessage message;
    v1::TrimCommand* trim = message.mutable_trim();
    trim->set_command_id(id);
    trim->set_now(true);
    trim->set_step(-1);
    trim->set_target_bytes(0);
    trim->set_pool(name);
    state_.acks.open(id, {peer}, /*immediate=*/true);
    if (!state_.send_to_rank(peer, message)) state_.acks.rank_gone(peer);
    ids.push_back(id);
  }
  std::uint64_t released = 0;
  const Clock::time_point deadline = Clock::now() + kCacheTrimWait;
  for (std::uint64_t id : ids) {
    for (const RankAck& a : state_.acks.wait(id, deadline).acks)
      released = SatAdd(released, a.released_bytes);
  }
  *detail = fmt::format("released {} of idle cache from {} other pools on the device; no limit imposed",
                        FormatBytes(released), targets.size());
  return released;
}

void QuotaBroker::answer_oom(std::uint64_t session_id, int rank, const v1::OomRequest& request) {
  v1::CoordinatorMessage message;
  v1::OomReply* reply = message.mutable_oom_reply();
  reply->set_request_id(request.request_id());
  reply->set_new_limit_bytes(request.limit_bytes());
  std::lock_guard move_lock(quota_mu_);
  if (request.limit_bytes() == 0) {
    std::string detail;
    reply->set_granted(free_peer_cache(rank, request.pool(), &detail) > 0);
    reply->set_message(detail);
  } else if (const std::uint64_t budget = state_.cluster.device_budget(rank); budget == 0) {
    reply->set_message("no device budget is set for this device; nothing to rebalance");
  } else {
    // The requester's own pool as the request describes it (newer than its last report).
    std::vector<PoolQuotaView> views = device_pools(rank);
    for (PoolQuotaView& view : views) {
      if (view.rank == rank && view.pool == request.pool()) {
        view = PoolQuotaView{rank, view.pool, request.allocated_bytes(), request.reserved_bytes(),
                             request.limit_bytes()};
      }
    }
    Result<std::vector<QuotaChange>> changes =
        RelievePressure(budget, views, rank, request.pool(), request.requested_bytes());
    Status moved = changes.ok() ? move(*changes, views) : changes.status();
    if (moved.ok()) {
      for (const QuotaChange& c : *changes) {
        if (c.rank == rank && c.pool == request.pool()) reply->set_new_limit_bytes(c.limit_bytes);
      }
      reply->set_granted(true);
      reply->set_message(fmt::format("limit raised to {} ({} donor pools shrank first)",
                                     FormatBytes(reply->new_limit_bytes()),
                                     changes->empty() ? 0 : changes->size() - 1));
    } else {
      reply->set_message(moved.message());
    }
  }
  spdlog::info("coordinator: rank {} pool '{}' out of memory: {}", rank, request.pool(), reply->message());
  state_.sessions.send(session_id, message);
}

}  // namespace memcoord::coordinator
