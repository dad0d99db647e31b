#include "worker/detail/coordinator_session.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "memcoord/v1/coordinator.grpc.pb.h"

namespace memcoord::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxOutbox = 256;
constexpr std::chrono::milliseconds kDetachWait{500};

void ToProto(const PoolSample& in, v1::PoolStats* out) {
  out->set_name(in.name);
  out->set_allocated_bytes(in.stats.allocated_bytes);
  out->set_peak_allocated_bytes(in.stats.peak_allocated_bytes);
  out->set_reserved_bytes(in.stats.reserved_bytes);
  out->set_peak_reserved_bytes(in.stats.peak_reserved_bytes);
  out->set_limit_bytes(in.stats.limit_bytes);
  out->set_largest_free_bytes(in.stats.largest_free_bytes);
  out->set_trims(in.stats.trims);
  out->set_trimmed_bytes(in.stats.trimmed_bytes);
  out->set_ooms(in.stats.ooms);
  out->set_allocations(in.stats.allocations);
  out->set_cache_hits(in.stats.cache_hits);
  for (const TagUsage& t : in.tags) {
    v1::TagUsage* tag = out->add_tags();
    tag->set_tag(t.tag);
    tag->set_live_bytes(t.live_bytes);
    tag->set_live_blocks(t.live_blocks);
  }
}

v1::WorkerMessage ReportMessage(const ReportSample& sample) {
  v1::WorkerMessage message;
  v1::Report* report = message.mutable_report();
  report->set_step(sample.step);
  report->set_at_step_end(sample.at_step_end);
  report->set_device_free_bytes(sample.device_free_bytes);
  for (const PoolSample& p : sample.pools) ToProto(p, report->add_pools());
  return message;
}

std::optional<WorkerCommand> FromProto(const v1::CoordinatorMessage& in) {
  WorkerCommand out;
  switch (in.kind_case()) {
    case v1::CoordinatorMessage::kTrim:
      out.kind = WorkerCommand::Kind::kTrim;
      out.command_id = in.trim().command_id();
      out.step = in.trim().step();
      out.now = in.trim().now();
      out.bytes = in.trim().target_bytes();
      out.pool = in.trim().pool();
      return out;
    case v1::CoordinatorMessage::kSetQuota:
      out.kind = WorkerCommand::Kind::kSetQuota;
      out.command_id = in.set_quota().command_id();
      out.now = in.set_quota().now();
      out.bytes = in.set_quota().limit_bytes();
      out.pool = in.set_quota().pool();
      return out;
    case v1::CoordinatorMessage::kAbort:
      out.kind = WorkerCommand::Kind::kAbort;
      out.reason = in.abort().reason();
      out.dead_rank = in.abort().dead_rank();
      return out;
    case v1::CoordinatorMessage::kPlacement:
      out.kind = WorkerCommand::Kind::kPlacement;
      out.pool = in.placement().model();
      out.bytes = in.placement().budget_bytes();
      return out;
    default:
      return std::nullopt;
  }
}

}  // namespace

class CoordinatorSession::Impl {
 public:
  Impl(SessionConfig session_config, SessionHost& session_host)
      : config(std::move(session_config)), host(session_host) {
    grpc::ChannelArguments args;
    // Reconnect quickly after a coordinator restart: gRPC's own backoff would otherwise grow to minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect_min.count()));
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect_min.count()));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect_max.count()));
    channel = grpc::CreateCustomChannel(config.address, grpc::InsecureChannelCredentials(), args);
    stub = v1::Coordinator::NewStub(channel);
  }

  void run();
  bool run_once();  // one session; true when it registered
  void push(v1::WorkerMessage message, bool droppable);

  const SessionConfig config;
  SessionHost& host;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::thread thread;
  std::atomic<bool> attached{false};
  std::atomic<std::uint64_t> registrations{0};

  std::mutex mu;
  std::condition_variable cv;
  // mu guards the following.
  bool started = false;
  bool stopping = false;
  bool broken = false;                                    // the current stream ended
  std::deque<std::pair<v1::WorkerMessage, bool>> outbox;  // message, droppable
  std::string coordinator_id;
  std::uint64_t next_oom = 1;
  std::map<std::uint64_t, std::optional<OomAnswer>> oom_answers;
};

