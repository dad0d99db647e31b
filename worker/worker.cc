#include "worker/worker.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "allocator/backend_factory.h"
#include "allocator/pool_conf.h"
#include "allocator/trace_recorder.h"
#include "common/coordinator_address.h"
#include "common/pool_name.h"
#include "common/serial_runner.h"
#include "worker/detail/coordinator_session.h"
#include "worker/detail/worker_credentials.h"
#ifdef MEMCOORD_HAVE_CUDA
#include "allocator/cuda/cuda_device.h"
#endif

namespace memcoord {
namespace {

using detail::CommandAck;
using detail::WorkerCommand;
using SteadyClock = std::chrono::steady_clock;
constexpr std::size_t kHistory = 1024;

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// Simulated devices on host/virtual: the option, else $MEMCOORD_DEVICES, else 1.
Result<int> SimulatedDevices(int option) {
  constexpr int kMaxSimulated = 64;
  if (option == 0) {
    const std::string env = EnvOr("MEMCOORD_DEVICES", "1");
    char* end = nullptr;
    const long parsed = std::strtol(env.c_str(), &end, 10);
    if (end == env.c_str() || *end != '\0' || parsed < 1 || parsed > kMaxSimulated) {
      return InvalidArgument(
          fmt::format("MEMCOORD_DEVICES must be a whole number of simulated devices in [1, {}], got '{}'",
                      kMaxSimulated, env));
    }
    return static_cast<int>(parsed);
  }
  if (option < 1 || option > kMaxSimulated) {
    return InvalidArgument(fmt::format("simulated_devices must be in [1, {}] (0: $MEMCOORD_DEVICES), got {}",
                                       kMaxSimulated, option));
  }
  return option;
}

// rank<R>.<pool>, characters other than [A-Za-z0-9._@-] in the pool's name made '_': a trace's file stem and
// the workload its header names (one word, as trace readers take it).
std::string TraceName(int rank, const std::string& pool) {
  std::string safe = pool;
  for (char& c : safe) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '@' || c == '-';
    if (!keep) c = '_';
  }
  return fmt::format("rank{}.{}", rank, safe);
}

std::string TracePath(const std::string& dir, const std::string& trace_name) {
  return fmt::format("{}/{}.trace.gz", dir, trace_name);
}

// Makes the trace directory (and its parents) and checks that files can be created in it.
Status PrepareTraceDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir)) {
    return InvalidArgument(fmt::format("MEMCOORD_TRACE_DIR '{}' is not a directory that can be made ({})",
                                       dir, error ? error.message() : "a file is in the way"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgument(fmt::format("MEMCOORD_TRACE_DIR '{}' is not writable by this process", dir));
  }
  return Status::Ok();
}

int VisibleDevices() {
#ifdef MEMCOORD_HAVE_CUDA
  Result<int> count = CudaDeviceCount();
  return count.ok() ? *count : 0;
#else
  return 0;
#endif
}

// Step-end reports are at most one per kMinStepReportGap (1,000 a second); the periodic report carries the
// latest step between them. A loop of sub-millisecond steps reported every step end went past the
// coordinator's --max-report-rate (2,000 a second by default), which cuts the session off as broken, and a
// broken session is a death: a healthy job was aborted for being fast.
constexpr std::chrono::nanoseconds kMinStepReportGap = std::chrono::milliseconds(1);

// Whether a step end may report now; if so, records now in `last_ns`.
bool StepReportDue(std::atomic<std::int64_t>& last_ns) {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t last = last_ns.load(std::memory_order_relaxed);
  if (last != 0 && now - last < kMinStepReportGap.count()) return false;
  return last_ns.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

}  // namespace

class Worker::Impl final : public detail::SessionHost {
 public:
  // The session thread measures free memory; step_end() reports the last measurement (never the driver).
  detail::ReportSample sample() override {
    const std::uint64_t free_bytes = backend->device_info().free_bytes;
    device_free_bytes.store(free_bytes);
    return take_sample(false, free_bytes);
  }
  void deliver(const WorkerCommand& command) override;

  detail::ReportSample take_sample(bool at_step_end, std::uint64_t device_free_bytes) const;
  CommandAck apply(const WorkerCommand& command);
  void record(const WorkerCommand& command, const CommandAck& ack);
  bool on_oom(const std::string& pool_name, const OomEvent& event);
  std::vector<CachingPool*> all_pools() const;

  Result<CachingPool*> add_pool_locked(DeviceBackend& on, int device_index, PoolOptions pool_options);
  Result<int> resolve_device(int device) const;
  Result<DeviceBackend*> backend_for_locked(int device_index);

  WorkerOptions options;
  PoolOptions pool_defaults;  // WorkerOptions::alloc_conf applied; every pool's name is its own
  Topology topology;
  int device = -1;
  std::string backend_kind;  // resolved ("auto" replaced)
  int primary_device = 0;    // device index of `backend`
  int device_count = 1;
  std::unique_ptr<DeviceBackend> backend;
  // Backends of the devices but the primary, guarded by pools_mu; declared before `pools` so every pool is
  // destroyed before the backend it lives on.
  std::vector<std::pair<int, std::unique_ptr<DeviceBackend>>> device_backends;
  std::unique_ptr<detail::CoordinatorSession> session;  // null when standalone
  std::atomic<std::int64_t> step{0};
  // The training thread's (step_begin/step_end); atomic so that a program calling those from two threads
  // gets some order of its steps, not a data race.
  std::atomic<std::int64_t> current_step{0};
  std::atomic<bool> in_step{false};
  // When step_end() last queued a report (steady clock, ns): see kMinStepReportGap.
  std::atomic<std::int64_t> last_step_report_ns{0};
  std::atomic<std::uint64_t> device_free_bytes{0};

  mutable std::mutex pools_mu;
  // pools_mu guards the following (the pools themselves are thread-safe and never removed). Recorders are
  // declared before the pools so that every pool is gone before the recorder it writes to.
  std::vector<std::unique_ptr<TraceRecorder>> recorders;
  std::map<int, std::unique_ptr<TraceHistory>> histories;  // by device; outlive the pools like recorders
  std::set<int> histories_on;                              // devices whose new pools record history
  std::vector<std::unique_ptr<CachingPool>> pools;
  std::vector<int> pool_devices;  // pool_devices[i]: the device index of pools[i]

  mutable std::mutex commands_mu;
  // commands_mu guards the following.
  std::vector<WorkerCommand> pending;
  std::deque<AppliedCommand> history;
  std::function<void(const std::string&)> abort_hook;
  std::function<void(const AbortInfo&)> abort_info_hook;
  std::optional<AbortInfo> abort;

  // The coordinator's `now` commands, applied off the session's reader thread (serial_runner.h says why).
  // Declared last: stopped (by shutdown) and destroyed before everything its tasks use.
  SerialRunner now_commands{"worker: immediate command"};
};

Result<DeviceBackend*> Worker::Impl::backend_for_locked(int device_index) {
  if (device_index == primary_device) return backend.get();
  for (auto& [d, b] : device_backends) {
    if (d == device_index) return b.get();
  }
  BackendOptions backend_options;
  backend_options.device = device_index;
  backend_options.capacity_bytes = options.capacity_bytes;
  std::unique_ptr<DeviceBackend> made;
  if (options.backend_factory) {
    MEMCOORD_ASSIGN_OR_RETURN(made, options.backend_factory(device_index));
  } else {
    MEMCOORD_ASSIGN_OR_RETURN(made, MakeBackend(backend_kind, backend_options));
  }
  device_backends.emplace_back(device_index, std::move(made));
  return device_backends.back().second.get();
}

Result<CachingPool*> Worker::Impl::add_pool_locked(DeviceBackend& on, int device_index,
                                                   PoolOptions pool_options) {
  const std::string name = pool_options.name;
  std::unique_ptr<TraceRecorder> recorder;
  if (!options.trace_dir.empty()) {
    recorder = std::make_unique<TraceRecorder>();
    const std::string trace_name = TraceName(topology.rank, name);
    const Status opened = recorder->open(TracePath(options.trace_dir, trace_name), trace_name);
    if (!opened.ok()) {
      return Status(opened.code(),
                    fmt::format("trace of pool '{}' (MEMCOORD_TRACE_DIR): {}", name, opened.message()));
    }
  }
  auto pool = std::make_unique<CachingPool>(on, std::move(pool_options));
  pool->set_oom_hook([this, name](const OomEvent& event) { return on_oom(name, event); });
  if (recorder) {
    pool->set_recorder(recorder.get());
    recorders.push_back(std::move(recorder));
  }
  if (histories_on.count(device_index) > 0) pool->set_history(histories.at(device_index).get());
  pools.push_back(std::move(pool));
  pool_devices.push_back(device_index);
  return pools.back().get();
}

std::vector<CachingPool*> Worker::Impl::all_pools() const {
  std::lock_guard lock(pools_mu);
  std::vector<CachingPool*> out;
  for (const auto& p : pools) out.push_back(p.get());
  return out;
}

detail::ReportSample Worker::Impl::take_sample(bool at_step_end, std::uint64_t free_bytes) const {
  detail::ReportSample sample;
  sample.step = step.load();
  sample.at_step_end = at_step_end;
  sample.device_free_bytes = free_bytes;
  for (CachingPool* p : all_pools()) {
    // Never waits for a pool's lock: a trim or a miss may hold it for as long as a stream takes, and a rank
    // whose reports stop is taken for dead.
    sample.pools.push_back(detail::PoolSample{p->name(), p->stats_without_waiting(), p->tag_usage()});
  }
  return sample;
}

CommandAck Worker::Impl::apply(const WorkerCommand& command) {
  const auto start = SteadyClock::now();
  CommandAck ack;
  ack.command_id = command.command_id;
  ack.step = step.load();
  std::vector<CachingPool*> targets;
  if (command.pool.empty()) {
    targets = all_pools();
  } else {
    for (CachingPool* p : all_pools()) {
      if (p->name() == command.pool) targets.push_back(p);
    }
    if (targets.empty()) {
      ack.status = NotFound(fmt::format("rank {} has no pool '{}'", topology.rank, command.pool));
      return ack;
    }
  }
  if (command.kind == WorkerCommand::Kind::kTrim) {
    for (CachingPool* p : targets) {
      TrimResult r = p->trim(command.bytes);
      ack.released_bytes += r.released_bytes;
      ack.reserved_after_bytes += r.reserved_after_bytes;
    }
  } else {
    for (CachingPool* p : targets) {
      Status s = p->set_limit(command.bytes);
      if (!s.ok() && ack.status.ok()) ack.status = s;
      ack.reserved_after_bytes += p->stats().reserved_bytes;
    }
  }
  ack.duration_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
  return ack;
}

void Worker::Impl::record(const WorkerCommand& command, const CommandAck& ack) {
  AppliedCommand applied;
  applied.kind = command.kind == WorkerCommand::Kind::kTrim ? AppliedCommand::Kind::kTrim
                                                            : AppliedCommand::Kind::kSetQuota;
  applied.command_id = command.command_id;
  applied.requested_step = command.now ? -1 : command.step;
  applied.step = ack.step;
  applied.now = command.now;
  applied.pool = command.pool;
  applied.bytes = command.bytes;
  applied.released_bytes = ack.released_bytes;
  applied.status = ack.status;
  std::lock_guard lock(commands_mu);
  history.push_back(std::move(applied));
  while (history.size() > kHistory) history.pop_front();
}

void Worker::Impl::deliver(const WorkerCommand& command) {
  switch (command.kind) {
    case WorkerCommand::Kind::kAbort: {
      std::function<void(const std::string&)> hook;
      std::function<void(const AbortInfo&)> info_hook;
      AbortInfo info{command.dead_rank, command.reason, std::chrono::system_clock::now()};
      {
        std::lock_guard lock(commands_mu);
        if (abort) return;  // the first abort wins; the hooks run once
        abort = info;
        hook = abort_hook;
        info_hook = abort_info_hook;
      }
      spdlog::error("worker[{}]: aborted by the coordinator: {}", topology.rank, command.reason);
      if (hook) hook(command.reason);
      if (info_hook) info_hook(info);
      return;
    }
    case WorkerCommand::Kind::kPlacement:
      spdlog::info("worker[{}]: placement: model '{}' budget {} bytes", topology.rank, command.pool,
                   command.bytes);
      return;
    case WorkerCommand::Kind::kTrim:
    case WorkerCommand::Kind::kSetQuota:
      if (command.now) {
        const bool queued = now_commands.post([this, command] {
          CommandAck ack = apply(command);
          record(command, ack);
          if (session) session->ack(ack);
        });
        if (!queued) {  // shutting down, or no thread: say so rather than leave the command unanswered
          CommandAck ack;
          ack.command_id = command.command_id;
          ack.step = step.load();
          ack.status = Unavailable(
              "the worker is shutting down, or could not start the thread for immediate "
              "commands; nothing was applied");
          if (session) session->ack(ack);
        }
      } else {
        std::lock_guard lock(commands_mu);
        pending.push_back(command);
      }
      return;
  }
}

bool Worker::Impl::on_oom(const std::string& pool_name, const OomEvent& event) {
  if (!session || !session->attached()) return false;
  Result<detail::OomAnswer> answer =
      session->ask_oom(detail::OomQuestion{event.pool, event.requested_bytes, event.limit_bytes,
                                           event.reserved_bytes, event.allocated_bytes},
                       options.oom_wait);
  if (!answer.ok() || !answer->granted) {
    spdlog::warn("worker[{}]: pool '{}' out of memory, coordinator gave no room: {}", topology.rank,
                 pool_name, answer.ok() ? answer->message : answer.status().ToString());
    return false;
  }
  if (answer->new_limit_bytes != event.limit_bytes) {
    for (CachingPool* p : all_pools()) {
      if (p->name() != pool_name) continue;
      WorkerCommand command;
      command.kind = WorkerCommand::Kind::kSetQuota;
      command.now = true;
      command.pool = pool_name;
      command.bytes = answer->new_limit_bytes;
      CommandAck ack;
      ack.step = step.load();
      ack.status = p->set_limit(answer->new_limit_bytes);
      record(command, ack);
    }
  }
  return true;
}

Result<std::unique_ptr<Worker>> Worker::init(WorkerOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.topology) {
    impl->topology = *options.topology;
  } else {
    MEMCOORD_ASSIGN_OR_RETURN(impl->topology, DiscoverTopology());
  }
  if (options.report_interval.count() < 1 || options.report_interval.count() > 60000) {
    return InvalidArgument(
        fmt::format("report_interval must be in [1, 60000] ms, got {}", options.report_interval.count()));
  }
  const bool conf_from_env = options.alloc_conf.empty();
  if (conf_from_env) options.alloc_conf = EnvOr("MEMCOORD_ALLOC_CONF", "");
  Result<PoolOptions> pool_defaults = ApplyPoolConf(options.alloc_conf, PoolOptions{});
  if (!pool_defaults.ok()) {
    return InvalidArgument(fmt::format("{}: {}", conf_from_env ? "MEMCOORD_ALLOC_CONF" : "alloc_conf",
                                       pool_defaults.status().message()));
  }
  impl->pool_defaults = *std::move(pool_defaults);
  std::string_view coordinator_source = "WorkerOptions::coordinator";
  if (options.coordinator.empty()) {
    options.coordinator = EnvOr("MEMCOORD_COORDINATOR", "");
    coordinator_source = "MEMCOORD_COORDINATOR";
  }
  if (!options.coordinator.empty()) {
    MEMCOORD_RETURN_IF_ERROR(CheckCoordinatorAddress(options.coordinator, coordinator_source));
  }
  std::string kind = options.backend;
  const int visible = (kind == "auto" || kind.rfind("cuda", 0) == 0) ? VisibleDevices() : 0;
  if (kind == "auto") kind = visible > 0 ? "cuda-vmm" : "host";
  impl->device = DeviceForLocalRank(impl->topology.local_rank, visible);
  BackendOptions backend_options;
  backend_options.device = std::max(impl->device, 0);
  backend_options.capacity_bytes = options.capacity_bytes;
  if (options.backend_factory) {
    backend_options.device = 0;
    MEMCOORD_ASSIGN_OR_RETURN(impl->backend, options.backend_factory(0));
    kind = std::string(impl->backend->kind());
  } else {
    MEMCOORD_ASSIGN_OR_RETURN(impl->backend, MakeBackend(kind, backend_options));
  }
  impl->backend_kind = kind;
  impl->primary_device = backend_options.device;
  if (kind == "host" || kind == "virtual" || options.backend_factory) {
    impl->device = -1;
    impl->primary_device = 0;
    MEMCOORD_ASSIGN_OR_RETURN(impl->device_count, SimulatedDevices(options.simulated_devices));
  } else {
    impl->device_count = std::max(visible, impl->primary_device + 1);
  }

  if (options.trace_dir.empty()) options.trace_dir = EnvOr("MEMCOORD_TRACE_DIR", "");
  if (!options.trace_dir.empty()) MEMCOORD_RETURN_IF_ERROR(PrepareTraceDir(options.trace_dir));
  impl->options = options;
  if (!options.coordinator.empty()) {
    MEMCOORD_ASSIGN_OR_RETURN(
        detail::WorkerCredentials credentials,
        detail::ResolveWorkerCredentials(options.token, {options.tls_ca, options.tls_cert, options.tls_key}));
    const DeviceInfo info = impl->backend->device_info();
    impl->device_free_bytes.store(info.free_bytes);  // until the session thread measures again
    detail::SessionConfig config;
    config.address = options.coordinator;
    config.credentials = std::move(credentials);
    config.rank = impl->topology.rank;
    config.local_rank = impl->topology.local_rank;
    config.world_size = impl->topology.world_size;
    config.host = HostName();
    config.device = impl->device;
    config.device_name = info.name;
    config.device_uuid = info.uuid;
    config.backend = kind;
    config.device_total_bytes = info.total_bytes;
    config.group = options.group;
    config.pid = ::getpid();
    config.report_interval = options.report_interval;
    config.reconnect_min = options.reconnect_min;
    config.reconnect_max = options.reconnect_max;
    impl->session = std::make_unique<detail::CoordinatorSession>(config, *impl);
    impl->session->start();
  }
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Worker::~Worker() { shutdown(); }

const Topology& Worker::topology() const { return impl_->topology; }
int Worker::device() const { return impl_->device; }
DeviceBackend& Worker::backend() { return *impl_->backend; }

Result<CachingPool*> Worker::create_pool(PoolOptions options) {
  MEMCOORD_RETURN_IF_ERROR(CheckPoolName(options.name));
  std::lock_guard lock(impl_->pools_mu);
  for (const auto& p : impl_->pools) {
    if (p->name() == options.name) {
      return AlreadyExists(
          fmt::format("pool '{}' already exists on rank {}", options.name, impl_->topology.rank));
    }
  }
  return impl_->add_pool_locked(*impl_->backend, impl_->primary_device, std::move(options));
}

PoolOptions Worker::pool_options(std::string name) const {
  PoolOptions options = impl_->pool_defaults;
  options.name = std::move(name);
  return options;
}

int Worker::device_count() const { return impl_->device_count; }
int Worker::primary_device() const { return impl_->primary_device; }

Result<CachingPool*> Worker::device_pool(int device) {
  MEMCOORD_ASSIGN_OR_RETURN(device, impl_->resolve_device(device));
  const std::string name = device == impl_->primary_device ? "default" : fmt::format("default@{}", device);
  std::lock_guard lock(impl_->pools_mu);
  for (std::size_t i = 0; i < impl_->pools.size(); ++i) {
    if (impl_->pool_devices[i] == device && impl_->pools[i]->name() == name) return impl_->pools[i].get();
  }
  MEMCOORD_ASSIGN_OR_RETURN(DeviceBackend * on, impl_->backend_for_locked(device));
  return impl_->add_pool_locked(*on, device, pool_options(name));
}

std::vector<std::pair<int, CachingPool*>> Worker::pools_with_devices() const {
  std::lock_guard lock(impl_->pools_mu);
  std::vector<std::pair<int, CachingPool*>> out;
  for (std::size_t i = 0; i < impl_->pools.size(); ++i)
    out.emplace_back(impl_->pool_devices[i], impl_->pools[i].get());
  return out;
}

// The device index `device` (-1: the primary) names, or INVALID_ARGUMENT saying which are accepted.
Result<int> Worker::Impl::resolve_device(int requested) const {
  if (requested < -1 || requested >= device_count) {
    return InvalidArgument(fmt::format(
        "device {} is out of range: this process has {} device(s) on the {} backend (accepted: -1 for the "
        "primary device, or 0..{}{})",
        requested, device_count, backend_kind, device_count - 1,
        backend_kind == "host" || backend_kind == "virtual"
            ? "; set MEMCOORD_DEVICES=N for more simulated devices"
            : ""));
  }
  return requested == -1 ? primary_device : requested;
}

Status Worker::record_history(int device, bool on, std::size_t max_entries) {
  MEMCOORD_ASSIGN_OR_RETURN(const int index, impl_->resolve_device(device));
  if (on && max_entries == 0) {
    return InvalidArgument("record_history: max_entries must be at least 1 (the events kept per device)");
  }
  std::lock_guard lock(impl_->pools_mu);
  TraceHistory* history = nullptr;
  if (on) {
    auto& kept = impl_->histories[index];
    if (kept) {
      kept->reset(max_entries);
    } else {
      kept = std::make_unique<TraceHistory>(max_entries);
    }
    history = kept.get();
    impl_->histories_on.insert(index);
  } else {
    impl_->histories_on.erase(index);
  }
  for (std::size_t i = 0; i < impl_->pools.size(); ++i) {
    if (impl_->pool_devices[i] == index) impl_->pools[i]->set_history(history);
  }
  return Status::Ok();
}

std::vector<TraceHistory::Event> Worker::history(int device) const {
  Result<int> index = impl_->resolve_device(device);
  if (!index.ok()) return {};
  std::lock_guard lock(impl_->pools_mu);
  auto it = impl_->histories.find(*index);
  return it == impl_->histories.end() ? std::vector<TraceHistory::Event>{} : it->second->events();
}

CachingPool* Worker::pool(std::string_view name) const {
  std::lock_guard lock(impl_->pools_mu);
  for (const auto& p : impl_->pools) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

void Worker::step_begin() {
  impl_->current_step = impl_->step.load() + 1;
  impl_->in_step = true;
}

Status Worker::step_end() {
  if (!impl_->in_step) step_begin();
  impl_->in_step = false;
  impl_->step = impl_->current_step.load();
  std::vector<WorkerCommand> due;
  {
    std::lock_guard lock(impl_->commands_mu);
    auto keep = impl_->pending.begin();
    for (WorkerCommand& c : impl_->pending) {
      if (c.kind != WorkerCommand::Kind::kTrim || c.step <= impl_->current_step) {
        due.push_back(std::move(c));
      } else {
        if (&*keep != &c) *keep = std::move(c);  // a self-move would empty the command's strings (its pool)
        ++keep;
      }
    }
    impl_->pending.erase(keep, impl_->pending.end());
  }
  for (const WorkerCommand& c : due) {
    CommandAck ack = impl_->apply(c);
    impl_->record(c, ack);
    if (impl_->session) impl_->session->ack(ack);
  }
  if (impl_->session && StepReportDue(impl_->last_step_report_ns)) {
    impl_->session->report(impl_->take_sample(true, impl_->device_free_bytes.load()));
  }
  return Status::Ok();
}

std::int64_t Worker::step() const { return impl_->step.load(); }

// deliver() records the abort and reads the hooks under commands_mu: a hook set before that is called by
// deliver(), one set after it sees the abort here. Never both.
void Worker::on_abort(std::function<void(const std::string& reason)> hook) {
  std::optional<AbortInfo> came;
  {
    std::lock_guard lock(impl_->commands_mu);
    impl_->abort_hook = hook;
    came = impl_->abort;
  }
  if (came && hook) hook(came->reason);
}

void Worker::on_abort_info(std::function<void(const AbortInfo& info)> hook) {
  std::optional<AbortInfo> came;
  {
    std::lock_guard lock(impl_->commands_mu);
    impl_->abort_info_hook = hook;
    came = impl_->abort;
  }
  if (came && hook) hook(*came);
}

std::optional<std::string> Worker::abort_reason() const {
  std::lock_guard lock(impl_->commands_mu);
  if (!impl_->abort) return std::nullopt;
  return impl_->abort->reason;
}

std::optional<AbortInfo> Worker::abort_info() const {
  std::lock_guard lock(impl_->commands_mu);
  return impl_->abort;
}

bool Worker::attached() const { return impl_->session && impl_->session->attached(); }

std::string Worker::coordinator_id() const {
  return impl_->session ? impl_->session->coordinator_id() : std::string();
}

std::uint64_t Worker::registrations() const { return impl_->session ? impl_->session->registrations() : 0; }

std::vector<AppliedCommand> Worker::applied_commands() const {
  std::lock_guard lock(impl_->commands_mu);
  return {impl_->history.begin(), impl_->history.end()};
}

void Worker::shutdown() {
  impl_->now_commands.stop();  // before the session: its tasks ack through it
  if (impl_->session) impl_->session->stop();
}

void Worker::fail(std::string reason) {
  if (impl_->session) impl_->session->fail(std::move(reason));
}

}  // namespace memcoord
