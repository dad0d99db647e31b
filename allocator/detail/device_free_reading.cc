#include "allocator/detail/device_free_reading.h"

#include <algorithm>

namespace memcoord::detail {

std::uint64_t DeviceFreeReading::shortfall(DeviceBackend& backend, std::uint64_t need,
                                           std::uint64_t pool_reserved, Clock::time_point now) {
  if (!trusted(need, pool_reserved, now)) read(backend, pool_reserved, now);
  const std::uint64_t wanted = need + reserve_;
  const std::uint64_t free_bytes = estimate(pool_reserved);
  return free_bytes >= wanted ? 0 : wanted - free_bytes;
}

bool DeviceFreeReading::trusted(std::uint64_t need, std::uint64_t pool_reserved,
                                Clock::time_point now) const {
  if (!valid_) return false;
  // Reuse only with room to spare beyond the reserve: others' use since the reading could eat into it. The
  // wider the room, the longer others would need to eat it at one reserve per max_age.
  const std::uint64_t estimated = estimate(pool_reserved);
  if (estimated < need + 2 * reserve_) return false;
  const std::uint64_t spare = estimated - need - reserve_;
  const std::uint64_t stretch = reserve_ == 0 ? kMaxStretch : std::min(kMaxStretch, spare / reserve_);
  return now - read_at_ <= max_age_ * static_cast<std::int64_t>(stretch);
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
