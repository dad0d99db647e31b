// LeakWatch: finds steady growth of live bytes per (rank, pool, tag) across training steps, the commonest
// memory bug in training loops (outputs kept alive across steps, a model rebuilt every epoch).
//
// It keeps the last `window` end-of-step samples of each series. A series alarms when the window is full,
// no sample is below the one before it, at least `min_rising_fraction` of the steps grew, and the total
// growth is at least `min_growth_bytes`. A loop whose live bytes return to the same level at every step
// end (or that warms up once and then stays flat) never alarms. An alarm clears when the series stops
// growing. Thread safety: every method is thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

struct LeakWatchOptions {
  int window = 8;                            // end-of-step samples per series
  double min_rising_fraction = 0.75;         // share of steps in the window that must grow
  std::uint64_t min_growth_bytes = 1 << 20;  // total growth across the window
};

class LeakWatch {
 public:
  explicit LeakWatch(LeakWatchOptions options = {});

  // Feeds one end-of-step sample of every pool of `rank`. Samples for a step not after the last one seen
  // for a series are ignored (duplicates, reports from before a restart).
  void observe(int rank, std::int64_t step, const std::vector<PoolUsage>& pools);
  // Forgets a rank (it re-registered: a new process).
  void forget(int rank);
  std::vector<LeakAlert> alerts() const;

 private:
  using Key = std::tuple<int, std::string, std::string>;  // rank, pool, tag
  struct Sample {
    std::int64_t step;
    std::uint64_t bytes;
  };
  void observe_series(const Key& key, std::int64_t step, std::uint64_t bytes);

  static LeakWatchOptions Normalized(LeakWatchOptions options);

  const LeakWatchOptions options_;
  mutable std::mutex mu_;
  // mu_ guards the following.
  std::map<Key, std::deque<Sample>> series_;
  std::map<Key, LeakAlert> alerts_;
};

}  // namespace memcoord::coordinator
