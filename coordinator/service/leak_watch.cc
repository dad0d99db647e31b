#include "coordinator/service/leak_watch.h"

#include <algorithm>
#include <limits>

namespace memcoord::coordinator {

LeakWatchOptions LeakWatch::Normalized(LeakWatchOptions options) {
  // A window needs two samples to show growth; keep the watch usable rather than failing.
  options.window = std::max(options.window, 2);
  return options;
}

LeakWatch::LeakWatch(LeakWatchOptions options) : options_(Normalized(options)) {}

void LeakWatch::observe(int rank, std::int64_t step, const std::vector<PoolUsage>& pools) {
  if (step < 0) return;  // not a step (reports refuse it too); keeps step differences from overflowing
  std::lock_guard lock(mu_);
  for (const PoolUsage& pool : pools) {
    // Per tag when the pool reports tags; the pool's live bytes as a whole otherwise.
    if (pool.tags.empty()) {
      observe_series(Key{rank, pool.name, "*"}, step, pool.allocated_bytes);
      continue;
    }
    for (const TagBytes& tag : pool.tags) {
      observe_series(Key{rank, pool.name, tag.tag}, step, tag.live_bytes);
    }
  }
}

void LeakWatch::observe_series(const Key& key, std::int64_t step, std::uint64_t bytes) {
  std::deque<Sample>& samples = series_[key];
  if (!samples.empty() && step <= samples.back().step) return;
  samples.push_back(Sample{step, bytes});
  while (samples.size() > static_cast<std::size_t>(options_.window)) samples.pop_front();

  bool leaking = samples.size() == static_cast<std::size_t>(options_.window);
  int rising = 0;
  for (std::size_t i = 1; leaking && i < samples.size(); ++i) {
    if (samples[i].bytes < samples[i - 1].bytes) leaking = false;
    if (samples[i].bytes > samples[i - 1].bytes) ++rising;
  }
  const std::uint64_t growth =
      samples.back().bytes > samples.front().bytes ? samples.back().bytes - samples.front().bytes : 0;
  const double needed = options_.min_rising_fraction * static_cast<double>(samples.size() - 1);
  leaking = leaking && static_cast<double>(rising) >= needed && growth >= options_.min_growth_bytes;
  if (!leaking) {
    alerts_.erase(key);
    return;
  }
  const std::int64_t steps = std::max<std::int64_t>(1, samples.back().step - samples.front().step);
  LeakAlert alert;
  alert.rank = std::get<0>(key);
  alert.pool = std::get<1>(key);
  alert.tag = std::get<2>(key);
  // growth may be anything up to UINT64_MAX (worker-supplied): divide first, then clamp into int64.
  alert.bytes_per_step = static_cast<std::int64_t>(std::min<std::uint64_t>(
      growth / static_cast<std::uint64_t>(steps), std::numeric_limits<std::int64_t>::max()));
  alert.first_step = samples.front().step;
  alert.last_step = samples.back().step;
  alert.live_bytes = samples.back().bytes;
  alerts_[key] = alert;
}

void LeakWatch::forget(int rank) {
  std::lock_guard lock(mu_);
  std::erase_if(series_, [rank](const auto& kv) { return std::get<0>(kv.first) == rank; });
  std::erase_if(alerts_, [rank](const auto& kv) { return std::get<0>(kv.first) == rank; });
}

std::vector<LeakAlert> LeakWatch::alerts() const {
  std::lock_guard lock(mu_);
  std::vector<LeakAlert> out;
  for (const auto& [key, alert] : alerts_) out.push_back(alert);
  return out;
}

}  // namespace memcoord::coordinator
