// CapacityCounter: the bytes a capped backend has handed out, against its capacity. take() succeeds only
// while the total stays within the cap (lock-free compare-and-swap); give() returns bytes. Thread-safe.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "common/bytes.h"
#include "common/status.h"

namespace memcoord::detail {

class CapacityCounter {
 public:
  explicit CapacityCounter(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // RESOURCE_EXHAUSTED naming `device`, the request and the use when `bytes` would pass the cap.
  Status take(std::uint64_t bytes, std::string_view device) {
    std::uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (used + bytes > capacity_ || used + bytes < used) {
        return ResourceExhausted(fmt::format("{}: {} requested with {} of {} in use", device,
                                             FormatBytes(bytes), FormatBytes(used), FormatBytes(capacity_)));
      }
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return Status::Ok();
  }
  void give(std::uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  std::uint64_t capacity() const { return capacity_; }

 private:
  const std::uint64_t capacity_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace memcoord::detail
