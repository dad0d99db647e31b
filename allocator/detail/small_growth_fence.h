// SmallGrowthFence: while one is alive on a thread, the CorePool below refuses to grow its small-block arena
// for that thread's allocation (RefuseGrowth) instead of mapping more. ThreadCacheAdaptor arms one around a
// request of a size it caches: on a refusal it returns every thread's cache to the pool and asks again, so
// the pool reuses those blocks before it maps beside them. Thread-local: no other thread's calls are
// affected; the layers in between pass the refusal up as a plain failure (UNAVAILABLE, never
// RESOURCE_EXHAUSTED, so no out-of-memory is counted or retried). Fences nest; the inner one rules.
#pragma once

namespace memcoord::detail {

class SmallGrowthFence {
 public:
  explicit SmallGrowthFence(bool armed) : previous_(t_state) { t_state = armed ? kArmed : kOff; }
  ~SmallGrowthFence() { t_state = previous_; }
  SmallGrowthFence(const SmallGrowthFence&) = delete;
  SmallGrowthFence& operator=(const SmallGrowthFence&) = delete;

  // Whether the pool refused a growth under this fence.
  bool refused() const { return t_state == kRefused; }

  // For CorePool, at a small-arena miss about to grow: true when the calling thread's fence is armed (the
  // fence then records the refusal); false when no fence is, and the pool grows.
  static bool RefuseGrowth() {
    if (t_state != kArmed) return false;
    t_state = kRefused;
    return true;
  }

 private:
  enum State : unsigned char { kOff, kArmed, kRefused };
  static inline thread_local State t_state = kOff;
  State previous_;
};

}  // namespace memcoord::detail
