// BlockTable: address -> what a ThreadCacheAdaptor knows of a block it handed out (size, bytes asked,
// stream, tag, whether another stream was recorded on it) and where the block is now: live (a user holds
// it), cached (in its slot's cache) or freed elsewhere (another thread freed it to the pool; the entry waits
// for the slot's owner to drop it); an AddressTable (address_table.h).
// Thread safety: the table's shape (insert, erase, growth) changes only under its slot's lock, by the thread
// that owns the slot or by one that has excluded it (OwnerGate); the owner may look entries up and store
// `state` without the lock, and other threads read entries and change `state` and `recorded` under it.
// `state` and `recorded` are atomics for that; the other fields change only with the table's shape.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allocator/detail/address_table.h"
#include "allocator/memory_resource.h"

namespace memcoord::detail {

enum class EntryState : std::uint8_t { kLive, kCached, kFreedElsewhere };

// A relaxed atomic that AddressTable can copy when it moves entries (only ever under the slot's lock, so a
// copy never races with a store).
template <typename T>
class CopyableAtomic {
 public:
  CopyableAtomic(T v = T{}) : value_(v) {}  // NOLINT(google-explicit-constructor): used as a plain field
  CopyableAtomic(const CopyableAtomic& o) : value_(o.load()) {}
  CopyableAtomic& operator=(const CopyableAtomic& o) {
    store(o.load());
    return *this;
  }
  T load() const { return value_.load(std::memory_order_relaxed); }
  void store(T v) { value_.store(v, std::memory_order_relaxed); }
  bool exchange_if(T expected, T desired) {
    return value_.compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  }

 private:
  std::atomic<T> value_;
};

struct BlockEntry {
  std::size_t size = 0;       // rounded, as handed out
  std::size_t requested = 0;  // bytes asked
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
  CopyableAtomic<EntryState> state{EntryState::kLive};
  CopyableAtomic<bool> recorded{false};  // record_stream named another stream: reuse needs a device wait
};

using BlockTable = AddressTable<BlockEntry, 64>;

}  // namespace memcoord::detail