void CoordinatorSession::Impl::push(v1::WorkerMessage message, bool droppable) {
  {
    std::lock_guard lock(mu);
    if (!attached) return;  // nothing queues while detached: a new session starts fresh
    if (outbox.size() >= kMaxOutbox) {
      auto victim = std::find_if(outbox.begin(), outbox.end(), [](const auto& m) { return m.second; });
      if (victim == outbox.end()) {
        if (droppable) return;
      } else {
        outbox.erase(victim);
      }
    }
    outbox.emplace_back(std::move(message), droppable);
  }
  cv.notify_all();
}

void CoordinatorSession::Impl::run() {
  std::chrono::milliseconds backoff = config.reconnect_min;
  while (true) {
    const bool registered = run_once();
    std::unique_lock lock(mu);
    if (stopping) return;
    if (registered) backoff = config.reconnect_min;
    cv.wait_for(lock, backoff, [this] { return stopping; });
    if (stopping) return;
    backoff = std::min(backoff * 2, config.reconnect_max);
  }
}

bool CoordinatorSession::Impl::run_once() {
  grpc::ClientContext context;
  if (!config.token.empty()) context.AddMetadata("authorization", "Bearer " + config.token);
  {
    std::lock_guard lock(mu);
    if (stopping) return false;
    broken = false;
    outbox.clear();
  }
  auto stream = stub->Attach(&context);

  v1::WorkerMessage hello;
  v1::Register* reg = hello.mutable_register_();
  reg->set_rank(config.rank);
  reg->set_local_rank(config.local_rank);
  reg->set_world_size(config.world_size);
  reg->set_host(config.host);
  reg->set_device(config.device);
  reg->set_device_name(config.device_name);
  reg->set_backend(config.backend);
  reg->set_device_total_bytes(config.device_total_bytes);
  reg->set_group(config.group);
  reg->set_pid(config.pid);
  reg->set_report_interval_ms(static_cast<std::uint32_t>(config.report_interval.count()));
  for (const PoolSample& p : host.sample().pools) ToProto(p, reg->add_pools());

  bool registered = false;
  std::thread reader;
  if (stream->Write(hello)) {
    reader = std::thread([&] {
      v1::CoordinatorMessage message;
      while (stream->Read(&message)) {
        if (message.has_registered()) {
          {
            std::lock_guard lock(mu);
            coordinator_id = message.registered().coordinator_id();
          }
          attached = true;
          registered = true;
          ++registrations;
          spdlog::info("worker[{}]: attached to coordinator {} ({})", config.rank, config.address,
                       message.registered().coordinator_id());
        } else if (message.has_oom_reply()) {
          const v1::OomReply& r = message.oom_reply();
          {
            std::lock_guard lock(mu);
            auto it = oom_answers.find(r.request_id());
            if (it != oom_answers.end()) {
              it->second = OomAnswer{r.granted(), r.new_limit_bytes(), r.message()};
            }
          }
          cv.notify_all();
        } else if (auto command = FromProto(message)) {
          host.deliver(*command);
        }
      }
      {
        std::lock_guard lock(mu);
        broken = true;
      }
      attached = false;
      cv.notify_all();
    });

    Clock::time_point next_report = Clock::now() + config.report_interval;
    bool clean = false;
    bool write_failed = false;
    while (!write_failed) {
      std::deque<std::pair<v1::WorkerMessage, bool>> batch;
      {
        std::unique_lock lock(mu);
        cv.wait_until(lock, next_report, [this] { return stopping || broken || !outbox.empty(); });
        if (broken) break;
        if (stopping) {
          clean = true;
          break;
        }
        batch.swap(outbox);
      }
      for (auto& [message, droppable] : batch) {
        if (!stream->Write(message)) {
          write_failed = true;
          break;
        }
      }
      if (!write_failed && Clock::now() >= next_report) {
        next_report = Clock::now() + config.report_interval;
        if (!stream->Write(ReportMessage(host.sample()))) write_failed = true;
      }
    }
    if (clean) {
      stream->WritesDone();  // the coordinator records a clean detach and ends the call
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, kDetachWait, [this] { return broken; })) context.TryCancel();
    } else {
      context.TryCancel();
    }
    reader.join();
  }
  attached = false;
  grpc::Status status = stream->Finish();
  {
    std::lock_guard lock(mu);
    coordinator_id.clear();
    outbox.clear();
  }
  cv.notify_all();  // wakes OOM waiters: no answer will come on this stream
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    // UNAVAILABLE while the coordinator is down is expected; anything else is worth a warning.
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      spdlog::debug("worker[{}]: coordinator {} unavailable: {}", config.rank, config.address,
                    status.error_message());
    } else {
      spdlog::warn("worker[{}]: session with {} ended: {} ({})", config.rank, config.address,
                   status.error_message(), static_cast<int>(status.error_code()));
    }
  }
  return registered;
}

