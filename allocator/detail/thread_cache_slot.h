// ThreadCacheSlot: one thread's share of a ThreadCacheAdaptor: the free blocks it keeps for that thread and
// the table of the blocks handed out through it. Two guards:
//   - `gate` (OwnerGate): the owning thread's cache hits and its frees into its own cache run inside it, and
//     the gate itself costs no atomic read-modify-write (see owner_gate.h). They touch the cache, the
//     counters, and entries' state in the table, never the table's shape.
//   - `mu` (SpinLock): everything else. Another thread freeing or recording one of this slot's blocks looks
//     it up under `mu`; the owner takes `mu` to change the table's shape (a block from the pool, a block
//     going back to it) and whenever the gate is closed. A thread that needs the cache or the counters
//     (a flush, the adaptor's destruction, an invariant check) takes `mu` and then excludes the owner.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "allocator/detail/block_table.h"
#include "allocator/detail/counter.h"
#include "allocator/detail/owner_gate.h"
#include "allocator/memory_resource.h"

namespace memcoord {
class ThreadCacheAdaptor;
}

namespace memcoord::detail {

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0; held_.exchange(true, std::memory_order_acquire); ++spins) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();  // the holder may be descheduled (oversubscribed)
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// A free block kept by a thread: reused only for a request of exactly `requested` bytes on `stream`, so the
// figures the layers below counted for it (allocated, requested) stay true when it is handed out again.
struct CachedBlock {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
  std::uint32_t seq = 0;  // when it was cached (ThreadCacheSlot::next_seq): the oldest goes first
};

constexpr std::size_t kMaxCachedBlocks = 16;
// A floor is raised at the end of each window of changes to its cache, to the least the cache held in it.
// The first window of a slot just claimed or flushed is kFirstFloorWindow changes long, and each window is
// twice the last up to kFloorWindow: a cache filling from empty has its floor follow within a few dozen
// changes (while it lags, every other thread's peak check reads that cache as held, and sums: with one window
// of 1,024 changes, capi_bench's four fresh threads a run made 970-1,560 sums a run of 800,000 pairs on an
// H100, against 35-165 since), and a steady loop's floor stops moving, as one move is a read-modify-write on
// a line every thread's check reads.
constexpr std::uint32_t kFirstFloorWindow = 16;
constexpr std::uint32_t kFloorWindow = 1024;

// What other threads' misses saw of one slot's activity: how many looks in a row found it unchanged.
struct IdleWatch {
  std::atomic<std::uint64_t> seen_activity{0};
  std::atomic<std::uint32_t> unchanged_looks{0};

  // One look at `activity`; true (and the count starts again) at the `looks`-th look in a row that found it
  // unchanged.
  bool idle_after(std::uint64_t activity, std::uint32_t looks) {
    if (seen_activity.load(std::memory_order_relaxed) != activity) {
      seen_activity.store(activity, std::memory_order_relaxed);
      unchanged_looks.store(0, std::memory_order_relaxed);
      return false;
    }
    const std::uint32_t n = unchanged_looks.load(std::memory_order_relaxed) + 1;
    unchanged_looks.store(n < looks ? n : 0, std::memory_order_relaxed);
    return n >= looks;
  }
};

// 128 bytes, not 64: Intel's L2 prefetches lines in adjacent pairs, so a neighbour's last line (its window
// counters, written on every call) would otherwise contend with this slot's first (the lock and the gate).
struct alignas(128) ThreadCacheSlot {
  SpinLock mu;
  OwnerGate gate;
  // Under mu; nullptr once the adaptor is destroyed (threads may outlive it).
  ThreadCacheAdaptor* layer = nullptr;
  // The owner's, inside the gate or under mu (others: under mu with the owner excluded).
  std::array<CachedBlock, kMaxCachedBlocks> cached;  // in no order (a hit moves the last into its place)
  std::uint32_t next_seq = 0;                        // wraps; ages compare as next_seq - seq
  std::size_t cached_count = 0;
  std::size_t entry_bytes = 0;  // bytes in `cached` (the counters also hold blocks on their way out)
  BlockTable table;             // every block handed out through this slot and not yet back in the pool
  // Under mu: entries other threads marked freed, for the owner to drop.
  std::vector<std::uintptr_t> freed_elsewhere;
  // Written by the owner (or an intruder); read by anyone (stats, peak checks) without a guard.
  Counter cached_bytes, cached_requested, cached_blocks, hits;
  Counter hit_bytes;  // rounded sizes of the hits, in all
  // Floors: cached_bytes (cached_requested) never drops below floor_bytes (floor_requested) without the
  // floor being lowered first, and a floor is raised only to the least its figure was over the window of
  // changes that just ended (kFirstFloorWindow doubling to kFloorWindow), so in a steady loop it stops
  // moving. The adaptor keeps the sum of all floors: one load bounds what every other thread caches
  // (ThreadCacheAdaptor::check_peaks).
  Counter floor_bytes, floor_requested;
  std::array<Counter, kMaxTags> cached_tag_bytes, cached_tag_blocks;  // [kUntagged] unused
  std::uint64_t window_min_bytes = 0, window_min_requested = 0;       // as `cached`
  std::uint32_t window_changes = 0;                                   // as `cached`
  std::uint32_t window_length = kFirstFloorWindow;                    // as `cached`
  // Blocks the owner took from the pool (its misses); with `hits`, its allocations, which other threads'
  // misses watch (IdleWatch). Written by the owner only.
  Counter from_pool;
  // Exact sums of every slot's cache this slot's allocations made (ThreadCacheAdaptor::check_peaks;
  // PoolStats::peak_sums): an atomic add, as the slot of threads beyond kMaxSlots is shared.
  Counter peak_sums;
  // Frees this slot's threads made of blocks another slot handed out (PoolStats::other_thread_frees): the
  // slow path's, an atomic add as above.
  Counter other_thread_frees;
  std::size_t sweep_cursor = 0;  // the owner's: the last slot its misses looked at
  // The owner's: the driver-free path looked for this request (`looked`) and found `pending_flush` idle (or
  // nullptr), for the full path that follows its decline.
  ThreadCacheSlot* pending_flush = nullptr;
  bool looked = false;
  std::atomic<bool> owned{false};  // bound to a running thread (claimed under the adaptor's slots_mu_)
  bool shared = false;             // the slot of threads beyond kMaxSlots: never owned, caches nothing
  // Written by other threads' misses, without a lock (relaxed: two misses looking at once may count one
  // look, which only delays a sweep): on its own line, so the owner's calls never contend with them.
  alignas(128) IdleWatch idle;
};

}  // namespace memcoord::detail
