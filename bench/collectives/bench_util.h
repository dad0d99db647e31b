// Shared pieces of the collectives benchmarks: sizes, timing across ranks, bus bandwidth (nccl-tests'
// definition: algbw = bytes / time, busbw = algbw * 2(n-1)/n for allreduce).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memcoord::bench {

inline std::vector<std::size_t> Sizes(std::size_t min_bytes, std::size_t max_bytes, std::size_t factor) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = min_bytes; s <= max_bytes; s *= factor) sizes.push_back(s);
  return sizes;
}

// Iterations for a size: many for small messages, a few for large ones.
inline int Iterations(std::size_t bytes) {
  const std::size_t budget = std::size_t{512} << 20;  // bytes moved per measurement, roughly
  const std::size_t n = budget / bytes;
  return static_cast<int>(n < 3 ? 3 : (n > 2000 ? 2000 : n));
}

inline double BusFactor(int ranks) { return ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0; }

// The bucketer benches' model: fp32 parameters of mixed sizes (2 MiB+4, 512 KiB, 3 MiB, 64 KiB, 1 MiB+12,
// 8 MiB, repeated) totalling `total_bytes` (rounded down to whole floats); returns each parameter's bytes.
inline std::vector<std::size_t> MixedParameterBytes(std::size_t total_bytes) {
  const std::size_t pattern[] = {(2u << 20) + 4, 512u << 10, 3u << 20, 64u << 10, (1u << 20) + 12, 8u << 20};
  std::vector<std::size_t> sizes;
  std::size_t total = 0;
  for (std::size_t i = 0; total < total_bytes; ++i) {
    const std::size_t bytes = std::min(pattern[i % 6], total_bytes - total) / 4 * 4;
    if (bytes == 0) break;
    sizes.push_back(bytes);
    total += bytes;
  }
  return sizes;
}

inline double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace memcoord::bench
