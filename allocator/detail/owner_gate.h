// OwnerGate: exclusion between one thread that enters a section very often (the owner) and other threads
// that need the same data rarely (intruders), where the owner pays no atomic read-modify-write and, where
// Linux offers membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), no CPU fence: its side is two plain stores
// and a load. Intruders pay for both sides with one membarrier() each, which runs a full barrier on every
// running thread of the process.
//
// Contract: while the owner is between a successful try_enter() and leave(), no intruder is between
// exclude() and admit(), and the other way round; each side sees what the other wrote in its section.
// try_enter() fails (the owner is not inside) while an intruder holds or is taking the gate: the owner then
// takes the lock that intruders hold (ThreadCacheSlot::mu), which orders it after them.
// Intruders must be serialized among themselves by that lock; only one thread may ever be the owner at a
// time (a slot is owned by one thread).
//
// Why it holds: try_enter stores owner_inside, then loads intruder; exclude stores intruder, then waits for
// owner_inside to read false. With membarrier the owner's store-load pair needs only a compiler barrier:
// the intruder's membarrier() orders the owner's store before the owner's load on every thread that runs,
// so either the owner sees the intruder, or the intruder sees the owner inside and waits (Dekker). Without
// membarrier (old kernels, seccomp) both sides use a seq_cst fence; under ThreadSanitizer, which cannot see
// membarrier, seq_cst stores and loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "common/membarrier.h"

namespace memcoord::detail {

// A seq_cst fence on this thread, then, where membarrier is registered (common/membarrier.h), a full barrier
// on every running thread of the process. Under ThreadSanitizer, which sees neither, it only counts.
void FenceEveryThread() noexcept;

// How many FenceEveryThread() calls this process made (each an intruder's exclusion): for tests and benches,
// as each costs a membarrier() that interrupts every running thread of the process.
std::uint64_t FencesOnEveryThread() noexcept;

class OwnerGate {
 public:
  // `asymmetric`: the owner relies on the intruders' membarrier (only where it is registered); false makes
  // the owner pay a seq_cst fence, as without membarrier (tests use it to run that path).
  explicit OwnerGate(bool asymmetric = MembarrierRegistered()) : asymmetric_(asymmetric) {}

  bool try_enter() noexcept {
#if defined(__SANITIZE_THREAD__)
    owner_inside_.store(true, std::memory_order_seq_cst);
    if (intruder_.load(std::memory_order_seq_cst)) {
#else
    owner_inside_.store(true, std::memory_order_relaxed);
    if (asymmetric_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the intruder's membarrier does the rest
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    if (intruder_.load(std::memory_order_acquire)) {
#endif
      owner_inside_.store(false, std::memory_order_release);
      return false;
    }
    return true;
  }
  void leave() noexcept { owner_inside_.store(false, std::memory_order_release); }

  // REQUIRES: the intruders' lock held. Returns once the owner is outside; it stays out until admit().
  void exclude() noexcept {
#if defined(__SANITIZE_THREAD__)
    intruder_.store(true, std::memory_order_seq_cst);
    FenceEveryThread();  // counted only (FencesOnEveryThread): the seq_cst operations do the ordering here
    auto inside = [this] { return owner_inside_.load(std::memory_order_seq_cst); };
#else
    intruder_.store(true, std::memory_order_relaxed);
    FenceEveryThread();  // its own seq_cst fence first, then the owner's side
    auto inside = [this] { return owner_inside_.load(std::memory_order_acquire); };
#endif
    for (int spins = 0; inside(); ++spins) {
      if (spins > 64) std::this_thread::yield();  // the owner may be descheduled inside
    }
  }
  void admit() noexcept { intruder_.store(false, std::memory_order_release); }

 private:
  const bool asymmetric_;
  std::atomic<bool> owner_inside_{false};  // written by the owner only
  std::atomic<bool> intruder_{false};      // written by intruders only, under their lock
};

}  // namespace memcoord::detail
