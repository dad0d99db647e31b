// Worker: the memcoord runtime inside one training process (usually one per GPU). init() finds the
// process's rank from the launcher's environment (worker/topology.h), binds the primary device from its
// local rank (CUDA's numbering already respects CUDA_VISIBLE_DEVICES; without a GPU it uses the host
// backend, a simulated device), owns named, isolated CachingPools on that device and a default pool on any
// other device the process uses (device_pool(d), one backend per device), and, when a coordinator address
// is known, keeps a session with it on a background thread: a report every report_interval and at every
// step_end().
//
// Safe points. Commands from the coordinator are applied only inside step_end() (a trim for step S runs at
// the end of step S), or at once when the coordinator says `now`; an Abort calls the on_abort hook at once
// (from the session thread) so a training program can abort its communicator; abort_info() keeps the dead
// rank, the reason and the time. Training never blocks on the coordinator: without one (or while it is down)
// the worker runs standalone and keeps trying to attach, with backoff, re-registering after a coordinator
// restart. A pool that cannot serve an allocation asks the coordinator for room (bounded by oom_wait) before
// failing.
//
// Thread safety: step_begin/step_end belong to the training thread; pools are thread-safe; every other
// method may be called from any thread. Ownership: the Worker owns its backend, pools and session; pools
// live until the Worker is destroyed. No gRPC type appears here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/trace_history.h"
#include "common/result.h"
#include "worker/topology.h"

namespace memcoord {

struct WorkerOptions {
  std::string coordinator;  // "HOST:PORT"; empty: $MEMCOORD_COORDINATOR; both empty: standalone
  std::string token;        // empty: $MEMCOORD_TOKEN, or the first line of $MEMCOORD_TOKEN_FILE
  // TLS to the coordinator (PEM paths). Empty: $MEMCOORD_TLS_CA, $MEMCOORD_TLS_CERT, $MEMCOORD_TLS_KEY. A CA
  // means a TLS channel; a certificate and its key add mutual TLS. Checked at init (worker_credentials.h).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string backend = "auto";      // "auto": cuda-vmm with a GPU, host otherwise
  std::uint64_t capacity_bytes = 0;  // host/virtual backends: the simulated device's size (0: default)
  std::string group = "world";       // communicator group aborted together
  std::chrono::milliseconds report_interval{100};
  std::chrono::milliseconds oom_wait{500};
  // Attach retries: exponential from min to max with jitter (worker/detail/reconnect_backoff.h); the same
  // bounds for gRPC's own reconnects. 64 workers re-attach within ~0.5 s of a coordinator restart.
  std::chrono::milliseconds reconnect_min{20};
  std::chrono::milliseconds reconnect_max{250};
  std::optional<Topology> topology;  // set: skip environment discovery (tests, benchmarks)
  // host/virtual backends: how many simulated devices device_pool() accepts; 0: $MEMCOORD_DEVICES, else 1.
  int simulated_devices = 0;
  // Set: makes the backend of every device instead of `backend` (tests inject instrumented backends). The
  // primary device is 0 and there are simulated_devices (or $MEMCOORD_DEVICES) of them.
  std::function<Result<std::unique_ptr<DeviceBackend>>(int device)> backend_factory;
  // Set: every pool this worker makes records its allocations and frees (TraceRecorder's format, which
  // `memcoord replay` reads) to DIR/rank<R>.<pool>.trace.gz, written from the pool's creation to the
  // Worker's destruction. Empty: $MEMCOORD_TRACE_DIR; both empty: no recording. The directory is made if
  // missing; init() fails naming it when it cannot be written.
  std::string trace_dir;
  // Options of every pool the worker makes itself (device_pool) and of those pool_options() describes
  // (the C ABI's named and capture pools), as allocator/pool_conf.h reads them: "thread_cache:0,
  // large_map_unit:40MiB". Empty: $MEMCOORD_ALLOC_CONF; both empty: PoolOptions' defaults. init() fails
  // naming the entry when the conf is bad. Pools made by create_pool() take the options given there.
  std::string alloc_conf;
};

// Why and when the coordinator aborted this worker's group (a rank died or was declared dead).
struct AbortInfo {
  int dead_rank = -1;  // the rank whose death caused the abort; -1 when the coordinator named none
  std::string reason;  // the coordinator's text, e.g. "rank 1 (host h, pid 42) is dead: stream broke"
  std::chrono::system_clock::time_point time;  // when this worker learned it
};

// A coordinator command as the worker applied it.
struct AppliedCommand {
  enum class Kind { kTrim, kSetQuota };
  Kind kind = Kind::kTrim;
  std::uint64_t command_id = 0;
  std::int64_t requested_step = -1;  // trim: the step S asked for (-1: now)
  std::int64_t step = 0;             // the last completed step when it ran
  bool now = false;
  std::string pool;         // empty: every pool
  std::uint64_t bytes = 0;  // trim target or new limit
  std::uint64_t released_bytes = 0;
  Status status;
};

class Worker {
 public:
  // Errors: INVALID_ARGUMENT for a malformed environment or option (a credential file that is unreadable,
  // not PEM or mismatched names the variable and the path); UNAVAILABLE / INVALID_ARGUMENT from
  // the backend (a GPU backend asked for where there is no GPU).
  static Result<std::unique_ptr<Worker>> init(WorkerOptions options = {});
  ~Worker();  // shutdown()
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const Topology& topology() const;
  int device() const;  // CUDA ordinal, -1 on the host backend
  DeviceBackend& backend();

