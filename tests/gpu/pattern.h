// The byte pattern GPU tests write and check: byte i of a block filled with `seed` is a hash of (i / 4,
// seed), so every byte differs between seeds and offsets, overlapping blocks and stale data show up, and
// zeros (fresh memory) never pass. Shared by host code (pinned-memory checks) and the kernels in
// test_kernels.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define MEMCOORD_HOST_DEVICE __host__ __device__
#else
#define MEMCOORD_HOST_DEVICE
#endif

namespace memcoord::gpu_test {

MEMCOORD_HOST_DEVICE inline std::uint32_t PatternWord(std::uint64_t word_index, std::uint32_t seed) {
  std::uint32_t x = static_cast<std::uint32_t>(word_index) * 0x9E3779B1u ^ seed ^
                    static_cast<std::uint32_t>(word_index >> 32) * 0x85EBCA77u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x == 0 ? 0xA5A5A5A5u : x;
}

MEMCOORD_HOST_DEVICE inline std::uint8_t PatternByte(std::uint64_t byte_index, std::uint32_t seed) {
  return static_cast<std::uint8_t>(PatternWord(byte_index / 4, seed) >> (8 * (byte_index % 4)));
}

}  // namespace memcoord::gpu_test
