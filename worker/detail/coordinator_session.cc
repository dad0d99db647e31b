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
#include <string_view>
#include <thread>

#include "memcoord/v1/coordinator.grpc.pb.h"
#include "worker/detail/reconnect_backoff.h"

namespace memcoord::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxOutbox = 256;
constexpr std::chrono::milliseconds kDetachWait{500};
// stop() waits this long past kDetachWait for the session thread before it cancels the call: a write that
// never completes (a coordinator stopped with SIGSTOP stops reading) must not keep stop() waiting.
constexpr std::chrono::milliseconds kStopGrace{500};
// Keepalive: a ping when nothing was read for kKeepaliveTime; no answer within kKeepaliveTimeout breaks the
// connection, so a coordinator whose host vanished is noticed in ~6 s instead of TCP's ~15 min. The timeout
// is above the coordinator's default --dead-after (3 s): a coordinator host that stalls for a moment must not
// break healthy sessions (a broken session is a death to the coordinator) sooner than its own sweep would.
constexpr std::chrono::milliseconds kKeepaliveTime{1000};
constexpr std::chrono::milliseconds kKeepaliveTimeout{5000};
// A failed Detach's reason is cut to this many bytes (the coordinator keeps at most 1024).
constexpr std::size_t kMaxReasonBytes = 1000;
// The least time one connection attempt may take (see MakeChannel).
constexpr std::chrono::milliseconds kConnectTimeout{5000};
// While waiting to re-attach, stop() is noticed within this.
constexpr std::chrono::milliseconds kPollSlice{25};

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
  out->set_driver_map_calls(in.stats.backend_allocations);
  out->set_driver_unmap_calls(in.stats.backend_frees);
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

using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>;

v1::WorkerMessage RegisterMessage(const SessionConfig& config, const ReportSample& sample) {
  v1::WorkerMessage hello;
  v1::Register* reg = hello.mutable_register_();
  reg->set_rank(config.rank);
  reg->set_local_rank(config.local_rank);
  reg->set_world_size(config.world_size);
  reg->set_host(config.host);
  reg->set_device(config.device);
  reg->set_device_name(config.device_name);
  reg->set_device_uuid(config.device_uuid);
  reg->set_backend(config.backend);
  reg->set_device_total_bytes(config.device_total_bytes);
  reg->set_group(config.group);
  reg->set_pid(config.pid);
  reg->set_report_interval_ms(static_cast<std::uint32_t>(config.report_interval.count()));
  for (const PoolSample& p : sample.pools) ToProto(p, reg->add_pools());
  return hello;
}

