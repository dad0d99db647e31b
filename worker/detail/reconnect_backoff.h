// ReconnectBackoff: how long a worker's session waits before its next attach attempt. Exponential from
// `min` to `max` (doubling per failed attempt), reset to `min` after a successful registration, with
// "equal jitter": each wait is drawn uniformly from [d/2, d] for the current step d, so that many workers
// that lost the same coordinator at the same instant do not all knock again at the same instant.
//
// Invariants: every wait lies in [max(1 ms, min / 2), max] (max is raised to min when below it). Not
// thread-safe (one per session thread). The seed makes a sequence reproducible in tests; sessions seed from
// their rank and pid.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace memcoord::detail {

class ReconnectBackoff {
 public:
  ReconnectBackoff(std::chrono::milliseconds min, std::chrono::milliseconds max, std::uint64_t seed)
      : min_(std::max(min, std::chrono::milliseconds(1))),
        max_(std::max(max, min_)),
        step_(min_),
        rng_(seed) {}

  // The wait before the next attempt; the step after it doubles (capped at max).
  std::chrono::milliseconds next() {
    const std::int64_t hi = step_.count();
    const std::int64_t lo = std::max<std::int64_t>(1, hi / 2);
    step_ = std::min(step_ * 2, max_);
    return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_));
  }
  // After a successful registration: the next break is retried quickly again.
  void reset() { step_ = min_; }

 private:
  const std::chrono::milliseconds min_;
  const std::chrono::milliseconds max_;
  std::chrono::milliseconds step_;
  std::mt19937_64 rng_;
};

}  // namespace memcoord::detail
