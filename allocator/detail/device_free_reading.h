// DeviceFreeReading: what a mapping pool's misses know of the device's free memory, without asking the driver
// on every miss. A reading (DeviceBackend::device_info(): one cudaMemGetInfo on CUDA, 5-7 us on an idle H200,
// tens of us while the first training step launches) is kept with the pool's reserved bytes at that moment.
// While the reading is trusted, the device's free bytes are estimated as the reading less what the pool has
// reserved since (plus what it has released since).
//
// Trust: an estimate is used only when it leaves at least twice the reserve beyond the request, and only for
// max_age for each reserve it leaves to spare beyond the request and the reserve, at most kMaxStretch of them
// (so from max_age, with exactly one to spare, to kMaxStretch x max_age: 50 ms to 1 s by default).
// Otherwise (and when the reading was invalidated) the backend is asked again. So what this pool maps itself
// is always counted, and memory taken by anyone else (another process, another pool, cudaMalloc beside the
// pool) is seen at the latest kMaxStretch x max_age after the reading, and sooner whenever it matters: for a
// miss to map while the device is short, others must have taken all the spare room since a reading younger
// than max_age for each reserve of it, i.e. more than one reserve per max_age on average (the bound the
// single max_age of earlier versions assumed, kept while the room is wide and the reading older). Should
// they have, the miss maps without packing first and leaves the device below its reserve until the next
// reading; if the device cannot hold the mapping at all, the mapping fails, the pool's last-resort pass
// runs, and the reading is invalidated.
// Not thread-safe: the owning pool's lock guards every call.
#pragma once

#include <chrono>
#include <cstdint>

#include "allocator/device_backend.h"

namespace memcoord::detail {

class DeviceFreeReading {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kDefaultMaxAge{50};
  // The most max_ages a reading is trusted for, however wide the room it leaves.
  static constexpr std::uint64_t kMaxStretch = 20;

  // `reserve_bytes`: the free memory a miss leaves the device (0: 1/32 of its total).
  explicit DeviceFreeReading(std::uint64_t reserve_bytes, std::chrono::nanoseconds max_age = kDefaultMaxAge)
      : reserve_option_(reserve_bytes), max_age_(max_age) {}

  // Bytes the device lacks for mapping `need` more while keeping the reserve free (0 when it has them).
  // `pool_reserved`: the pool's reserved bytes now; `now`: the caller's clock reading.
  std::uint64_t shortfall(DeviceBackend& backend, std::uint64_t need, std::uint64_t pool_reserved,
                          Clock::time_point now);
  // The next shortfall() asks the backend (after a mapping failed, a trim, anything that makes the estimate
  // suspect).
  void invalidate() { valid_ = false; }
  // How many times the backend was asked (tests, figures).
  std::uint64_t readings() const { return readings_; }

 private:
  void read(DeviceBackend& backend, std::uint64_t pool_reserved, Clock::time_point now);
  std::uint64_t estimate(std::uint64_t pool_reserved) const;
  // Whether the current reading may stand for the device's free memory for a miss of `need` now.
  bool trusted(std::uint64_t need, std::uint64_t pool_reserved, Clock::time_point now) const;

  const std::uint64_t reserve_option_;
  const std::chrono::nanoseconds max_age_;
  bool valid_ = false;
  std::uint64_t free_at_reading_ = 0;
  std::uint64_t pool_reserved_at_reading_ = 0;
  std::uint64_t reserve_ = 0;  // resolved at each reading (total_bytes / 32 when the option is 0)
  Clock::time_point read_at_{};
  std::uint64_t readings_ = 0;
};

}  // namespace memcoord::detail
