// Counter-based random numbers shared by the host and CUDA code paths: value i of stream `seed` is a pure
// function of (seed, i), so every rank (and every device) generating the same stream gets the same numbers
// without sharing state, and data for step s on rank r is reproducible. Thread-safe (no state).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MEMCOORD_HD __host__ __device__ inline
#else
#define MEMCOORD_HD inline
#endif

namespace memcoord::train {

MEMCOORD_HD std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1).
MEMCOORD_HD float UniformAt(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t bits = SplitMix64(seed * 0xD1B54A32D192ED03ull + index) >> 40;  // 24 bits
  return static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
}

// A stream id from a few small integers (model, rank, step, purpose).
MEMCOORD_HD std::uint64_t StreamSeed(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  return SplitMix64(SplitMix64(SplitMix64(a) ^ b) ^ c) ^ d;
}

}  // namespace memcoord::train
