// ThreadCacheAdaptor: a small cache of free blocks per thread in front of `upstream` (CachingPool puts it
// over its ThreadSafeAdaptor), so a thread that frees and allocates the same sizes on the same stream takes
// no shared lock and touches no cache line another thread writes: threads scale instead of queueing on the
// pool's mutex. What it keeps: blocks of at most max_block_bytes that the thread frees itself, having
// allocated them (a block freed by another thread goes back to the pool), and that no other stream was
// recorded on; reused only for a request of exactly the same bytes, stream and tag (stream order makes that
// safe, as in the pool itself), at most kMaxCachedBlocks blocks and max_bytes per thread (the oldest go back
// to the pool first). A cached block stays live in the layers below; to users it is free.
//
// Contracts kept (memory_resource.h, CachingPool):
//   - Figures: a cached block is NOT allocated. adjust_stats() turns the figures counted below into the
//     users' view (allocated, requested, active, live blocks, allocations, cache hits, peaks); each is exact
//     at the instant read when no call runs concurrently (while a cache is being returned, figures read low
//     for that instant, never high). Peaks are tracked here: after every allocation a thread bounds what
//     users hold (live below, minus its own cache, minus the other threads' cache floors, see
//     thread_cache_slot.h) and only when the bound passes the peak sums every thread's cache exactly; so a
//     peak is exact whenever allocations do not overlap in time, and under overlapping ones it is that of
//     one order they could have run in, give or take blocks concurrently moving in or out of a cache. The
//     peak of live blocks is bounded the same way but never summed (no slot keeps a floor of blocks, so the
//     bound would pass the peak at every allocation of several threads): the bound itself is the peak, the
//     other threads' cached blocks taken as their byte floors over the largest block kept. Exact while one
//     thread caches; with several, high by at most the blocks the others cache beyond that (kMaxCachedBlocks
//     each), never low. Every peak is at least its current figure.
//   - Trims release everything: flush() returns every thread's cache to the pool; trim() flushes first. A
//     failed allocation (RESOURCE_EXHAUSTED) flushes and retries once, so an out-of-memory never leaves
//     memory in a cache.
//   - deallocate/record_stream/block_size know exactly the blocks handed out through this layer: a table per
//     thread slot of the blocks it handed out, live or cached (a free on another thread finds the block in
//     its allocator's slot).
//     Unknown or already-freed pointers are NOT_FOUND here (null: INVALID_ARGUMENT) and never reach the
//     pool below.
// Cost: a hit, and a free of the thread's own block into its cache, take no lock: they run inside the slot's
// OwnerGate (plain stores and loads on lines that thread holds; no CPU fence where the kernel offers
// membarrier) and look the block up in the slot's table. In a steady loop they make no atomic
// read-modify-write either; a hit that sets a new peak, and a cache floor that moves (see
// thread_cache_slot.h), make one on a shared figure. An allocation whose cheap bound passes a peak sums every
// slot's cache counters (one pass for both byte figures), a cache miss for each slot whose owner is busy:
// PoolStats::peak_sums counts those passes, which other threads' caches above their floors make frequent. A
// block the layer does not keep (larger than max_block_bytes, or recorded), a block from the pool and a full
// cache take the slot's lock as well as the pool's path, and one atomic add to the count of blocks below. A
// free of another thread's block takes the slots' locks in turn until it finds the owner's, and leaves its
// table entry for that thread to drop (PoolStats::other_thread_frees counts those frees). A flush (trim,
// empty_cache, an out-of-memory retry, and with ThreadCacheLimits::fence_small_growth each growth of the
// pool's small-block arena for a size this layer caches) costs one membarrier() per other thread's slot that
// caches something (the calling thread's own needs none). An idle thread's cache
// (ThreadCacheLimits::idle_misses) goes back the same way, one membarrier() per idle spell of that thread; a
// miss looks at no more than kSweepLooks slots (three relaxed loads each, a few more and a store or two on
// the slot's watch line). try_allocate_cached then declines (nothing else changes) and the try_allocate the
// caller makes next flushes. Lock order: a slot's lock, then the pool's (evictions, flushes, a thread's exit
// and the destructor return blocks under the slot's lock); never a slot's lock under the pool's. Thread
// safety: every call is thread-safe. Each thread claims a slot; beyond kMaxSlots threads share one slot that
// caches nothing and always takes its lock. A thread's cache goes back to the pool when the thread exits
// (through a pthread key, so also when its first call came from a key destructor at its exit). Freeing one
// pointer twice at the same instant from two threads is not detected (one of the two frees may be lost or the
// block cached twice); a double free in any other order is NOT_FOUND. Ownership: does not own `upstream` or
// the live figures it reads, which must outlive it. Destroying it returns every cached block to `upstream`;
// threads may outlive it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "allocator/detail/counter.h"
#include "allocator/detail/thread_cache_slot.h"
#include "allocator/memory_resource.h"
#include "allocator/pool_stats.h"
#include "allocator/tag_registry.h"

