// The C ABI's process-wide state (worker/memcoord.h) and how its lifetime is kept safe without a lock on
// the allocation path.
//
// Publication. memcoord_init() builds one Runtime (the Worker, a per-device table of default pools, the
// abort state, capture routes) and publishes it through one atomic pointer; memcoord_shutdown() takes it
// back. Every entry point holds a CallGuard for its whole call: a per-thread hazard slot that names the
// Runtime in use (one store and one load; no shared counter, no lock). Shutdown unpublishes first, then
// waits until no slot names the Runtime, then destroys it: a thread inside alloc/free can never see it
// freed. A call that starts after unpublication sees no Runtime and fails with FAILED_PRECONDITION.
//
// Hot path. device_pools[d] caches the default pool of device d (filled on first use under the Worker's
// lock, then read with one acquire load); pools live as long as the Worker, so the cached pointer is valid
// while the CallGuard holds the Runtime. No pool name is compared on this path.
//
// Thread safety: every member is thread-safe (atomics, or the named mutex guarding it). Nothing in here may
// throw across the C boundary: entry points wrap their bodies in Boundary() (errors.h).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "worker/memcoord.h"
#include "worker/worker.h"

namespace memcoord::capi {

constexpr int kMaxDevices = 64;

// A private pool for the allocations of a CUDA graph capture (memcoord_begin_allocate_to_pool). Its users
// are counted as PyTorch counts a graph pool's (create-or-incref): each begin adds one, each release takes
// one; at 0 it is released, destroyed once empty (a begin before that revives it). DeviceSlot::captures_mu
// guards every field (capture.cc says how the filter is called outside it).
struct CapturePool {
  std::pair<std::uint64_t, std::uint64_t> id;
  std::unique_ptr<CachingPool> pool;
  memcoord_stream_filter filter = nullptr;  // set while allocations are routed here
  void* user = nullptr;
  bool routing = false;     // between begin and end
  int uses = 0;             // begins minus releases; 0: released
  std::uint64_t route = 0;  // begins so far: tells a route copied out of the lock from a later one
  int filter_calls = 0;     // threads inside `filter`, called outside the lock; the pool stays while > 0
  int waiting = 0;          // ends and releases waiting on calls_done for filter_calls to drop
  std::condition_variable calls_done;
};

struct DeviceSlot {
  std::atomic<CachingPool*> default_pool{nullptr};
  std::atomic<int> routing_captures{0};  // > 0: check capture routes before the default pool
  std::mutex captures_mu;
  // captures_mu guards the following.
  std::vector<std::unique_ptr<CapturePool>> captures;
};

struct AbortState {
  std::mutex mu;
  std::condition_variable cv;
  // mu guards the following.
  std::optional<AbortInfo> info;
  memcoord_abort_callback callback = nullptr;
  void* user = nullptr;
  bool callback_ran = false;
  // Calls of a callback under way (RunAbortCallback); cv is notified when one ends.
  int callbacks_running = 0;
  bool closing = false;  // shutdown began: waiters return
  // memcoord_set_abort_exit: the exit code (0: off) and grace; whether its timer started.
  int exit_code = 0;
  int exit_grace_ms = 0;
  bool exit_timer_started = false;
};

// The named pools the C ABI made (memcoord_alloc/free with a name), found without a lock: entries [0, count)
// never change once count covers them (pools live as long as the Worker); additions are serialized by
// add_mu. Past kMaxNamedPools names, pools are still made and found, through the Worker's locked list.
constexpr int kMaxNamedPools = 64;
struct NamedPoolTable {
  struct Entry {
    std::string name;
    CachingPool* pool = nullptr;
  };
  std::array<Entry, kMaxNamedPools> entries;
  std::atomic<int> count{0};
  std::mutex add_mu;
};

// Says whether allocating on `stream` now could break a CUDA graph capture: OK, or FAILED_PRECONDITION
// saying why and what to call instead (capture.h, CheckNotCapturing). It queries the driver, so the
// allocation path calls it only after the pool's driver-free hit (CachingPool::allocate_cached) refused.
using CaptureCheck = Status (*)(StreamId stream);

struct Runtime {
  std::unique_ptr<Worker> worker;
  int primary_device = 0;
  int device_count = 1;
  bool cuda_streams = false;             // the backend's streams are CUDA streams (capture can be detected)
  CaptureCheck capture_check = nullptr;  // set when cuda_streams (tests inject their own); nullptr: none
  std::array<DeviceSlot, kMaxDevices> devices;
  NamedPoolTable named_pools;
  AbortState abort;
};

// The guard's shared state (call_guard.cc); here so that entering and leaving a call inline into every
// entry point (two loads and two stores on the thread's own cache line).
namespace guard {
// 128 bytes apart, not 64: Intel's L2 prefetches lines in adjacent pairs, and each thread writes its slot
// on every call.
struct alignas(128) HazardSlot {
  std::atomic<const void*> hazard{nullptr};
  std::atomic<bool> owned{false};
};
extern std::atomic<Runtime*> g_runtime;
// True when shutdown fences every thread with membarrier(), so a call's store-load pair needs no CPU fence.
extern bool g_asymmetric;
// This thread's slot: nullptr before its first call, and for threads beyond the slots (they count calls in
// an overflow counter instead). Constant-initialized and trivially destructible: read with one %fs load.
extern thread_local constinit HazardSlot* t_hazard __attribute__((tls_model("initial-exec")));
HazardSlot* ClaimSlot() noexcept;  // first call of this thread; nullptr: no slot left
Runtime* EnterOverflow() noexcept;
void LeaveOverflow() noexcept;
}  // namespace guard

// The Runtime in use by this call, or none. Nests (an entry point calling another on the same thread).
class CallGuard {
 public:
  CallGuard() noexcept {
    guard::HazardSlot* slot = guard::t_hazard;
    if (slot == nullptr) slot = guard::ClaimSlot();
    slot_ = slot;
    if (slot == nullptr) {
      runtime_ = guard::EnterOverflow();
      return;
    }
    previous_ = slot->hazard.load(std::memory_order_relaxed);
    refresh();
  }
  ~CallGuard() {
    if (slot_ == nullptr) {
      guard::LeaveOverflow();
      return;
    }
    slot_->hazard.store(previous_, std::memory_order_release);
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
  Runtime* runtime() const noexcept { return runtime_; }
  // Takes the currently published Runtime (after an init on this thread). Either shutdown's exchange comes
  // first and the call sees no Runtime, or the slot's store does and shutdown's scan sees it.
  void refresh() noexcept {
    if (slot_ == nullptr) {
      runtime_ = guard::g_runtime.load(std::memory_order_seq_cst);
      return;
    }
    Runtime* seen = guard::g_runtime.load(std::memory_order_acquire);
    for (;;) {
      if (seen == nullptr) {
        // Keep an outer call's protection (nesting) but hold nothing new.
        slot_->hazard.store(previous_, std::memory_order_release);
        runtime_ = nullptr;
        return;
      }
      Runtime* again;
      if (guard::g_asymmetric) {
        slot_->hazard.store(seen, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);  // compiler order only; shutdown fences the CPU
        again = guard::g_runtime.load(std::memory_order_acquire);
      } else {
        slot_->hazard.store(seen, std::memory_order_seq_cst);
        again = guard::g_runtime.load(std::memory_order_seq_cst);
      }
      if (again == seen) {
        runtime_ = seen;
        return;
      }
      seen = again;
    }
  }

 private:
  Runtime* runtime_ = nullptr;
  const void* previous_ = nullptr;
  guard::HazardSlot* slot_ = nullptr;
};

// REQUIRES: the caller serializes publish/unpublish (lifetime.cc's init mutex).
void Publish(Runtime* runtime) noexcept;
Runtime* Unpublish() noexcept;
// Blocks until no CallGuard holds `runtime`. REQUIRES: it was unpublished.
void WaitUntilUnused(const Runtime* runtime) noexcept;
// Whether this thread is inside a memcoord call (holds a CallGuard on some Runtime, or any CallGuard on the
// overflow path, which a shutdown waits for whatever it holds).
bool InsideCall() noexcept;

// The default pool of `device` (-1: the primary), made on first use (MakeDevicePool). One acquire load
// once made: inline, since every allocation and free goes through it.
Result<CachingPool*> MakeDevicePool(Runtime& runtime, int device);
inline Result<CachingPool*> DevicePool(Runtime& runtime, int device) {
  const int index = device == -1 ? runtime.primary_device : device;
  if (index >= 0 && index < kMaxDevices) {
    if (CachingPool* pool = runtime.devices[index].default_pool.load(std::memory_order_acquire)) return pool;
  }
  return MakeDevicePool(runtime, device);
}
// Fills the abort state, wakes memcoord_wait_abort's waiters, starts the exit timer if one is set (a failure
// to start it is logged, never thrown) and calls the user's callback (session thread).
void DeliverAbort(Runtime& runtime, const AbortInfo& info);

}  // namespace memcoord::capi

namespace memcoord::capi {
// memcoord_init() with explicit options (tests inject backends and topology; the C entry point reads the
// environment). Not exported from libmemcoord_capi.so; tests link the static memcoord_capi_static.
// `capture_check`: nullopt chooses by the backend (CheckNotCapturing on CUDA backends, none otherwise);
// tests pass their own (nullptr: none).
int InitWith(WorkerOptions options, std::optional<CaptureCheck> capture_check = std::nullopt);
// The torch hooks' memcoord_init() on a process's first allocation: 0 once a worker is published. Tried
// once: after memcoord_shutdown(), or after that init failed, it fails at once (FAILED_PRECONDITION, or the
// init's own error) without a lock.
int InitOnFirstUse(const char* caller);
// True on a thread inside the user's abort callback, whichever thread runs it, also after a callback set
// from inside it ran and returned (memcoord_shutdown refuses there).
bool InAbortCallback() noexcept;
// Fills `out` (its struct_size decides how much) from `info` (nullopt: not aborted).
void FillAbortInfo(const std::optional<AbortInfo>& info, memcoord_abort_info& out) noexcept;
// memcoord_set_abort_exit's timer: a detached thread that, `grace_ms` after now, writes the abort to stderr
// and ends the process with _exit(exit_code). It holds copies only (it may outlive the Runtime). INTERNAL
// when it could not start (no thread, no memory for its message); then nothing was started.
[[nodiscard]] Status StartAbortExitTimer(const AbortInfo& info, int rank, int exit_code,
                                         int grace_ms) noexcept;
// Calls `callback`, which the caller took from `state` under its lock while raising callbacks_running, and
// lowers callbacks_running when it returns.
void RunAbortCallback(AbortState& state, memcoord_abort_callback callback, void* user,
                      const AbortInfo& info) noexcept;
}  // namespace memcoord::capi