std::shared_ptr<grpc::Channel> MakeChannel(const SessionConfig& config) {
  grpc::ChannelArguments args;
  // gRPC's subchannel backoff governs when a broken connection is tried again; without these it grows
  // to minutes. Keep it as short as our own attach backoff, so neither waits on the other for long.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect_min.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect_max.count()));
  // Despite its name this is the minimum time a connection attempt (TCP + HTTP/2 handshake) may take
  // before it is abandoned. Set to the backoff, a freshly restarted coordinator on a busy host did not
  // finish a handshake in time and workers kept abandoning attempts for seconds.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(kConnectTimeout.count()));
  // One connection per session, as in a job: in-process workers (tests, benchmarks) must not share one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Keepalive (see kKeepaliveTime), also between sessions and without limit on pings while no data is sent.
  // The coordinator must accept such pings (coordinator_server.cc: a minimum ping interval without data
  // below kKeepaliveTime, and pings without calls), or it answers with GOAWAY "too_many_pings".
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(kKeepaliveTime.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(kKeepaliveTimeout.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(config.address, MakeChannelCredentials(config.credentials), args);
}

// `text` cut to at most `max_bytes` and made valid UTF-8 (a proto3 string must be: the coordinator would
// refuse the whole message otherwise): each byte that does not start a complete sequence becomes '?'.
std::string ValidUtf8(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = lead < 0x80           ? 1
                         : (lead >> 5) == 0x6  ? 2
                         : (lead >> 4) == 0xE  ? 3
                         : (lead >> 3) == 0x1E ? 4
                                               : 0;
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (valid && length == 2) valid = lead >= 0xC2;  // no overlong forms
    if (valid && length == 3) {
      const auto second = static_cast<unsigned char>(text[i + 1]);
      valid = (lead != 0xE0 || second >= 0xA0) && (lead != 0xED || second < 0xA0);  // overlong; surrogates
    }
    if (valid && length == 4) {
      const auto second = static_cast<unsigned char>(text[i + 1]);
      valid = lead <= 0xF4 && (lead != 0xF0 || second >= 0x90) && (lead != 0xF4 || second < 0x90);
    }
    if (!valid) length = 1;
    if (out.size() + length > max_bytes) break;
    if (valid) {
      out.append(text.substr(i, length));
    } else {
      out.push_back('?');
    }
    i += length;
  }
  return out;
}

v1::WorkerMessage DetachMessage(const std::optional<std::string>& failure) {
  v1::WorkerMessage message;
  v1::Detach* detach = message.mutable_detach();
  detach->set_failed(failure.has_value());
  if (failure) detach->set_reason(ValidUtf8(*failure, kMaxReasonBytes));
  return message;
}

std::string CurrentExceptionText() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

// One run_once() is one Attach stream: the calling (session) thread writes, a reader thread reads. How the
// writing side ended decides how the stream is closed.
enum class WriteEnd {
  kStopping,  // stop(): Detach (failed when fail() stopped it), then close
  kBroken,    // the stream broke (coordinator gone): cancel
  kFailed,    // an exception in this session: detach cleanly (the coordinator does not abort the group)
};

class CoordinatorSession::Impl {
 public:
  Impl(SessionConfig session_config, SessionHost& session_host)
      : config(std::move(session_config)),
        host(session_host),
        channel(MakeChannel(config)),
        stub(v1::Coordinator::NewStub(channel)) {}

  void run();
  bool run_once();  // one session; true when it registered
  bool wait_before_retry(std::chrono::milliseconds wait);
  void push(v1::WorkerMessage message, bool droppable);

  // Steps of run_once().
  bool begin_session();
  void read_loop(Stream& stream, bool& registered);
  void handle(const v1::CoordinatorMessage& message, bool& registered);
  WriteEnd write_loop(Stream& stream) noexcept;
  bool write_due(Stream& stream, Clock::time_point& next_report);
  void close_stream(Stream& stream, grpc::ClientContext& context, WriteEnd end) noexcept;
  // Ends the session thread: stopping, and `failed_reason` set for a failed detach. Bounded: the current
  // call is cancelled at once while it is still connecting, else after kDetachWait + kStopGrace.
  void stop(std::optional<std::string> failed_reason);
  void end_session(Stream& stream);
  // Records the first exception of this session (from either thread) and wakes the writer, which then
  // ends the session. REQUIRES: called inside a catch block.
  void fail(const char* where);

  const SessionConfig config;
  SessionHost& host;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::thread thread;
  std::atomic<bool> attached{false};
  std::atomic<std::uint64_t> registrations{0};
  // Whether "unavailable" was already said at warning level since the last registration (session thread):
  // once, so that a wrong or unreachable address shows without flooding the log while retries go on.
  bool warned_unavailable = false;

  std::mutex mu;
  std::condition_variable cv;
  // mu guards the following.
  bool started = false;
  bool stopping = false;
  bool finished = false;                        // run() returned (the session thread is ending)
  std::optional<std::string> detach_as;         // set by fail(): the failed Detach's reason
  grpc::ClientContext* current_call = nullptr;  // the current call's context while run_once() has one
  bool opened = false;                          // the current call's stream is open (Attach() returned)
  bool broken = false;                          // the current stream ended
  std::optional<std::string> failure;           // the current session's first exception
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

void CoordinatorSession::Impl::fail(const char* where) {
  const std::string what = CurrentExceptionText();
  {
    std::lock_guard lock(mu);
    if (failure) return;
    failure = fmt::format("{} threw: {}", where, what);
  }
  cv.notify_all();
}

void CoordinatorSession::Impl::run() {
  ReconnectBackoff backoff(
      config.reconnect_min, config.reconnect_max,
      (static_cast<std::uint64_t>(config.pid) << 20) ^ static_cast<std::uint64_t>(config.rank));
  while (true) {
    bool registered = false;
    try {
      registered = run_once();
    } catch (...) {  // not expected (run_once catches what its callbacks throw); never ends the process
      spdlog::error("worker[{}]: attaching to {} failed: {}; retrying, training goes on", config.rank,
                    config.address, CurrentExceptionText());
    }
    if (registered) {
      backoff.reset();
      warned_unavailable = false;
    }
    if (!wait_before_retry(backoff.next())) break;
  }
  {
    std::lock_guard lock(mu);
    finished = true;
  }
  cv.notify_all();
}

// Waits `wait` before the next attach, polling the channel meanwhile: a connection attempt that gRPC's own
// backoff timer starts is otherwise seen only by gRPC's backup poller (every 5 s), which is what kept
// workers away for 3-9 s after a coordinator restart. Cut short when the channel becomes READY during the
// wait (the coordinator is back). False when the session is stopping.
bool CoordinatorSession::Impl::wait_before_retry(std::chrono::milliseconds wait) {
  const Clock::time_point deadline = Clock::now() + wait;
  bool was_ready = channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mu);
      if (stopping) return false;
    }
    const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY && !was_ready) return true;
    was_ready =
        state == GRPC_CHANNEL_READY;  // READY all along (e.g. refused by the coordinator): wait it out
    const auto slice = std::min<Clock::duration>(deadline - Clock::now(), kPollSlice);
    channel->WaitForStateChange(state, std::chrono::system_clock::now() + slice);  // gRPC takes wall time
  }
  std::lock_guard lock(mu);
  return !stopping;
}

