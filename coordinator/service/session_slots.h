// SessionSlots: counts open streams of one kind against their limit (Attach streams against --max-sessions,
// Watch streams against --max-watches). A stream takes a slot before it does anything and gives it back when
// it is done; a stream that finds none left ends at once with RESOURCE_EXHAUSTED, and every stream already
// open is served on.
//
// Thread safety: every method is thread-safe (one atomic).
#pragma once

#include <atomic>
#include <cstddef>

namespace memcoord::coordinator {

class SessionSlots {
 public:
  explicit SessionSlots(std::size_t max) : max_(max) {}

  // Takes a slot; false (and nothing taken) when `max` streams are open.
  bool try_take() {
    std::size_t open = open_.load();
    while (open < max_) {
      if (open_.compare_exchange_weak(open, open + 1)) return true;
    }
    return false;
  }
  // REQUIRES: a slot taken by try_take().
  void give_back() { open_.fetch_sub(1); }
  std::size_t open() const { return open_.load(); }
  std::size_t max() const { return max_; }

 private:
  const std::size_t max_;
  std::atomic<std::size_t> open_{0};
};

}  // namespace memcoord::coordinator
