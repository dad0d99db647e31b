#include "coordinator/service/coordinator_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>

#include "common/bytes.h"
#include "coordinator/planner/plan_report.h"
#include "coordinator/service/live_plan.h"
#include "coordinator/service/proto_convert.h"
#include "coordinator/service/quota_policy.h"
#include "coordinator/service/status_mapping.h"

namespace memcoord::coordinator {
namespace {

constexpr std::uint64_t kMaxLimitBytes = 1ull << 50;  // 1 PiB: anything larger is a typo
constexpr std::uint32_t kMaxWaitMs = 600000;
constexpr std::size_t kMaxKeyBytes = 1024;
constexpr std::size_t kMaxValueBytes = 1 << 20;
constexpr std::chrono::milliseconds kQuotaAckWait{2000};

std::string MakeCoordinatorId() {
  const auto ticks = std::chrono::system_clock::now().time_since_epoch().count();
  return fmt::format("{:x}", static_cast<std::uint64_t>(ticks));
}

}  // namespace

// One worker's Attach stream, as a callback reactor. Reads are processed as they complete (one read in
// flight at a time); writes go through `outbox_`, one StartWrite in flight, so send() never blocks. The
// reactor deletes itself in OnDone, after it left the service's session map (session_ended / OnDone).
class CoordinatorService::Session final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  Session(CoordinatorService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    Status auth = service_->authenticate(*context_);
    if (!auth.ok()) {
      finish(auth);
      return;
    }
    StartRead(&in_);
  }

  std::uint64_t id = 0;  // 0 until registered; then fixed
  int rank = -1;

  grpc::CallbackServerContext* context() { return context_; }

  // Queues a message; false when the stream is finishing or the worker has stopped reading.
  bool send(const v1::CoordinatorMessage& message) {
    const v1::CoordinatorMessage* next = nullptr;
    {
      std::lock_guard lock(mu_);
      if (finishing_ || outbox_.size() >= kMaxOutbox) return false;
      outbox_.push_back(message);
      if (writing_) return true;
      writing_ = true;
      next = &outbox_.front();  // deque elements stay put while others are appended
    }
    StartWrite(next);
    return true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      end(context_->IsCancelled(), Status::Ok());
      return;
    }
    Status result;
    if (id == 0) {
      if (in_.kind_case() != v1::WorkerMessage::kRegister) {
        result = InvalidArgument(
            fmt::format("the first message of an Attach session must be Register (field 1), got field {}",
                        static_cast<int>(in_.kind_case())));
      } else {
        result = service_->register_session(this, in_.register_());
      }
    } else {
      switch (in_.kind_case()) {
        case v1::WorkerMessage::kReport:
          service_->handle_report(*this, in_.report(), &result);
          break;
        case v1::WorkerMessage::kAck:
          service_->acks_.deliver(in_.ack().command_id(), FromProto(in_.ack(), rank));
          break;
        case v1::WorkerMessage::kOom:
          service_->handle_oom(*this, in_.oom());
          break;
        case v1::WorkerMessage::kRegister:
          result = InvalidArgument("Register may be sent only once per session");
          break;
        case v1::WorkerMessage::KIND_NOT_SET:
          break;  // an empty or newer message kind: ignored, the session goes on
      }
    }
    if (!result.ok()) {
      end(false, result);
      return;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const v1::CoordinatorMessage* next = nullptr;
    bool finish_now = false;
    {
      std::lock_guard lock(mu_);
      outbox_.pop_front();
      if (!ok) outbox_.clear();  // the stream is broken; the pending read ends the session
      if (!outbox_.empty()) {
        next = &outbox_.front();
      } else {
        writing_ = false;
        finish_now = finishing_ && !finished_;
        if (finish_now) finished_ = true;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish_now) Finish(ToGrpcStatus(finish_status_));
  }

  void OnDone() override {
    service_->session_ended(this, /*broken=*/true, Status::Ok());  // no-op when already ended
    delete this;
  }

 private:
  static constexpr std::size_t kMaxOutbox = 4096;

  // The session is over (reads ended or a protocol error): leave the service, then finish the call.
  void end(bool broken, const Status& result) {
    service_->session_ended(this, broken, result);
    Status status = result;
    if (status.ok() && service_->shutting_down_) status = Unavailable("coordinator shutting down");
    finish(status);
  }

  // Finishes once, after queued writes drained (a write in flight completes first).
  void finish(const Status& status) {
    {
      std::lock_guard lock(mu_);
      if (finishing_) return;
      finishing_ = true;
      finish_status_ = status;
      if (writing_) return;  // OnWriteDone finishes
      finished_ = true;
    }
    Finish(ToGrpcStatus(status));
  }

  CoordinatorService* const service_;
  grpc::CallbackServerContext* const context_;
  v1::WorkerMessage in_;

  std::mutex mu_;
  // mu_ guards the following.
  std::deque<v1::CoordinatorMessage> outbox_;
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  Status finish_status_;
};

CoordinatorService::CoordinatorService(const CoordinatorOptions& options)
    : options_(options),
      coordinator_id_(MakeCoordinatorId()),
      started_at_(Clock::now()),
      state_(ClusterStateOptions{options.silence_factor, 1 << 16}),
      trims_(acks_, options.trim),
      leaks_(options.leak) {
  liveness_ = std::thread([this] { liveness_loop(); });
}

CoordinatorService::~CoordinatorService() { shutdown(); }

void CoordinatorService::shutdown() {
  {
    std::lock_guard lock(stop_mu_);
    if (shutting_down_.exchange(true)) return;
  }
  stop_cv_.notify_all();
  kv_cv_.notify_all();
  {
    std::lock_guard lock(sessions_mu_);
    for (auto& [id, session] : sessions_) session->context()->TryCancel();
  }
  if (liveness_.joinable()) liveness_.join();
}

Status CoordinatorService::authenticate(const grpc::ServerContextBase& context) const {
  if (options_.token.empty()) return Status::Ok();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return Unauthenticated("missing 'authorization: Bearer <token>' metadata (see --token-file)");
  }
  const std::string_view value(it->second.data(), it->second.size());
  if (value != "Bearer " + options_.token) return Unauthenticated("invalid token");
  return Status::Ok();
}