namespace memcoord {

struct ThreadCacheLimits {
  std::size_t max_bytes = 2 << 20;        // per thread; 0 caches nothing (blocks are still tracked)
  std::size_t max_block_bytes = 1 << 20;  // larger blocks always go back to the pool
  // Before the pool below grows its small-block arena for a request this layer could have cached, every
  // thread's cache goes back to the pool and the request is asked again (detail/small_growth_fence.h): when
  // the pool then maps, the blocks that were idle in the caches were there for it to use (another thread may
  // cache a block again in between).
  bool fence_small_growth = false;
  // An idle thread's cache goes back to the pool: each request that misses a thread's cache looks at up to
  // kSweepLooks slots (round robin), and the first that caches something and whose owner made no allocation
  // across this many such looks in a row (by any threads) is flushed before the request goes to the pool. The
  // training loop's thread then does not keep blocks through a backward pass that autograd's thread runs (nor
  // autograd's through the next forward), blocks the other thread's requests would otherwise split other free
  // blocks for. try_allocate_cached never flushes (a flush may reach the driver): it declines, and the
  // try_allocate that follows flushes. 0: never.
  std::uint32_t idle_misses = 0;
};

// The live figures the layers below count (a StatsAdaptor's), read without a lock.
struct LiveFigures {
  const detail::Counter* allocated_bytes = nullptr;
  const detail::Counter* requested_bytes = nullptr;
};

class ThreadCacheAdaptor final : public DirectHooks<ThreadCacheAdaptor, ResourceAdaptor<>> {
 public:
  static constexpr std::size_t kMaxSlots = 256;
  static constexpr std::size_t kSweepLooks = 4;  // slots a miss looks at (round robin), so a miss costs O(1)

