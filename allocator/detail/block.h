// Block: one address range inside an arena segment, in one of three states. Blocks of a segment form a
// doubly linked list in address order that covers the segment exactly (no gaps, no overlaps).
//   kAllocated  handed out to a caller.
//   kFree       cached: backed by memory, listed in its arena's free index for its owner stream.
//   kHole       (mapping arenas only) unmapped address space; chunk-aligned at both ends.
// Invariants (checked by Arena::check_invariants in tests): no two adjacent kHole; no two adjacent kFree
// with the same owner stream; every chunk that overlaps a kAllocated or kFree block is mapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memcoord::detail {

enum class BlockState : std::uint8_t { kAllocated, kFree, kHole };

struct Block {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  Block* prev = nullptr;  // address-ordered neighbours in the same segment
  Block* next = nullptr;
  Block* bin_prev = nullptr;  // free-index bin list or hole list links
  Block* bin_next = nullptr;
  std::size_t requested = 0;    // allocated blocks: bytes the caller asked for
  std::uint64_t wait_mask = 0;  // streams (by pool index) whose queued work must precede any reuse
  std::uint32_t segment = 0;    // index of the segment holding the block
  // kFree: the owner stream's marker number that covers the block's last use (StreamMarks::stamp when it
  // was freed; the highest of merged blocks'); 0: never used since it was mapped.
  std::uint64_t free_stamp = 0;  // a StreamMarks MarkerNumber
  std::uint16_t bin = 0;         // free-index bin while kFree
  std::uint8_t stream = 0;       // owner stream's pool index
  std::uint8_t tag = 0;
  BlockState state = BlockState::kFree;

  std::uintptr_t end() const { return address + size; }
};

// Hands out Block objects without a malloc per block: blocks are recycled through a free list and
// allocated in slabs. Not thread-safe (the pool's mutex guards it).
class BlockSlab {
 public:
  BlockSlab() = default;
  BlockSlab(const BlockSlab&) = delete;
  BlockSlab& operator=(const BlockSlab&) = delete;
  ~BlockSlab() {
    for (Block* slab : slabs_) delete[] slab;
  }

  Block* make() {
    if (free_ == nullptr) refill();
    Block* b = free_;
    free_ = b->next;
    *b = Block{};
    return b;
  }
  void recycle(Block* b) {
    b->next = free_;
    free_ = b;
  }

 private:
  void refill() {
    constexpr std::size_t kSlabBlocks = 1024;
    Block* slab = new Block[kSlabBlocks];
    slabs_.push_back(slab);
    for (std::size_t i = 0; i < kSlabBlocks; ++i) recycle(&slab[i]);
  }

  Block* free_ = nullptr;
  std::vector<Block*> slabs_;
};

}  // namespace memcoord::detail