bool CoordinatorService::send_to_rank(int rank, const v1::CoordinatorMessage& message) {
  const std::uint64_t id = state_.session_of(rank);
  std::lock_guard lock(sessions_mu_);  // keeps the session alive; send() only queues
  auto it = sessions_.find(id);
  return it != sessions_.end() && it->second->send(message);
}

void CoordinatorService::on_dead(const DeadWorker& dead) {
  acks_.rank_gone(dead.rank);
  if (shutting_down_) return;
  std::string who = fmt::format("rank {}", dead.rank);
  if (auto w = state_.worker(dead.rank); w.ok()) {
    who = fmt::format("rank {} (host {}, pid {})", dead.rank, w->id.host, w->id.pid);
  }
  const std::string reason = fmt::format("{} is dead: {}", who, dead.reason);
  spdlog::warn("coordinator: {}; aborting group '{}'", reason, dead.group);
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_reason(reason);
  message.mutable_abort()->set_dead_rank(dead.rank);
  for (int rank : state_.live_ranks(dead.group)) send_to_rank(rank, message);
}

void CoordinatorService::liveness_loop() {
  std::unique_lock lock(stop_mu_);
  while (!shutting_down_) {
    stop_cv_.wait_for(lock, options_.liveness_period, [this] { return shutting_down_.load(); });
    if (shutting_down_) break;
    lock.unlock();
    for (const DeadWorker& dead : state_.sweep(Clock::now())) {
      {
        std::lock_guard sessions_lock(sessions_mu_);
        auto it = sessions_.find(dead.session_id);
        if (it != sessions_.end()) it->second->context()->TryCancel();
      }
      on_dead(dead);
    }
    lock.lock();
  }
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* CoordinatorService::Attach(
    grpc::CallbackServerContext* context) {
  return new Session(this, context);
}

Status CoordinatorService::register_session(Session* session, const v1::Register& request) {
  const WorkerIdentity identity = FromProto(request);
  Result<std::uint64_t> registered =
      state_.register_worker(identity, FromProto(request.pools()), Clock::now());
  if (!registered.ok()) return registered.status();
  leaks_.forget(identity.rank);
  session->id = *registered;
  session->rank = identity.rank;
  {
    std::lock_guard lock(sessions_mu_);
    sessions_[session->id] = session;
  }
  spdlog::info("coordinator: rank {} registered (host {}, pid {}, session {})", identity.rank, identity.host,
               identity.pid, session->id);
  v1::CoordinatorMessage hello;
  hello.mutable_registered()->set_coordinator_id(coordinator_id_);
  session->send(hello);
  return Status::Ok();
}

void CoordinatorService::handle_report(Session& session, const v1::Report& report, Status* result) {
  const Clock::time_point start = Clock::now();
  std::vector<PoolUsage> pools = FromProto(report.pools());
  if (report.at_step_end()) leaks_.observe(session.rank, report.step(), pools);
  const bool near_limit = std::any_of(pools.begin(), pools.end(), [](const PoolUsage& p) {
    return p.limit_bytes > 0 && p.allocated_bytes * 10 >= p.limit_bytes * 9;
  });
  std::vector<PoolUsage> hot;
  if (near_limit) hot = pools;
  *result = state_.report(session.id, report.step(), report.device_free_bytes(), std::move(pools), start);
  report_latency_.record(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  if (near_limit && result->ok()) rebalance(session.rank, hot);
}

std::vector<PoolQuotaView> CoordinatorService::device_pools(int rank) const {
  std::vector<PoolQuotaView> views;
  for (int peer : state_.device_peers(rank)) {
    Result<WorkerRecord> w = state_.worker(peer);
    if (!w.ok()) continue;
    for (const PoolUsage& p : w->pools) {
      views.push_back(PoolQuotaView{peer, p.name, p.allocated_bytes, p.reserved_bytes, p.limit_bytes});
    }
  }
  return views;
}

void CoordinatorService::rebalance(int rank, const std::vector<PoolUsage>& pools) {
  constexpr auto kMinInterval = std::chrono::milliseconds(500);
  const std::uint64_t budget = state_.device_budget(rank);
  if (budget == 0) return;
  for (const PoolUsage& p : pools) {
    if (p.limit_bytes == 0 || p.allocated_bytes * 10 < p.limit_bytes * 9) continue;
    {
      std::lock_guard lock(rebalance_mu_);
      Clock::time_point& last = last_rebalance_[{rank, p.name}];
      if (Clock::now() - last < kMinInterval) continue;
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

void CoordinatorService::session_ended(Session* session, bool broken, const Status& result) {
  {
    std::lock_guard lock(sessions_mu_);
    auto it = sessions_.find(session->id);
    if (it == sessions_.end() || it->second != session) return;  // never registered, or already ended
    sessions_.erase(it);
  }
  if (shutting_down_) {
    state_.mark_dead(session->id, "coordinator shut down");
    return;
  }
  const std::string reason = !result.ok() ? result.message()
                             : broken     ? "session stream broke (process died or connection lost)"
                                          : "detached (closed its session)";
  if (auto dead = state_.mark_dead(session->id, reason)) {
    if (broken || !result.ok()) {
      on_dead(*dead);
    } else {
      acks_.rank_gone(dead->rank);
    }
  }
}

Status CoordinatorService::apply_limits(const std::vector<QuotaChange>& changes, bool wait_for_acks) {
  std::vector<std::pair<std::uint64_t, const QuotaChange*>> sent;
  for (const QuotaChange& change : changes) {
    const std::uint64_t id = next_command_id_++;
    v1::CoordinatorMessage message;
    v1::SetQuotaCommand* command = message.mutable_set_quota();
    command->set_command_id(id);
    command->set_pool(change.pool);
    command->set_limit_bytes(change.limit_bytes);
    command->set_now(true);
    if (wait_for_acks) acks_.open(id, {change.rank});
    if (!send_to_rank(change.rank, message)) {
      if (wait_for_acks) acks_.rank_gone(change.rank);
    }
    if (!wait_for_acks) state_.note_limit(change.rank, change.pool, change.limit_bytes);
    sent.emplace_back(id, &change);
  }
  if (!wait_for_acks) return Status::Ok();
  Status first_error;
  const Clock::time_point deadline = Clock::now() + kQuotaAckWait;
  for (const auto& [id, change] : sent) {
    AckResult result = acks_.wait(id, deadline);
    Status status;
    if (result.acks.empty()) {
      status = Unavailable(fmt::format("rank {} did not acknowledge the quota for pool '{}' within {} ms",
                                       change->rank, change->pool, kQuotaAckWait.count()));
    } else if (result.acks[0].code != 0) {
      status =
          Status(static_cast<StatusCode>(result.acks[0].code),
                 fmt::format("rank {} pool '{}': {}", change->rank, change->pool, result.acks[0].message));
    } else {
      state_.note_limit(change->rank, change->pool, change->limit_bytes);
    }
    if (first_error.ok() && !status.ok()) first_error = status;
  }
  return first_error;
}

void CoordinatorService::handle_oom(Session& session, const v1::OomRequest& request) {
  v1::CoordinatorMessage message;
  v1::OomReply* reply = message.mutable_oom_reply();
  reply->set_request_id(request.request_id());
  const std::uint64_t budget = state_.device_budget(session.rank);
  if (budget == 0) {
    reply->set_message("no device budget is set for this device; nothing to rebalance");
    session.send(message);
    return;
  }
  std::vector<PoolQuotaView> views;
  for (int peer : state_.device_peers(session.rank)) {
    Result<WorkerRecord> w = state_.worker(peer);
    if (!w.ok()) continue;
    for (const PoolUsage& p : w->pools) {
      PoolQuotaView view{peer, p.name, p.allocated_bytes, p.reserved_bytes, p.limit_bytes};
      if (peer == session.rank && p.name == request.pool()) {
        view = PoolQuotaView{peer, p.name, request.allocated_bytes(), request.reserved_bytes(),
                             request.limit_bytes()};
      }
      views.push_back(view);
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
      state_.note_limit(change.rank, change.pool, change.limit_bytes);
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

ClusterView CoordinatorService::snapshot() const {
  ClusterView view;
  const Clock::time_point now = Clock::now();
  view.workers = state_.snapshot(now);
  view.leaks = leaks_.alerts();
  view.stats.coordinator_id = coordinator_id_;
  view.stats.uptime_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - started_at_).count());
  view.stats.reports = report_latency_.count();
  view.stats.report_handling_p50_us = report_latency_.percentile(50);
  view.stats.report_handling_p99_us = report_latency_.percentile(99);
  {
    std::lock_guard lock(sessions_mu_);
    view.stats.live_sessions = sessions_.size();
  }
  return view;
}

grpc::Status CoordinatorService::GetCluster(grpc::ServerContext* context,
                                            const v1::GetClusterRequest* /*request*/,
                                            v1::ClusterSnapshot* reply) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  ToProto(snapshot(), reply);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Trim(grpc::ServerContext* context, const v1::TrimRequest* request,
                                      v1::TrimResponse* reply) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  if (request->deadline_ms() > kMaxWaitMs) {
    return ToGrpcStatus(InvalidArgument(
        fmt::format("deadline_ms must be at most {}, got {}", kMaxWaitMs, request->deadline_ms())));
  }
  const std::vector<int> ranks = state_.live_ranks(request->group());
  if (ranks.empty()) {
    return ToGrpcStatus(FailedPrecondition(
        request->group().empty() ? std::string("no live workers to trim")
                                 : fmt::format("no live workers in group '{}'", request->group())));
  }
  TrimSpec spec;
  spec.target_bytes = request->target_bytes();
  spec.now = request->now();
  spec.pool = request->pool();
  spec.deadline = std::chrono::milliseconds(request->deadline_ms() == 0 ? 5000 : request->deadline_ms());
  const std::uint64_t id = next_command_id_++;
  TrimOutcome outcome = trims_.run(id, spec, state_.progress(ranks, Clock::now()),
                                   [this](int rank, const TrimCommandSpec& command) {
                                     v1::CoordinatorMessage message;
                                     v1::TrimCommand* trim = message.mutable_trim();
                                     trim->set_command_id(command.command_id);
                                     trim->set_step(command.step);
                                     trim->set_now(command.now);
                                     trim->set_target_bytes(command.target_bytes);
                                     trim->set_pool(command.pool);
                                     return send_to_rank(rank, message);
                                   });
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
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::SetQuota(grpc::ServerContext* context, const v1::SetQuotaRequest* request,
                                          v1::SetQuotaResponse* reply) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  const std::int64_t limit = request->limit_bytes();
  if (limit < 0) {
    return ToGrpcStatus(InvalidArgument(fmt::format("limit_bytes must be >= 0, got {}", limit)));
  }
  if (static_cast<std::uint64_t>(limit) > kMaxLimitBytes) {
    return ToGrpcStatus(InvalidArgument(
        fmt::format("limit_bytes {} is absurd (more than 1 PiB); sizes accept 4KiB, 2GiB, 80GB", limit)));
  }
  Result<WorkerRecord> worker = state_.worker(request->rank());
  if (!worker.ok()) return ToGrpcStatus(worker.status());
  if (worker->state != WorkerState::kLive) {
    return ToGrpcStatus(FailedPrecondition(fmt::format("rank {} is dead ({}); quotas apply to live workers",
                                                       request->rank(), worker->dead_reason)));
  }
  std::vector<QuotaChange> changes;
  const auto limit_bytes = static_cast<std::uint64_t>(limit);
  if (request->pool().empty()) {
    std::vector<PoolQuotaView> views;
    for (int peer : state_.device_peers(request->rank())) {
      Result<WorkerRecord> w = state_.worker(peer);
      if (!w.ok()) continue;
      for (const PoolUsage& p : w->pools) {
        views.push_back(PoolQuotaView{peer, p.name, p.allocated_bytes, p.reserved_bytes, p.limit_bytes});
      }
    }
    if (limit_bytes == 0) {
      for (const PoolQuotaView& v : views) changes.push_back(QuotaChange{v.rank, v.pool, 0, false});
    } else {
      Result<std::vector<QuotaChange>> split = SplitBudget(limit_bytes, views);
      if (!split.ok()) return ToGrpcStatus(split.status());
      changes = *std::move(split);
    }
    Status budget = state_.set_device_budget(request->rank(), limit_bytes);
    if (!budget.ok()) return ToGrpcStatus(budget);
  } else {
    const bool known = std::any_of(worker->pools.begin(), worker->pools.end(),
                                   [&](const PoolUsage& p) { return p.name == request->pool(); });
    if (!known) {
      std::string names;
      for (const PoolUsage& p : worker->pools) names += (names.empty() ? "" : ", ") + p.name;
      return ToGrpcStatus(NotFound(
          fmt::format("rank {} has no pool '{}' (pools: {})", request->rank(), request->pool(), names)));
    }
    changes.push_back(QuotaChange{request->rank(), request->pool(), limit_bytes, false});
  }
  Status applied = apply_limits(changes, /*wait_for_acks=*/true);
  if (!applied.ok()) return ToGrpcStatus(applied);
  for (const QuotaChange& c : changes) {
    v1::QuotaAssignment* a = reply->add_assignments();
    a->set_rank(c.rank);
    a->set_pool(c.pool);
    a->set_limit_bytes(c.limit_bytes);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                                       grpc::ServerWriter<v1::ClusterSnapshot>* writer) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  const std::uint32_t interval_ms =
      request->interval_ms() == 0 ? 1000 : std::clamp<std::uint32_t>(request->interval_ms(), 50, 60000);
  while (!shutting_down_ && !context->IsCancelled()) {
    v1::ClusterSnapshot snapshot_message;
    ToProto(snapshot(), &snapshot_message);
    if (!writer->Write(snapshot_message)) break;
    std::unique_lock lock(stop_mu_);
    stop_cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return shutting_down_.load(); });
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Put(grpc::ServerContext* context, const v1::PutRequest* request,
                                     v1::PutResponse* /*reply*/) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  if (request->key().empty() || request->key().size() > kMaxKeyBytes) {
    return ToGrpcStatus(InvalidArgument(
        fmt::format("key must have 1 to {} bytes, got {}", kMaxKeyBytes, request->key().size())));
  }
  if (request->value().size() > kMaxValueBytes) {
    return ToGrpcStatus(InvalidArgument(
        fmt::format("value must be at most {} bytes, got {}", kMaxValueBytes, request->value().size())));
  }
  {
    std::lock_guard lock(kv_mu_);
    kv_[request->key()] = request->value();
  }
  kv_cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Get(grpc::ServerContext* context, const v1::GetRequest* request,
                                     v1::GetResponse* reply) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  if (request->key().empty()) return ToGrpcStatus(InvalidArgument("key must not be empty"));
  if (request->wait_ms() > kMaxWaitMs) {
    return ToGrpcStatus(
        InvalidArgument(fmt::format("wait_ms must be at most {}, got {}", kMaxWaitMs, request->wait_ms())));
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(request->wait_ms());
  std::unique_lock lock(kv_mu_);
  while (true) {
    auto it = kv_.find(request->key());
    if (it != kv_.end()) {
      reply->set_value(it->second);
      return grpc::Status::OK;
    }
    if (Clock::now() >= deadline || shutting_down_ || context->IsCancelled()) break;
    // Wake at least every 100 ms to notice a cancelled call.
    kv_cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
  }
  if (request->wait_ms() == 0) {
    return ToGrpcStatus(NotFound(fmt::format("no value for key '{}'", request->key())));
  }
  return ToGrpcStatus(DeadlineExceeded(
      fmt::format("key '{}' did not appear within {} ms", request->key(), request->wait_ms())));
}

grpc::Status CoordinatorService::Plan(grpc::ServerContext* context, const v1::PlanRequest* request,
                                      v1::PlanReply* reply) {
  Status auth = authenticate(*context);
  if (!auth.ok()) return ToGrpcStatus(auth);
  Result<LivePlan> live = PlanOnCluster(request->request_json(), state_.snapshot(Clock::now()));
  if (!live.ok()) return ToGrpcStatus(live.status());
  reply->set_feasible(live->plan.feasible);
  reply->set_reason(live->plan.reason);
  reply->set_plan_json(planner::PlanToJson(live->request, live->plan).dump(2));
  reply->set_plan_table(planner::PlanToTable(live->request, live->plan));
  for (const LiveDevice& d : live->devices) ToProto(d, reply->add_devices());
  return grpc::Status::OK;
}

}  // namespace memcoord::coordinator
