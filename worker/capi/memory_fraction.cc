// The device's default pool's cap as a share of the device (memcoord.h: memcoord_set_memory_fraction), as
// torch.cuda.set_per_process_memory_fraction caps PyTorch's own allocator. The cap is the pool's limit
// (CachingPool::set_limit: trims the cache to fit, refuses a cap below the live blocks).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

extern "C" {

int memcoord_set_memory_fraction(int device, double fraction) {
  using namespace memcoord::capi;
  return Boundary("memcoord_set_memory_fraction", 13, [&] {
    if (!(fraction > 0.0 && fraction <= 1.0)) {  // NaN fails too
      return Fail(memcoord::InvalidArgument(fmt::format(
          "memcoord_set_memory_fraction: fraction {} is out of range; accepted: more than 0 and at "
          "most 1 (the share of the device's memory its default pool may reserve; 1: all of it)",
          fraction)));
    }
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_set_memory_fraction");
    auto pool = DevicePool(*guard.runtime(), device);
    if (!pool.ok()) return Fail(pool.status());
    // 1: the whole device, which is no cap at all (the pool's limit 0: memcoord status shows none).
    std::uint64_t cap = 0;
    if (fraction < 1.0) {
      const std::uint64_t total = (*pool)->backend().device_info().total_bytes;
      cap = static_cast<std::uint64_t>(std::floor(fraction * static_cast<double>(total)));
      if (cap == 0) {
        return Fail(memcoord::InvalidArgument(fmt::format(
            "memcoord_set_memory_fraction: fraction {} of the device's {} bytes is no byte at all", fraction,
            total)));
      }
    }
    memcoord::Status set = (*pool)->set_limit(cap);
    return set.ok() ? 0 : Fail(set);
  });
}

int memcoord_memory_fraction(int device, double* fraction) {
  using namespace memcoord::capi;
  return Boundary("memcoord_memory_fraction", 13, [&] {
    if (fraction == nullptr)
      return Fail(memcoord::InvalidArgument("memcoord_memory_fraction: fraction is NULL"));
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_memory_fraction");
    auto pool = DevicePool(*guard.runtime(), device);
    if (!pool.ok()) return Fail(pool.status());
    const std::uint64_t total = (*pool)->backend().device_info().total_bytes;
    const std::uint64_t limit = (*pool)->stats().limit_bytes;
    *fraction = limit == 0 || total == 0 ? 1.0 : static_cast<double>(limit) / static_cast<double>(total);
    return 0;
  });
}

}  // extern "C"
