// PointerMap: address -> Block* for live blocks, open addressing with linear probing and backward-shift
// deletion, so lookups on the free path cost one or two cache lines and no allocation. Keys are never 0.
// Not thread-safe (the pool's mutex guards it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allocator/detail/block.h"

namespace memcoord::detail {

class PointerMap {
 public:
  PointerMap() : slots_(1024) {}

  std::size_t size() const { return size_; }

  void insert(std::uintptr_t key, Block* value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t i = index(key);
    while (slots_[i].key != 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = {key, value};
    ++size_;
  }

  Block* find(std::uintptr_t key) const {
    std::size_t i = index(key);
    while (slots_[i].key != 0) {
      if (slots_[i].key == key) return slots_[i].value;
      i = (i + 1) & (slots_.size() - 1);
    }
    return nullptr;
  }

  // Returns the removed value, or nullptr when the key is absent.
  Block* erase(std::uintptr_t key) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = index(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return nullptr;
      i = (i + 1) & mask;
    }
    Block* value = slots_[i].value;
    // Backward-shift: move later entries of the probe run into the gap so lookups never need tombstones.
    std::size_t gap = i;
    std::size_t j = (i + 1) & mask;
    while (slots_[j].key != 0) {
      const std::size_t home = index(slots_[j].key);
      const bool movable = ((j - home) & mask) >= ((j - gap) & mask);
      if (movable) {
        slots_[gap] = slots_[j];
        gap = j;
      }
      j = (j + 1) & mask;
    }
    slots_[gap] = {};
    --size_;
    return value;
  }

  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.key != 0) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    std::uintptr_t key = 0;
    Block* value = nullptr;
  };

  std::size_t index(std::uintptr_t key) const {
    // Blocks are 512-aligned: drop the constant low bits, then a Fibonacci hash spreads the rest.
    return static_cast<std::size_t>(((key >> 9) * 0x9E3779B97F4A7C15ULL) >> 20) & (slots_.size() - 1);
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace memcoord::detail
