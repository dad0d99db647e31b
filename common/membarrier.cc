#include "common/membarrier.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memcoord {
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

bool MembarrierRegistered() noexcept {
  static const bool registered = Register();  // thread-safe once
  return registered;
}

void MembarrierEveryThread() noexcept {
  (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

}  // namespace memcoord
