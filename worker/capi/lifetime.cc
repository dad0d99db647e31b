// Entry points for the worker's lifetime and the training loop's safe points (memcoord.h).
// g_init_mu serializes memcoord_init and memcoord_shutdown (never taken on the allocation path).
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "common/logging.h"
#include "worker/capi/capture.h"
#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

namespace {

using memcoord::capi::Boundary;
using memcoord::capi::CallGuard;
using memcoord::capi::Fail;
using memcoord::capi::FailNotInitialized;
using memcoord::capi::Runtime;

std::mutex g_init_mu;
// Whether an init ever succeeded in this process, and the failure of the torch hooks' init on first use,
// which is tried once: memcoord_torch_malloc must not make a second worker after memcoord_shutdown(), nor
// retry a failing init (under g_init_mu) on every allocation. The status is written once, under g_init_mu,
// before the flag's release store, and only read after its acquire load.
std::atomic<bool> g_initialized_once{false};
std::atomic<bool> g_first_use_failed{false};
memcoord::Status g_first_use_status;

// The worker's options from the environment; `backend_variable` names the variable the backend came from
// (nullptr: none), so that a refusal of it can say where the bad value was set.
struct EnvironmentOptions {
  memcoord::WorkerOptions options;
  const char* backend_variable = nullptr;
};

EnvironmentOptions OptionsFromEnvironment() {
  EnvironmentOptions made;
  if (const char* backend = std::getenv("MEMCOORD_BACKEND"); backend != nullptr && *backend != '\0') {
    made.options.backend = backend;
    made.backend_variable = "MEMCOORD_BACKEND";
  }
  return made;
}

// A worker's refusal of its options, naming the environment variable a refused backend came from: the backend
// factory's "unknown backend 'cuad'" (INVALID_ARGUMENT) and "backend 'cuda' found no CUDA GPU" (UNAVAILABLE)
// do not say where 'cuad' or 'cuda' was set.
memcoord::Status InitFailure(const memcoord::Status& status, const memcoord::WorkerOptions& options,
                             const char* backend_variable) {
  if (backend_variable == nullptr ||
      status.message().find("backend '" + options.backend + "'") == std::string::npos) {
    return status;
  }
  return memcoord::Status(status.code(),
                          fmt::format("{}={}: {}", backend_variable, options.backend, status.message()));
}

int InitLocked(memcoord::WorkerOptions options, std::optional<memcoord::capi::CaptureCheck> capture_check,
               const char* backend_variable = nullptr) {
  CallGuard probe;
  if (probe.runtime() != nullptr) return 0;
  memcoord::SetUpLibraryLogging();  // MEMCOORD_LOG_LEVEL (default warn), to stderr: stdout is the program's
  auto worker = memcoord::Worker::init(options);
  if (!worker.ok()) return Fail(InitFailure(worker.status(), options, backend_variable));
  memcoord::SetUpLibraryLogging((*worker)->topology().rank);
  auto runtime = std::make_unique<Runtime>();
  runtime->worker = *std::move(worker);
  runtime->primary_device = runtime->worker->primary_device();
  runtime->device_count = runtime->worker->device_count();
  const std::string_view kind = runtime->worker->backend().kind();
  runtime->cuda_streams = kind.rfind("cuda", 0) == 0;
  runtime->capture_check =
      capture_check.value_or(runtime->cuda_streams ? &memcoord::capi::CheckNotCapturing : nullptr);
  // The primary device's pool exists from the start, so the first allocation takes no lock.
  if (auto pool = memcoord::capi::DevicePool(*runtime, -1); !pool.ok()) return Fail(pool.status());
  Runtime* raw = runtime.get();
  runtime->worker->on_abort_info([raw](const memcoord::AbortInfo& info) { DeliverAbort(*raw, info); });
  memcoord::capi::Publish(runtime.release());
  g_initialized_once.store(true, std::memory_order_release);
  return 0;
}

int ShutdownLocked() {
  Runtime* runtime = memcoord::capi::Unpublish();
  if (runtime == nullptr) return 0;
  {
    std::lock_guard lock(runtime->abort.mu);
    runtime->abort.closing = true;
  }
  runtime->abort.cv.notify_all();
  runtime->worker->shutdown();  // stops the session thread: no abort delivery after this
  memcoord::capi::WaitUntilUnused(runtime);
  delete runtime;  // the worker, its pools and backends
  return 0;
}

}  // namespace

int memcoord::capi::InitWith(WorkerOptions options, std::optional<CaptureCheck> capture_check) {
  return Boundary("memcoord_init", 13, [&] {
    std::lock_guard lock(g_init_mu);
    return InitLocked(std::move(options), capture_check);
  });
}

