// LiveTable: address -> what a ThreadCacheAdaptor knows of a live block it handed out (size, bytes asked,
// stream, tag, whether another stream was recorded on it). Open addressing with linear probing and
// backward-shift deletion, like PointerMap: a lookup costs one or two cache lines and no allocation; the
// table doubles when half full. Keys are never 0 (it marks an empty slot; callers check). Not thread-safe
// (each thread cache slot's lock guards its table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allocator/memory_resource.h"

namespace memcoord::detail {

struct LiveBlock {
  std::size_t size = 0;       // rounded, as handed out
  std::size_t requested = 0;  // bytes asked
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
  bool recorded = false;  // record_stream named another stream: its reuse needs a device-side wait
};

class LiveTable {
 public:
  LiveTable() : slots_(64) {}

  std::size_t size() const { return size_; }

  // REQUIRES: `key` is not in the table.
  void insert(std::uintptr_t key, const LiveBlock& value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t i = index(key);
    while (slots_[i].key != 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = {key, value};
    ++size_;
  }

  LiveBlock* find(std::uintptr_t key) {
    std::size_t i = index(key);
    while (slots_[i].key != 0) {
      if (slots_[i].key == key) return &slots_[i].value;
      i = (i + 1) & (slots_.size() - 1);
    }
    return nullptr;
  }

  // Moves the entry of `key` into `out`; false when absent.
  bool erase(std::uintptr_t key, LiveBlock& out) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = index(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return false;
      i = (i + 1) & mask;
    }
    out = slots_[i].value;
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

 private:
  struct Slot {
    std::uintptr_t key = 0;
    LiveBlock value;
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