bool CoordinatorSession::Impl::begin_session() {
  std::lock_guard lock(mu);
  if (stopping) return false;
  broken = false;
  failure.reset();
  outbox.clear();
  return true;
}

bool CoordinatorSession::Impl::run_once() {
  grpc::ClientContext context;
  if (!config.credentials.token.empty()) {
    context.AddMetadata("authorization", "Bearer " + config.credentials.token);
  }
  if (!begin_session()) return false;
  // stop() cancels through this pointer: Attach() blocks until the connection is up, which takes up to
  // kConnectTimeout toward an address that accepts TCP but never answers.
  struct Published {
    Impl& impl;
    Published(Impl& i, grpc::ClientContext& c) : impl(i) {
      std::lock_guard lock(impl.mu);
      impl.current_call = &c;
      impl.opened = false;
      if (impl.stopping) c.TryCancel();  // stop() came in between and saw no context
    }
    ~Published() {
      std::lock_guard lock(impl.mu);
      impl.current_call = nullptr;
    }
  } published(*this, context);
  std::unique_ptr<Stream> stream = stub->Attach(&context);
  {
    std::lock_guard lock(mu);
    opened = true;
  }
  // Sampled once the stream is open (connecting takes a while), so pools created meanwhile are included.
  v1::WorkerMessage hello;
  try {
    hello = RegisterMessage(config, host.sample());
  } catch (...) {
    fail("sampling the pools for Register");
    context.TryCancel();
    end_session(*stream);
    return false;
  }
  bool registered = false;
  if (stream->Write(hello)) {
    // Nothing between here and join() throws: both loops catch everything (see fail()).
    std::thread reader([&] { read_loop(*stream, registered); });
    close_stream(*stream, context, write_loop(*stream));
    reader.join();
  }
  end_session(*stream);
  return registered;
}

void CoordinatorSession::Impl::handle(const v1::CoordinatorMessage& message, bool& registered) {
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
      if (it != oom_answers.end()) it->second = OomAnswer{r.granted(), r.new_limit_bytes(), r.message()};
    }
    cv.notify_all();
  } else if (auto command = FromProto(message)) {
    host.deliver(*command);
  }
}

// Reads until the stream ends. An exception (from the host's command handling, or anywhere in here) must
// not end the process: it fails the session, and the loop keeps draining the stream without handling
// messages, so the writer can close it cleanly.
void CoordinatorSession::Impl::read_loop(Stream& stream, bool& registered) {
  v1::CoordinatorMessage message;
  while (true) {
    try {
      if (!stream.Read(&message)) break;
    } catch (...) {
      fail("the session reader");
      break;  // the stream is left undrained: close_stream() cancels it
    }
    try {
      bool failed = false;
      {
        std::lock_guard lock(mu);
        failed = failure.has_value();
      }
      if (!failed) handle(message, registered);
    } catch (...) {
      fail("the session reader");
    }
  }
  {
    std::lock_guard lock(mu);
    broken = true;
  }
  attached = false;
  cv.notify_all();
}

