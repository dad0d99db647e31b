// RateLimiter: a token bucket for one Attach session's messages. It holds up to `burst` tokens, refills at
// `per_second`, and allow() takes one; a sender that stays above `per_second` for longer than the burst
// lasts is refused. The caller passes the time, so tests drive it without sleeping.
//
// Thread safety: none; one session's reads are handled one at a time, so its limiter needs no lock.
#pragma once

#include <algorithm>
#include <chrono>

namespace memcoord::coordinator {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // per_second <= 0: unlimited.
  RateLimiter(double per_second, double burst) : per_second_(per_second), burst_(burst), tokens_(burst) {}

  // Takes one token at time `now`; false when none is left (the sender is over the rate).
  bool allow(Clock::time_point now) {
    if (per_second_ <= 0) return true;
    if (started_) {
      const double elapsed_s = std::chrono::duration<double>(now - last_).count();
      tokens_ = std::min(burst_, tokens_ + std::max(0.0, elapsed_s) * per_second_);
    }
    started_ = true;
    last_ = now;
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

  double per_second() const { return per_second_; }

 private:
  const double per_second_;
  const double burst_;
  double tokens_;
  bool started_ = false;
  Clock::time_point last_{};
};

}  // namespace memcoord::coordinator
