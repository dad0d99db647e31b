// PointerMap: address -> Block* for the pool's live blocks, an AddressTable (address_table.h): lookups on the
// free path cost one or two cache lines and no allocation. Keys are never 0. Not thread-safe (the pool's
// mutex guards it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "allocator/detail/address_table.h"
#include "allocator/detail/block.h"

namespace memcoord::detail {

class PointerMap {
 public:
  std::size_t size() const { return table_.size(); }

  void insert(std::uintptr_t key, Block* value) { table_.insert(key, value); }

  Block* find(std::uintptr_t key) const {
    Block* const* value = table_.find(key);
    return value != nullptr ? *value : nullptr;
  }

  // Returns the removed value, or nullptr when the key is absent.
  Block* erase(std::uintptr_t key) {
    Block* value = nullptr;
    return table_.erase(key, value) ? value : nullptr;
  }

  template <typename F>
  void for_each(F&& f) const {
    table_.for_each(std::forward<F>(f));
  }

 private:
  AddressTable<Block*, 1024> table_;
};

}  // namespace memcoord::detail