  // Creates an isolated pool on this worker's device. ALREADY_EXISTS for a duplicate name, INVALID_ARGUMENT
  // for a name pool_name.h does not accept.
  Result<CachingPool*> create_pool(PoolOptions options);
  CachingPool* pool(std::string_view name) const;  // nullptr when unknown
  // The options of a pool named `name` as this worker makes them (WorkerOptions::alloc_conf applied).
  PoolOptions pool_options(std::string name) const;

  // Devices this process may use: CUDA ordinals [0, device_count()) on the cuda kinds; on host/virtual,
  // simulated devices (WorkerOptions::simulated_devices, $MEMCOORD_DEVICES; default 1), each its own backend.
  int device_count() const;
  // The index device_pool(-1) means: the CUDA ordinal bound from the local rank, 0 on host/virtual.
  int primary_device() const;
  // The default pool of `device` (-1: primary_device()), created on first use on that device with its own
  // backend (one backend per device). The primary device's pool is named "default"; device d's "default@d".
  // Pools are never destroyed before the Worker, so the pointer stays valid as long as the Worker.
  // Errors: INVALID_ARGUMENT for a device outside [-1, device_count()); the backend's errors.
  Result<CachingPool*> device_pool(int device);
  // Every pool with the device it lives on, in creation order.
  std::vector<std::pair<int, CachingPool*>> pools_with_devices() const;

  // Allocation history for snapshots (TraceHistory: the recent allocations and frees, as PyTorch's
  // _record_memory_history keeps them). On: every pool of `device` (-1: the primary), present or made later,
  // records into one history of the last `max_entries` events, which starts empty; the pools' thread caches
  // are off meanwhile. Off: recording stops and what was recorded stays readable. Errors: INVALID_ARGUMENT
  // for a device out of range or max_entries 0.
  Status record_history(int device, bool on, std::size_t max_entries);
  // The events recorded on `device` (-1: the primary), oldest first; empty when history was never on.
  std::vector<TraceHistory::Event> history(int device) const;

  // Marks the start of the next step (step() + 1).
  void step_begin();
  // Ends the current step: applies pending commands due at this step, then queues a report (at most one a
  // millisecond: the periodic report carries the steps between). Never waits on the coordinator. Called
  // without step_begin(), it begins and ends a step.
  Status step_end();
  std::int64_t step() const;  // last completed step (0 before the first)

  // Called (from the session thread) when the coordinator aborts this worker's group. A hook set after the
  // abort came (the session starts inside init(), so one can come before any hook is set) is called at
  // once, on the calling thread. Either way each hook runs at most once per abort.
  void on_abort(std::function<void(const std::string& reason)> hook);
  // The same with the dead rank and time.
  void on_abort_info(std::function<void(const AbortInfo& info)> hook);
  std::optional<std::string> abort_reason() const;
  std::optional<AbortInfo> abort_info() const;

  bool attached() const;
  std::string coordinator_id() const;                    // empty when not attached
  std::uint64_t registrations() const;                   // successful (re-)registrations
  std::vector<AppliedCommand> applied_commands() const;  // the last 1024

  // Detaches cleanly from the coordinator and stops the session; pools stay usable. Idempotent.
  void shutdown();
  // Ends the session as failed: the coordinator marks this rank dead with `reason` and aborts its group
  // (every live peer gets "rank R (host h, pid p) is dead: <reason>"), then the session stops as in
  // shutdown(); pools stay usable. Bounded like shutdown() (about 0.5 s when the coordinator does not
  // answer). Standalone, or not attached at that moment: nothing is sent. A no-op after shutdown() or fail().
  // A process that ends without either is seen as dead too (its session breaks), with a generic reason.
  // REQUIRES: not called from an on_abort hook (it runs on the session's thread, which this stops).
  void fail(std::string reason);

 private:
  class Impl;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord
