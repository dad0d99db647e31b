// AddressTable<Value, kInitialSlots>: block address -> Value, open addressing with linear probing and
// backward-shift deletion, so a lookup costs one or two cache lines, never allocates, and needs no
// tombstones. The table doubles when half full. Keys are never 0 (0 marks an empty slot; callers check).
// Blocks are 512-aligned, so the hash drops the constant low bits before a Fibonacci multiply. Not
// thread-safe (the owner's lock guards it). Used by PointerMap (the pool's live blocks) and BlockTable (a
// thread cache's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace memcoord::detail {

template <typename Value, std::size_t kInitialSlots>
class AddressTable {
  static_assert((kInitialSlots & (kInitialSlots - 1)) == 0 && kInitialSlots >= 2, "a power of two");

 public:
  AddressTable() : slots_(kInitialSlots) {}

  std::size_t size() const { return size_; }

  // REQUIRES: `key` is not in the table.
  void insert(std::uintptr_t key, const Value& value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t i = index(key);
    while (slots_[i].key != 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = {key, value};
    ++size_;
  }

  Value* find(std::uintptr_t key) { return const_cast<Value*>(std::as_const(*this).find(key)); }
  const Value* find(std::uintptr_t key) const {
    std::size_t i = index(key);
    while (slots_[i].key != 0) {
      if (slots_[i].key == key) return &slots_[i].value;
      i = (i + 1) & (slots_.size() - 1);
    }
    return nullptr;
  }

  // Moves the entry of `key` into `out`; false (and `out` untouched) when absent.
  bool erase(std::uintptr_t key, Value& out) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = index(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return false;
      i = (i + 1) & mask;
    }
    out = slots_[i].value;
    // Backward-shift: move later entries of the probe run into the gap so lookups never need tombstones.
    std::size_t gap = i;
    std::size_t j = (i + 1) & mask;
    while (slots_[j].key != 0) {
      const std::size_t home = index(slots_[j].key);
      if (((j - home) & mask) >= ((j - gap) & mask)) {
        slots_[gap] = slots_[j];
        gap = j;
      }
      j = (j + 1) & mask;
    }
    slots_[gap] = {};
    --size_;
    return true;
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
    Value value{};
  };

  std::size_t index(std::uintptr_t key) const {
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
