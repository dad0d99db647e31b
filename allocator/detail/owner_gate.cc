#include "allocator/detail/owner_gate.h"

namespace memcoord::detail {

namespace {
std::atomic<std::uint64_t> g_fences{0};
}  // namespace

void FenceEveryThread() noexcept {
  g_fences.fetch_add(1, std::memory_order_relaxed);
#if !defined(__SANITIZE_THREAD__)  // (the gate uses seq_cst operations there instead)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (MembarrierRegistered()) MembarrierEveryThread();
#endif
}

std::uint64_t FencesOnEveryThread() noexcept { return g_fences.load(std::memory_order_relaxed); }

}  // namespace memcoord::detail
