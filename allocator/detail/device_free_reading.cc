#include "allocator/detail/device_free_reading.h"

namespace memcoord::detail {

std::uint64_t DeviceFreeReading::shortfall(DeviceBackend& backend, std::uint64_t need,
                                           std::uint64_t pool_reserved, Clock::time_point now) {
  const bool fresh_enough = valid_ && now - read_at_ <= max_age_;
  // Reuse only with room to spare beyond the reserve: others' use since the reading could eat into it.
  if (!fresh_enough || estimate(pool_reserved) < need + 2 * reserve_) read(backend, pool_reserved, now);
  const std::uint64_t wanted = need + reserve_;
  const std::uint64_t free_bytes = estimate(pool_reserved);
  return free_bytes >= wanted ? 0 : wanted - free_bytes;
}

void DeviceFreeReading::read(DeviceBackend& backend, std::uint64_t pool_reserved, Clock::time_point now) {
  const DeviceInfo info = backend.device_info();
  free_at_reading_ = info.free_bytes;
  pool_reserved_at_reading_ = pool_reserved;
  reserve_ = reserve_option_ != 0 ? reserve_option_ : info.total_bytes / 32;
  read_at_ = now;
  valid_ = true;
  ++readings_;
}

std::uint64_t DeviceFreeReading::estimate(std::uint64_t pool_reserved) const {
  if (pool_reserved >= pool_reserved_at_reading_) {
    const std::uint64_t grown = pool_reserved - pool_reserved_at_reading_;
    return free_at_reading_ > grown ? free_at_reading_ - grown : 0;
  }
  return free_at_reading_ + (pool_reserved_at_reading_ - pool_reserved);
}

}  // namespace memcoord::detail
