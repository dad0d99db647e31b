// CallGuard: per-thread hazard slots protecting the published Runtime (runtime.h states the contract).
// A thread claims one cache-line slot on its first call and gives it back when it exits (a pthread key).
// Entering a call stores the Runtime into the slot (seq_cst) and re-reads the published pointer (seq_cst):
// either shutdown's exchange comes first and the call sees no Runtime, or the slot's store does and
// shutdown's scan sees it. Threads beyond kSlots share one counted overflow slot (correct, only slower).
//
// Asymmetric fence. Where Linux offers MEMBARRIER_CMD_PRIVATE_EXPEDITED, the call side's store-load pair
// needs no hardware fence: shutdown issues membarrier() after its exchange, which runs a full barrier on
// every running thread of the process, so each call either has made its slot store visible before the scan
// or will load the null pointer. Without membarrier (old kernels, seccomp) and under ThreadSanitizer (which
// cannot see membarrier) both sides use seq_cst.
#include <chrono>
#include <thread>

#include "common/membarrier.h"
#include "common/thread_exit_key.h"
#include "worker/capi/runtime.h"

namespace memcoord::capi {

namespace guard {
std::atomic<Runtime*> g_runtime{nullptr};
bool g_asymmetric = false;  // set when the library loads (g_registered below)
thread_local constinit HazardSlot* t_hazard __attribute__((tls_model("initial-exec"))) = nullptr;
}  // namespace guard

namespace {

using guard::HazardSlot;
constexpr std::size_t kSlots = 1024;

HazardSlot g_slots[kSlots];
// Calls in flight on threads without a slot, and the runtime each such call may hold (any published one).
std::atomic<std::uint64_t> g_overflow_calls{0};

// Registered when the library loads; g_asymmetric is a plain bool so the inlined call side reads it with one
// load (the allocator's OwnerGate asks the same registration, common/membarrier.h).
const bool g_registered = (guard::g_asymmetric = memcoord::MembarrierRegistered());

// Without membarrier both sides are seq_cst already (the exchange and the scan's loads), so nothing more.
void FenceEveryThread() noexcept {
  if (guard::g_asymmetric) memcoord::MembarrierEveryThread();
}

__attribute__((tls_model("initial-exec"))) thread_local bool t_tried = false;
// Calls this thread has in flight on the overflow path (no slot), for InsideCall.
__attribute__((tls_model("initial-exec"))) thread_local int t_overflow_depth = 0;

// Gives the thread's slot back when it exits, through a pthread key rather than a thread_local's destructor:
// a thread whose first call comes from a pthread key destructor (freeing a per-thread block at exit) claims
// its slot after the thread_local destructors have run, so one registered then never ran and the slot was
// lost for good (past kSlots lost, every thread takes the overflow path). A key set during the key
// destructors' pass is destroyed in a further pass. Unclaiming lets a call in a later key destructor of the
// same thread claim a slot again.
void GiveSlotBack(void* slot) {
  static_cast<HazardSlot*>(slot)->owned.store(false, std::memory_order_release);
  guard::t_hazard = nullptr;
  t_tried = false;
}

ThreadExitKey g_slot_key(&GiveSlotBack);

}  // namespace

namespace guard {

HazardSlot* ClaimSlot() noexcept {
  if (t_tried) return nullptr;  // every slot was taken when this thread first called
  t_tried = true;
  for (HazardSlot& s : g_slots) {
    bool expected = false;
    if (!s.owned.load(std::memory_order_relaxed) &&
        s.owned.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      if (!g_slot_key.set(&s)) {  // no way to give it back: the overflow path instead (only slower)
        s.owned.store(false, std::memory_order_release);
        return nullptr;
      }
      t_hazard = &s;
      return &s;
    }
  }
  return nullptr;
}

Runtime* EnterOverflow() noexcept {
  ++t_overflow_depth;
  g_overflow_calls.fetch_add(1, std::memory_order_seq_cst);
  return g_runtime.load(std::memory_order_seq_cst);
}

void LeaveOverflow() noexcept {
  g_overflow_calls.fetch_sub(1, std::memory_order_release);
  --t_overflow_depth;
}

}  // namespace guard

void Publish(Runtime* runtime) noexcept { guard::g_runtime.store(runtime, std::memory_order_seq_cst); }

Runtime* Unpublish() noexcept { return guard::g_runtime.exchange(nullptr, std::memory_order_seq_cst); }

void WaitUntilUnused(const Runtime* runtime) noexcept {
  FenceEveryThread();
  auto busy = [runtime] {
    if (g_overflow_calls.load(std::memory_order_seq_cst) != 0) return true;
    for (const HazardSlot& s : g_slots) {
      if (s.hazard.load(std::memory_order_seq_cst) == runtime) return true;
    }
    return false;
  };
  // Calls in flight are short (an allocation waits at most the worker's oom_wait on the coordinator).
  while (busy()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

bool InsideCall() noexcept {
  if (t_overflow_depth > 0) return true;  // counted in g_overflow_calls, which a shutdown waits to see at 0
  const HazardSlot* slot = guard::t_hazard;
  return slot != nullptr && slot->hazard.load(std::memory_order_relaxed) != nullptr;
}

}  // namespace memcoord::capi