CoordinatorSession::CoordinatorSession(SessionConfig config, SessionHost& host)
    : impl_(std::make_unique<Impl>(std::move(config), host)) {}

CoordinatorSession::~CoordinatorSession() { stop(); }

void CoordinatorSession::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->started) return;
  impl_->started = true;
  impl_->thread = std::thread([this] { impl_->run(); });
}

void CoordinatorSession::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void CoordinatorSession::report(ReportSample sample) { impl_->push(ReportMessage(sample), true); }

void CoordinatorSession::ack(const CommandAck& ack) {
  v1::WorkerMessage message;
  v1::Ack* out = message.mutable_ack();
  out->set_command_id(ack.command_id);
  out->set_code(static_cast<int>(ack.status.code()));
  out->set_message(ack.status.message());
  out->set_step(ack.step);
  out->set_released_bytes(ack.released_bytes);
  out->set_reserved_after_bytes(ack.reserved_after_bytes);
  out->set_duration_ms(ack.duration_ms);
  impl_->push(std::move(message), false);
}

Result<OomAnswer> CoordinatorSession::ask_oom(const OomQuestion& question, std::chrono::milliseconds wait) {
  if (!impl_->attached) return Unavailable("not attached to a coordinator");
  std::uint64_t id = 0;
  {
    std::lock_guard lock(impl_->mu);
    id = impl_->next_oom++;
    impl_->oom_answers[id] = std::nullopt;
  }
  v1::WorkerMessage message;
  v1::OomRequest* request = message.mutable_oom();
  request->set_request_id(id);
  request->set_pool(question.pool);
  request->set_requested_bytes(question.requested_bytes);
  request->set_limit_bytes(question.limit_bytes);
  request->set_reserved_bytes(question.reserved_bytes);
  request->set_allocated_bytes(question.allocated_bytes);
  impl_->push(std::move(message), false);
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait_for(lock, wait,
                     [&] { return impl_->oom_answers[id].has_value() || impl_->broken || impl_->stopping; });
  std::optional<OomAnswer> answer = impl_->oom_answers[id];
  impl_->oom_answers.erase(id);
  if (!answer) {
    return Unavailable(fmt::format("the coordinator did not answer within {} ms", wait.count()));
  }
  return *answer;
}

bool CoordinatorSession::attached() const { return impl_->attached; }

std::string CoordinatorSession::coordinator_id() const {
  std::lock_guard lock(impl_->mu);
  return impl_->coordinator_id;
}

std::uint64_t CoordinatorSession::registrations() const { return impl_->registrations; }

}  // namespace memcoord::detail
