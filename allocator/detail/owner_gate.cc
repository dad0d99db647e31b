#include "allocator/detail/owner_gate.h"

namespace memcoord::detail {

void FenceEveryThread() noexcept {
#if !defined(__SANITIZE_THREAD__)  // (the gate uses seq_cst operations there instead)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (MembarrierRegistered()) MembarrierEveryThread();
#endif
}

}  // namespace memcoord::detail
