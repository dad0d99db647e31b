// The mixed allocation pattern of ../shared/data/README.md, generated once so that every allocator under test
// replays exactly the same sequence: 200,000 operations from std::mt19937_64(42); while fewer than 1,000
// blocks are live a fair coin picks alloc or free (alloc when nothing is live, free when 1,000 are); a free
// picks a uniformly random live block; an alloc asks (2^k + r) & ~255 bytes, k uniform in 8..26, r uniform in
// [0, 2^k).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace memcoord::bench {

struct MixedOp {
  std::size_t bytes = 0;  // > 0: allocate this many; 0: free
  std::size_t slot = 0;   // free: index into the live list (the runner swaps the last entry into it)
};

inline std::vector<MixedOp> MakeMixedPattern(std::size_t operations, std::uint64_t seed = 42,
                                             std::size_t max_live = 1000) {
  std::mt19937_64 rng(seed);
  std::vector<MixedOp> ops;
  ops.reserve(operations);
  std::size_t live = 0;
  for (std::size_t i = 0; i < operations; ++i) {
    const bool coin_alloc = (rng() & 1) != 0;
    const bool alloc = live == 0 || (live < max_live && coin_alloc);
    if (alloc) {
      const int k = std::uniform_int_distribution<int>(8, 26)(rng);
      const std::uint64_t r = std::uniform_int_distribution<std::uint64_t>(0, (1ULL << k) - 1)(rng);
      ops.push_back({static_cast<std::size_t>(((1ULL << k) + r) & ~std::uint64_t{255}), 0});
      ++live;
    } else {
      ops.push_back({0, std::uniform_int_distribution<std::size_t>(0, live - 1)(rng)});
      --live;
    }
  }
  return ops;
}

// Replays `ops` through alloc(bytes) -> void* (nullptr: failure) and free(void*). Returns false on the first
// failed allocation. Blocks still live at the end stay in `live` for the caller to free (outside any timing).
template <typename Alloc, typename Free>
bool ReplayMixedPattern(const std::vector<MixedOp>& ops, std::vector<void*>& live, Alloc&& alloc,
                        Free&& free) {
  live.clear();
  for (const MixedOp& op : ops) {
    if (op.bytes != 0) {
      void* ptr = alloc(op.bytes);
      if (ptr == nullptr) return false;
      live.push_back(ptr);
    } else {
      void* ptr = live[op.slot];
      live[op.slot] = live.back();
      live.pop_back();
      free(ptr);
    }
  }
  return true;
}

}  // namespace memcoord::bench