int memcoord::capi::InitOnFirstUse(const char* caller) {
  const auto shut_down = [caller] {
    return Fail(FailedPrecondition(fmt::format(
        "{}: memcoord is not initialized: memcoord_shutdown() was called, and only a process's first "
        "allocation initializes it; call memcoord_init() to make a new worker",
        caller)));
  };
  if (g_initialized_once.load(std::memory_order_acquire)) {
    // The caller's guard saw no runtime, but another thread's init may have published one since (it
    // publishes before setting the flag, so this load sees it): that is no shutdown. The caller refreshes
    // its guard, which fails cleanly if a shutdown came in between.
    if (memcoord::capi::guard::g_runtime.load(std::memory_order_acquire) != nullptr) return 0;
    return shut_down();
  }
  if (g_first_use_failed.load(std::memory_order_acquire)) return Fail(g_first_use_status);
  std::lock_guard lock(g_init_mu);
  if (g_first_use_failed.load(std::memory_order_relaxed)) return Fail(g_first_use_status);
  CallGuard probe;
  if (probe.runtime() != nullptr) return 0;  // another thread's first use made it
  if (g_initialized_once.load(std::memory_order_relaxed)) return shut_down();
  auto [options, backend_variable] = OptionsFromEnvironment();
  const int code = InitLocked(std::move(options), std::nullopt, backend_variable);
  if (code != 0) {
    g_first_use_status =
        Status(static_cast<StatusCode>(code),
               fmt::format("{}: memcoord_init() on first use failed (it is not retried; call memcoord_init() "
                           "to try again): {}",
                           caller, memcoord::capi::LastError()));
    g_first_use_failed.store(true, std::memory_order_release);
    return Fail(g_first_use_status);
  }
  return 0;
}

extern "C" {

int memcoord_init(void) {
  return Boundary("memcoord_init", 13, [] {
    if (memcoord::capi::InsideCall() || memcoord::capi::InAbortCallback()) {
      // A shutdown may hold g_init_mu while it waits for this thread's outer call to leave (or joins the
      // session thread this callback runs on): taking the lock would wait for itself.
      if (memcoord::capi::guard::g_runtime.load(std::memory_order_acquire) != nullptr) return 0;
      return Fail(memcoord::FailedPrecondition(
          "memcoord_init: called from inside another memcoord call on this thread (a stream filter) or the "
          "abort callback while memcoord_shutdown() runs; call it after that call returns"));
    }
    std::lock_guard lock(g_init_mu);
    auto [options, backend_variable] = OptionsFromEnvironment();
    return InitLocked(std::move(options), std::nullopt, backend_variable);
  });
}

int memcoord_shutdown(void) {
  return Boundary("memcoord_shutdown", 13, [] {
    if (memcoord::capi::InAbortCallback()) {
      // On memcoord's session thread it would join itself; on the caller's (a callback set after the
      // abort) it would wait for the memcoord call it runs inside. Either way it would wait for itself.
      return Fail(memcoord::FailedPrecondition(
          "memcoord_shutdown: called from inside the abort callback, whose return it would have to wait "
          "for; call it from another thread, or after the callback returned"));
    }
    if (memcoord::capi::InsideCall()) {
      // An outer memcoord call on this thread (a capture filter calling back) holds the runtime: waiting
      // for it to leave would never end.
      return Fail(memcoord::FailedPrecondition(
          "memcoord_shutdown: called from inside another memcoord call on this thread (a stream filter)"));
    }
    std::lock_guard lock(g_init_mu);
    return ShutdownLocked();
  });
}

int memcoord_step_begin(void) {
  return Boundary("memcoord_step_begin", 13, [] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_step_begin");
    guard.runtime()->worker->step_begin();
    return 0;
  });
}

int memcoord_step_end(void) {
  return Boundary("memcoord_step_end", 13, [] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_step_end");
    memcoord::Status status = guard.runtime()->worker->step_end();
    if (!status.ok()) return Fail(status);
    // Runtime::abort, as memcoord_wait_abort and memcoord_abort_info_get read it: the three agree at every
    // moment (the Worker records an abort a moment before it is delivered here).
    std::optional<memcoord::AbortInfo> abort;
    {
      std::lock_guard lock(guard.runtime()->abort.mu);
      abort = guard.runtime()->abort.info;
    }
    if (abort) {
      return Fail(memcoord::Aborted(fmt::format(
          "the coordinator aborted this group: dead rank {}: {}; end the process with exit code {} "
          "(MEMCOORD_EXIT_ABORTED) so the launcher restarts the job",
          abort->dead_rank, abort->reason, MEMCOORD_EXIT_ABORTED)));
    }
    return 0;
  });
}

int64_t memcoord_step(void) {
  return Boundary("memcoord_step", int64_t{-1}, [] {
    CallGuard guard;
    return guard.runtime() == nullptr ? int64_t{-1} : guard.runtime()->worker->step();
  });
}

int memcoord_device_count(void) {
  return Boundary("memcoord_device_count", -1, [] {
    CallGuard guard;
    return guard.runtime() == nullptr ? -1 : guard.runtime()->device_count;
  });
}

const char* memcoord_last_error(void) { return memcoord::capi::LastError(); }

}  // extern "C"