  // `owner` names the pool in errors ("pool 'x'").
  ThreadCacheAdaptor(MemoryResource& upstream, LiveFigures below, ThreadCacheLimits limits,
                     std::string owner);
  ~ThreadCacheAdaptor() override;

  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error);
  bool try_deallocate(void* ptr, Allocation& freed, Status& error);
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out);
  // A free into this thread's own cache, taken only inside the slot's gate: `ptr` is live in this thread's
  // slot, kept, there is room, and `stream` is the block's own or kDefaultStream. False: nothing changed.
  bool try_free_cached(void* ptr, StreamId stream);

  // Returns every thread's cached blocks to `upstream`.
  void flush();
  // Off: no block is kept (every free goes to `upstream`), and what is cached is flushed. For a recorder
  // that must see every allocation and free.
  void set_caching(bool on);
  // Turns figures filled from the layers below into the users' view (see the header).
  void adjust_stats(PoolStats& s) const;
  // Peaks become the current figures (with the layers below reset in the same instant by the caller).
  void reset_peaks();
  std::uint64_t cached_bytes() const;
  std::uint64_t cached_blocks() const;
  // Bytes and blocks cached per tag (untagged left at 0: the totals above cover it).
  void cached_by_tag(TagFigures& out) const;
  // Size of a live block handed out through this layer, NOT_FOUND otherwise (a cached block is not live).
  Result<std::size_t> block_size(const void* ptr);
  // Every slot's cache agrees with its counters, and live + cached blocks == `below_live_blocks` (the
  // blocks live in the layers below) == the blocks this layer counts for the peak of live blocks.
  Status check_invariants(std::uint64_t below_live_blocks);

 private:
  using Slot = detail::ThreadCacheSlot;
  friend struct ThreadCacheBindings;

  Status do_record_stream(void* ptr, StreamId stream) override;
  TrimResult do_trim(std::uint64_t target_bytes) override;

  void flush_slots(bool skip_empty);
  // REQUIRES: slot.mu not held by this thread. Returns `slot`'s cache to upstream, the owner excluded (but
  // for by_owner: the caller owns `slot`, and no exclusion is needed).
  void flush_slot(Slot& slot, bool by_owner);
  const Slot* own_slot() const;
  // Idle sweeps (ThreadCacheLimits::idle_misses), at a request of `own`'s thread that missed its cache: one
  // look at each of up to kSweepLooks slots, round robin; the first slot found idle, or nullptr.
  Slot* find_idle(Slot& own);
  // The full path's: flushes the slot the driver-free path found idle for this request (Slot::pending_flush,
  // when it looked: Slot::looked), else looks and flushes the one it finds.
  void flush_idle(Slot& own);
  // Whether `own`'s thread looks for idle slots: not from the shared slot, whose threads would race on the
  // owner's fields (its threads cache nothing; the other threads' misses still look).
  bool sweeps(const Slot& own) const { return limits_.idle_misses != 0 && !own.shared; }
  // From upstream, for a request no cache held: under a SmallGrowthFence when limits_.fence_small_growth
  // (a refusal returns every cache to the pool, then asks again), and once more after a flush when upstream
  // ran out of memory while caches held blocks.
  bool allocate_upstream(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error);
  Slot& my_slot();
  Slot& bind_slot();
  // A cached block for exactly (bytes, stream, tag), made live in `slot`; false when none.
  bool take_cached(Slot& slot, std::size_t bytes, StreamId stream, TagId tag, Allocation& out);
  bool take_cached_owned(Slot& slot, std::size_t bytes, StreamId stream, TagId tag, Allocation& out);
  // A block from upstream becomes live in `slot`'s table.
  void track(Slot& slot, const Allocation& a);
  void drop_freed_elsewhere(Slot& slot);
  bool free_into_own_cache(Slot& own, std::uintptr_t key, StreamId stream, Allocation& freed);
  bool deallocate_locked(Slot& own, std::uintptr_t key, Allocation& freed, Status& error);
  // Marks `key` freed in the table of a slot other than `own` that holds it live; false when none does.
  bool take_live(Slot& own, std::uintptr_t key, detail::BlockEntry& block);
  bool keeps(const Slot& slot, const detail::BlockEntry& block) const;
  bool has_room(const Slot& slot, std::size_t size) const;
  void make_room_locked(Slot& slot, std::size_t size);
  void return_to_pool_locked(Slot& slot, const detail::CachedBlock* blocks, std::size_t count);
  // REQUIRES: slot.mu held and the owner excluded (or the caller the owner). Empties the slot's cache into
  // `out` and drops those blocks from its table (counters untouched); returns how many.
  static std::size_t take_all_locked(Slot& slot, detail::CachedBlock* out);
  Status check_slot_locked(const Slot& slot, std::size_t i, std::uint64_t& tracked) const;
  void check_peaks(Slot& slot);
  void count_cached(Slot& slot, const detail::CachedBlock& b, bool in);
  static void restart_floor_window(Slot& slot);
  void push_cached(Slot& slot, const detail::CachedBlock& b);
  // `below` (a figure of the layers below) minus what every slot caches of it.
  std::int64_t visible(std::uint64_t below, detail::Counter Slot::*cached) const;
  // The allocated and requested bytes users hold, both in one pass over the slots (check_peaks, reset_peaks).
  struct VisibleBytes {
    std::int64_t allocated = 0;
    std::int64_t requested = 0;
  };
  VisibleBytes visible_bytes() const;
  void release_slot(Slot& slot);  // a thread exits: its cache goes back, the slot may be claimed again
  Slot* slot_at(std::size_t i) const { return raw_[i].load(std::memory_order_acquire); }

  const std::uint64_t id_;  // unique per adaptor in the process (never reused): keys threads' bindings
  const LiveFigures below_;
  const ThreadCacheLimits limits_;
  const std::string owner_;
  std::atomic<bool> caching_{true};
  // Read by every allocation, written rarely (a new peak; a floor that moves): apart from the slots' lines.
  alignas(64) std::atomic<std::uint64_t> peak_allocated_{0};
  std::atomic<std::uint64_t> peak_requested_{0};
  std::atomic<std::uint64_t> peak_blocks_{0};        // live blocks (PoolStats::peak_live_blocks)
  std::atomic<std::uint64_t> floor_bytes_total_{0};  // the sum of every slot's floor_bytes
  std::atomic<std::uint64_t> floor_requested_total_{0};
  std::atomic<std::uint64_t> idle_flushes_{0};  // slots flush_idle flushed (PoolStats::idle_cache_flushes)
  // Blocks the layers below handed out through this one, live or cached here (what they count as live):
  // counted here because LiveFigures carries bytes only. Changed by misses and returns to the pool, which
  // take the pool's lock anyway, so on a line of its own, away from the figures every hit reads.
  alignas(64) std::atomic<std::uint64_t> upstream_blocks_{0};

  alignas(64) std::mutex slots_mu_;                     // guards claiming and creating slots
  std::array<std::shared_ptr<Slot>, kMaxSlots> slots_;  // [0] is shared by threads beyond kMaxSlots
  std::array<std::atomic<Slot*>, kMaxSlots> raw_{};     // the same, read without slots_mu_
  std::atomic<std::size_t> slot_count_{0};
};

}  // namespace memcoord