// Writes queued messages and a report every interval until the session stops, breaks or fails.
WriteEnd CoordinatorSession::Impl::write_loop(Stream& stream) noexcept {
  try {
    Clock::time_point next_report = Clock::now() + config.report_interval;
    while (true) {
      {
        std::unique_lock lock(mu);
        cv.wait_until(lock, next_report, [this] { return stopping || broken || failure || !outbox.empty(); });
        if (failure) return WriteEnd::kFailed;
        if (broken) return WriteEnd::kBroken;
        if (stopping) return WriteEnd::kStopping;
      }
      if (!write_due(stream, next_report)) return WriteEnd::kBroken;
    }
  } catch (...) {
    fail("the session writer");
    return WriteEnd::kFailed;
  }
}

// Writes the queued messages, then a periodic report when one is due. False when a write failed.
bool CoordinatorSession::Impl::write_due(Stream& stream, Clock::time_point& next_report) {
  std::deque<std::pair<v1::WorkerMessage, bool>> batch;
  {
    std::lock_guard lock(mu);
    batch.swap(outbox);
  }
  for (auto& [message, droppable] : batch) {
    if (!stream.Write(message)) return false;
  }
  if (Clock::now() < next_report) return true;
  next_report = Clock::now() + config.report_interval;
  return stream.Write(ReportMessage(host.sample()));
}

// A stop or a failure detaches: a Detach message, then WritesDone. Detach{failed} (fail()) makes the
// coordinator record a death with its reason and abort the group; otherwise it records a detach, not a
// death. A broken stream, or a detach not answered in time, is cancelled.
void CoordinatorSession::Impl::close_stream(Stream& stream, grpc::ClientContext& context,
                                            WriteEnd end) noexcept {
  if (end != WriteEnd::kBroken) {
    std::optional<std::string> failed;
    {
      std::lock_guard lock(mu);
      failed = detach_as;  // fail() wins over a failure of this session's own (kFailed)
    }
    try {
      stream.Write(DetachMessage(failed));  // false: the stream broke; WritesDone and the wait settle it
    } catch (...) {
      // Only memory can fail here; the close below still tells a detach from a death as before.
    }
    stream.WritesDone();
    std::unique_lock lock(mu);
    cv.wait_for(lock, kDetachWait, [this] { return broken; });
  }
  context.TryCancel();  // a no-op once the call has ended; otherwise it ends the reader's Read
}

void CoordinatorSession::Impl::end_session(Stream& stream) {
  attached = false;
  grpc::Status status = stream.Finish();
  std::optional<std::string> failed;
  {
    std::lock_guard lock(mu);
    coordinator_id.clear();
    outbox.clear();
    failed = failure;
  }
  cv.notify_all();  // wakes OOM waiters: no answer will come on this stream
  if (failed) {
    spdlog::error("worker[{}]: session with {} ended: {}; reconnecting (training goes on)", config.rank,
                  config.address, *failed);
  } else if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    // UNAVAILABLE while the coordinator is down is expected; anything else is worth a warning.
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      spdlog::log(warned_unavailable ? spdlog::level::debug : spdlog::level::warn,
                  "worker[{}]: coordinator {} unavailable: {}; retrying (training goes on meanwhile, "
                  "unattached; later attempts are logged at debug level)",
                  config.rank, config.address, status.error_message());
      warned_unavailable = true;
    } else {
      spdlog::warn("worker[{}]: session with {} ended: {} ({})", config.rank, config.address,
                   status.error_message(), static_cast<int>(status.error_code()));
    }
  }
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

void CoordinatorSession::stop() { impl_->stop(std::nullopt); }

void CoordinatorSession::fail(std::string reason) { impl_->stop(std::move(reason)); }

void CoordinatorSession::Impl::stop(std::optional<std::string> failed_reason) {
  {
    std::unique_lock lock(mu);
    if (stopping) return;
    stopping = true;
    detach_as = std::move(failed_reason);
    // Still connecting: there is nobody to detach from yet, and Attach() would hold the thread for seconds.
    if (current_call != nullptr && !opened) current_call->TryCancel();
  }
  cv.notify_all();
  if (!thread.joinable()) return;
  {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, kDetachWait + kStopGrace, [this] { return finished; }) &&
        current_call != nullptr) {
      current_call->TryCancel();  // a write or read that does not end: the call ends now
    }
  }
  thread.join();
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
