// CallGuard: per-thread hazard slots protecting the published Runtime (runtime.h states the contract).
// A thread claims one cache-line slot on its first call and gives it back when it exits. Entering a call
// stores the Runtime into the slot (seq_cst) and re-reads the published pointer (seq_cst): either shutdown's
// exchange comes first and the call sees no Runtime, or the slot's store does and shutdown's scan sees it.
// Threads beyond kSlots share one counted overflow slot (correct, only slower).
//
// Asymmetric fence. Where Linux offers MEMBARRIER_CMD_PRIVATE_EXPEDITED, the call side's store-load pair
// needs no hardware fence: shutdown issues membarrier() after its exchange, which runs a full barrier on
// every running thread of the process, so each call either has made its slot store visible before the scan
// or will load the null pointer. Without membarrier (old kernels, seccomp) and under ThreadSanitizer (which
// cannot see membarrier) both sides use seq_cst.
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "worker/capi/runtime.h"

namespace memcoord::capi {
namespace {

constexpr std::size_t kSlots = 1024;

struct alignas(64) Slot {
  std::atomic<const void*> hazard{nullptr};
  std::atomic<bool> owned{false};
};

Slot g_slots[kSlots];
std::atomic<Runtime*> g_runtime{nullptr};
// Calls in flight on threads without a slot, and the runtime each such call may hold (any published one).
std::atomic<std::uint64_t> g_overflow_calls{0};

#if defined(__SANITIZE_THREAD__)
constexpr bool kMayUseMembarrier = false;
#else
constexpr bool kMayUseMembarrier = true;
#endif

// Registered once per process; true when shutdown can fence every thread with membarrier().
bool RegisterMembarrier() noexcept {
  if (!kMayUseMembarrier) return false;
  const long supported = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}
const bool g_asymmetric = RegisterMembarrier();

// Without membarrier both sides are seq_cst already (the exchange and the scan's loads), so nothing more.
void FenceEveryThread() noexcept {
  if (g_asymmetric) (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

struct ThreadSlot {
  Slot* slot = nullptr;
  bool tried = false;
  ~ThreadSlot() {
    if (slot != nullptr) slot->owned.store(false, std::memory_order_release);
  }
};
// initial-exec: no __tls_get_addr call on the hot path (the slot is small enough for the static TLS
// surplus glibc keeps for dlopen'ed libraries).
__attribute__((tls_model("initial-exec"))) thread_local ThreadSlot t_slot;

Slot* ClaimSlot() noexcept {
  if (t_slot.tried) return t_slot.slot;
  t_slot.tried = true;
  for (Slot& s : g_slots) {
    bool expected = false;
    if (!s.owned.load(std::memory_order_relaxed) &&
        s.owned.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      t_slot.slot = &s;
      return &s;
    }
  }
  return nullptr;
}

}  // namespace

CallGuard::CallGuard() noexcept {
  Slot* slot = ClaimSlot();
  slot_ = slot;
  if (slot == nullptr) {
    g_overflow_calls.fetch_add(1, std::memory_order_seq_cst);
    runtime_ = g_runtime.load(std::memory_order_seq_cst);
    return;
  }
  previous_ = slot->hazard.load(std::memory_order_relaxed);
  refresh();
}

void CallGuard::refresh() noexcept {
  auto* slot = static_cast<Slot*>(slot_);
  if (slot == nullptr) {
    runtime_ = g_runtime.load(std::memory_order_seq_cst);
    return;
  }
  Runtime* seen = g_runtime.load(std::memory_order_acquire);
  for (;;) {
    if (seen == nullptr) {
      // Keep an outer call's protection (nesting) but hold nothing new.
      slot->hazard.store(previous_, std::memory_order_release);
      runtime_ = nullptr;
      return;
    }
    Runtime* again;
    if (g_asymmetric) {
      slot->hazard.store(seen, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // compiler order only; shutdown fences the CPU
      again = g_runtime.load(std::memory_order_acquire);
    } else {
      slot->hazard.store(seen, std::memory_order_seq_cst);
      again = g_runtime.load(std::memory_order_seq_cst);
    }
    if (again == seen) {
      runtime_ = seen;
      return;
    }
    seen = again;
  }
}

CallGuard::~CallGuard() {
  auto* slot = static_cast<Slot*>(slot_);
  if (slot == nullptr) {
    g_overflow_calls.fetch_sub(1, std::memory_order_release);
    return;
  }
  slot->hazard.store(previous_, std::memory_order_release);
}

void Publish(Runtime* runtime) noexcept { g_runtime.store(runtime, std::memory_order_seq_cst); }

Runtime* Unpublish() noexcept { return g_runtime.exchange(nullptr, std::memory_order_seq_cst); }

void WaitUntilUnused(const Runtime* runtime) noexcept {
  FenceEveryThread();
  auto busy = [runtime] {
    if (g_overflow_calls.load(std::memory_order_seq_cst) != 0) return true;
    for (const Slot& s : g_slots) {
      if (s.hazard.load(std::memory_order_seq_cst) == runtime) return true;
    }
    return false;
  };
  // Calls in flight are short (an allocation waits at most the worker's oom_wait on the coordinator).
  while (busy()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

bool InsideCall() noexcept {
  return t_slot.slot != nullptr && t_slot.slot->hazard.load(std::memory_order_relaxed) != nullptr;
}

}  // namespace memcoord::capi
