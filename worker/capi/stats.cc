// Statistics and cache control (memcoord.h): the device stats are sums of the PoolStats of every pool on
// the device (the default pool, named pools, capture pools), the very counters `memcoord status` shows.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "worker/capi/capture.h"
#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

static_assert(offsetof(memcoord_device_stats, pack_waits) == MEMCOORD_DEVICE_STATS_V1_SIZE,
              "v1 layout changed");
static_assert(offsetof(memcoord_device_stats, misses) == MEMCOORD_DEVICE_STATS_V2_SIZE, "v2 layout changed");
static_assert(offsetof(memcoord_device_stats, peak_live_blocks) == MEMCOORD_DEVICE_STATS_V3_SIZE,
              "v3 layout changed");
static_assert(offsetof(memcoord_device_stats, allocated_bytes_total) == MEMCOORD_DEVICE_STATS_V4_SIZE,
              "v4 layout changed");
static_assert(offsetof(memcoord_device_stats, peak_sums) == MEMCOORD_DEVICE_STATS_V5_SIZE,
              "v5 layout changed");
static_assert(offsetof(memcoord_device_stats, other_thread_frees) == MEMCOORD_DEVICE_STATS_V6_SIZE,
              "v6 layout changed");
static_assert(sizeof(memcoord_device_stats) == MEMCOORD_DEVICE_STATS_V7_SIZE, "v7 layout changed");
static_assert(sizeof(memcoord_abort_info) == MEMCOORD_ABORT_INFO_V1_SIZE, "v1 layout changed");
static_assert(std::is_standard_layout_v<memcoord_device_stats>);

namespace memcoord::capi {

Result<int> ResolveDevice(const Runtime& runtime, int device) {
  if (device == -1) return runtime.primary_device;
  if (device < 0 || device >= runtime.device_count || device >= kMaxDevices) {
    return InvalidArgument(
        fmt::format("device {} is out of range: this process has {} device(s) (-1: primary)", device,
                    runtime.device_count));
  }
  return device;
}

// Every pool on `device`, capture pools included. Named and default pools live as long as the Worker;
// capture pools are visited under their lock.
void ForEachPool(Runtime& runtime, int device, const std::function<void(CachingPool&)>& visit) {
  for (auto& [d, pool] : runtime.worker->pools_with_devices()) {
    if (d == device) visit(*pool);
  }
  ForEachCapturePool(runtime, device, visit);
}

namespace {

// Peaks add up each pool's own (memcoord.h): an upper bound of the device's when several pools are used,
// since no device-wide counter is kept.
void Add(memcoord_device_stats& s, const PoolStats& p) {
  s.pools += 1;
  s.allocated_bytes += p.allocated_bytes;
  s.peak_allocated_bytes += p.peak_allocated_bytes;
  s.requested_bytes += p.requested_bytes;
  s.peak_requested_bytes += p.peak_requested_bytes;
  s.reserved_bytes += p.reserved_bytes;
  s.peak_reserved_bytes += p.peak_reserved_bytes;
  s.active_bytes += p.active_bytes;
  s.peak_active_bytes += p.peak_active_bytes;
  s.largest_free_bytes = std::max<std::uint64_t>(s.largest_free_bytes, p.largest_free_bytes);
  s.limit_bytes += p.limit_bytes;
  s.live_blocks += p.live_blocks;
  s.peak_live_blocks += p.peak_live_blocks;
  s.allocations += p.allocations;
  s.frees += p.allocations - p.live_blocks;
  s.allocated_bytes_total += p.allocated_bytes_total;
  s.freed_bytes_total += p.freed_bytes_total;
  s.peak_sums += p.peak_sums;
  s.other_thread_frees += p.other_thread_frees;
  s.cache_hits += p.cache_hits;
  s.ooms += p.ooms;
  s.backend_allocations += p.backend_allocations;
  s.backend_frees += p.backend_frees;
  s.backend_allocated_bytes += p.backend_allocated_bytes;
  s.backend_released_bytes += p.backend_released_bytes;
  s.trims += p.trims;
  s.trimmed_bytes += p.trimmed_bytes;
  s.pack_waits += p.pack_waits;
  s.pack_stream_syncs += p.pack_stream_syncs;
  s.misses += p.misses;
  s.miss_ns += p.miss_ns;
  s.pack_wait_ns += p.pack_wait_ns;
}

}  // namespace
}  // namespace memcoord::capi

