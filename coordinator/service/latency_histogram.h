// LatencyHistogram: a Prometheus-style cumulative histogram of durations in seconds with fixed bucket
// bounds, for latencies the coordinator exposes as a `_bucket/_sum/_count` family (the trim fan-out).
// Unlike LatencyRecorder it keeps no samples, only counts, so it costs the same after a million trims.
// Thread safety: observe() and snapshot() are thread-safe (one short lock).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

class LatencyHistogram {
 public:
  // `bounds_s`: ascending upper bounds in seconds (the +Inf bucket is implicit).
  explicit LatencyHistogram(std::vector<double> bounds_s = DefaultBounds()) : bounds_s_(std::move(bounds_s)) {
    counts_.assign(bounds_s_.size(), 0);
  }

  // 1 ms to 60 s: a `now` trim on loopback fans out in about a millisecond, a step-synchronized one over
  // slow steps in tens of seconds.
  static std::vector<double> DefaultBounds() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  }

  void observe(double seconds) {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < bounds_s_.size(); ++i) {
      if (seconds <= bounds_s_[i]) ++counts_[i];  // cumulative: every bucket whose bound holds it
    }
    sum_s_ += seconds;
    ++count_;
  }

  HistogramView snapshot() const {
    std::lock_guard lock(mu_);
    return HistogramView{bounds_s_, counts_, sum_s_, count_};
  }

 private:
  const std::vector<double> bounds_s_;
  mutable std::mutex mu_;
  // mu_ guards the following.
  std::vector<std::uint64_t> counts_;  // cumulative count per bound
  double sum_s_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace memcoord::coordinator
