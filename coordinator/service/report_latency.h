// LatencyRecorder: the last `capacity` samples of a duration (microseconds) and their percentiles, for the
// coordinator's own statistics (report handling). Thread-safe; record() takes one short lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace memcoord::coordinator {

class LatencyRecorder {
 public:
  explicit LatencyRecorder(std::size_t capacity = 1 << 16);
  void record(double micros);
  // p in [0, 100]; 0 when there are no samples.
  double percentile(double p) const;
  std::uint64_t count() const;

 private:
  mutable std::mutex mu_;
  // mu_ guards the following.
  std::vector<double> samples_;
  std::size_t next_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace memcoord::coordinator