extern "C" {

int memcoord_device_stats_get(int device, memcoord_device_stats* out) {
  using namespace memcoord::capi;
  return Boundary("memcoord_device_stats_get", 13, [&] {
    if (out == nullptr) return Fail(memcoord::InvalidArgument("memcoord_device_stats_get: out is NULL"));
    if (out->struct_size < MEMCOORD_DEVICE_STATS_V1_SIZE) {
      return Fail(memcoord::InvalidArgument(fmt::format(
          "memcoord_device_stats_get: struct_size {} is smaller than version 1 ({} bytes); set it to "
          "sizeof(memcoord_device_stats)",
          out->struct_size, MEMCOORD_DEVICE_STATS_V1_SIZE)));
    }
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_device_stats_get");
    auto resolved = ResolveDevice(*guard.runtime(), device);
    if (!resolved.ok()) return Fail(resolved.status());
    memcoord_device_stats s{};
    s.struct_size = out->struct_size;
    s.device = *resolved;
    bool any = false;
    ForEachPool(*guard.runtime(), *resolved, [&](memcoord::CachingPool& p) {
      Add(s, p.stats());
      // Read here, under the visit: a capture pool may be destroyed by a release once the visit is over.
      if (!any) s.device_total_bytes = p.backend().device_info().total_bytes;
      any = true;
    });
    std::memcpy(out, &s, std::min(out->struct_size, sizeof(s)));
    return 0;
  });
}

int memcoord_cache_info(int device, uint64_t* largest_bytes) {
  using namespace memcoord::capi;
  return Boundary("memcoord_cache_info", 13, [&] {
    if (largest_bytes == nullptr) {
      return Fail(memcoord::InvalidArgument("memcoord_cache_info: largest_bytes is NULL"));
    }
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_cache_info");
    // The default pool serves PyTorch's allocations on this device (made here on first use, as an allocation
    // would); named and capture pools' blocks could not serve them, as PyTorch's private pools do not count.
    auto pool = DevicePool(*guard.runtime(), device);
    if (!pool.ok()) return Fail(pool.status());
    *largest_bytes = std::max<std::uint64_t>((*pool)->backend().device_info().free_bytes,
                                             (*pool)->stats().largest_free_bytes);
    return 0;
  });
}

int memcoord_reset_peak_stats(int device) {
  using namespace memcoord::capi;
  return Boundary("memcoord_reset_peak_stats", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_reset_peak_stats");
    auto resolved = ResolveDevice(*guard.runtime(), device);
    if (!resolved.ok()) return Fail(resolved.status());
    ForEachPool(*guard.runtime(), *resolved, [](memcoord::CachingPool& p) { p.reset_peak_stats(); });
    return 0;
  });
}

int memcoord_empty_cache(int device, uint64_t* released_bytes) {
  using namespace memcoord::capi;
  return Boundary("memcoord_empty_cache", 13, [&] {
    if (released_bytes != nullptr) *released_bytes = 0;
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_empty_cache");
    auto resolved = ResolveDevice(*guard.runtime(), device);
    if (!resolved.ok()) return Fail(resolved.status());
    // The device's pools release nothing while a capture routes the device (CachingPool::trim). Private
    // pools in use keep their memory for their graphs' replays: only released ones are trimmed.
    std::uint64_t released = 0;
    for (const auto& [pool_device, pool] : guard.runtime()->worker->pools_with_devices()) {
      if (pool_device == *resolved) released += pool->trim(0).released_bytes;
    }
    released += TrimReleasedCapturePools(*guard.runtime(), *resolved);
    if (released_bytes != nullptr) *released_bytes = released;
    return 0;
  });
}

}  // extern "C"
