// PoolSnapshot: every segment of a pool with the blocks that tile it, taken at one instant under the pool's
// lock (CachingPool::snapshot). For memory views (PyTorch's memory snapshot) and debugging; O(blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allocator/device_backend.h"

namespace memcoord {

struct BlockSnapshot {
  enum class State : std::uint8_t {
    kAllocated,  // live: handed out
    kFree,       // cached: backed by memory, reusable
    kUnmapped,   // (mapping pools) reserved address space with no memory behind it
  };
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;  // kAllocated: bytes asked for; else 0
  State state = State::kFree;
  StreamId stream = kDefaultStream;  // kAllocated: its stream; kFree: the stream whose cache holds it
  std::uint8_t tag = 0;              // kAllocated: its TagId
};

struct SegmentSnapshot {
  std::uintptr_t address = 0;
  std::size_t size = 0;               // the whole range (address space on mapping pools)
  std::uint64_t mapped_bytes = 0;     // bytes backed by memory (== size on segment pools)
  bool small = false;                 // the small-block arena's
  std::vector<BlockSnapshot> blocks;  // in address order, covering [address, address + size)
};

struct PoolSnapshot {
  std::vector<SegmentSnapshot> segments;  // small arena's first, then large, each in creation order
};

}  // namespace memcoord
