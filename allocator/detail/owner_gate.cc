// Registration for OwnerGate's asymmetric fences (owner_gate.h): once per process, when the library loads.
// Registering again (the C ABI's call guard registers too) is harmless.
#include "allocator/detail/owner_gate.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memcoord::detail {
namespace {

bool Register() noexcept {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  const long supported = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

}  // namespace

bool AsymmetricFencesAvailable() noexcept {
  static const bool registered = Register();  // thread-safe once; later calls are one load and a branch
  return registered;
}

void FenceEveryThread() noexcept {
#if !defined(__SANITIZE_THREAD__)  // (the gate uses seq_cst operations there instead)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (AsymmetricFencesAvailable()) (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
#endif
}

}  // namespace memcoord::detail
