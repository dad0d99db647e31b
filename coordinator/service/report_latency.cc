#include "coordinator/service/report_latency.h"

#include <algorithm>
#include <cmath>

namespace memcoord::coordinator {

LatencyRecorder::LatencyRecorder(std::size_t capacity) { samples_.reserve(capacity); }

void LatencyRecorder::record(double micros) {
  std::lock_guard lock(mu_);
  if (samples_.size() < samples_.capacity()) {
    samples_.push_back(micros);
  } else {
    samples_[next_] = micros;
    next_ = (next_ + 1) % samples_.size();
  }
  ++count_;
}

double LatencyRecorder::percentile(double p) const {
  std::vector<double> copy;
  {
    std::lock_guard lock(mu_);
    copy = samples_;
  }
  if (copy.empty()) return 0.0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(copy.size() - 1);
  const auto index = static_cast<std::size_t>(std::llround(rank));
  std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(index), copy.end());
  return copy[index];
}

std::uint64_t LatencyRecorder::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

}  // namespace memcoord::coordinator
