// Counter and Gauge: figures written by one thread at a time (under the lock that serializes a pool's
// stack) and read by anyone without it. Relaxed atomics: a load or a store costs a plain move, so keeping
// them on the hot path is free; a reader sees each figure exact at some instant.
#pragma once

#include <atomic>
#include <cstdint>

namespace memcoord::detail {

struct Counter {
  std::atomic<std::uint64_t> value{0};
  std::uint64_t load() const { return value.load(std::memory_order_relaxed); }
  void store(std::uint64_t v) { value.store(v, std::memory_order_relaxed); }
  void add(std::uint64_t d) { store(load() + d); }
  void sub(std::uint64_t d) { store(load() - d); }
};

// Current and peak of one quantity.
struct Gauge {
  Counter current;
  Counter peak;
  void add(std::uint64_t d) {
    current.add(d);
    if (current.load() > peak.load()) peak.store(current.load());
  }
  void sub(std::uint64_t d) { current.sub(d); }
  void reset_peak() { peak.store(current.load()); }
};

}  // namespace memcoord::detail
