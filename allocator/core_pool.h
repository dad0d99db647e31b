// CorePool: the caching core of a CachingPool, and the bottom of its MemoryResource stack. Carves blocks from
// memory its DeviceBackend provides and keeps freed blocks for reuse, so a cache hit never maps memory and
// never blocks the host (it may queue a device-side wait for another stream, or an owed marker). No limit,
// statistics of callers, tags, tracing or
// OOM hook here: those are adaptors (LimitAdaptor under it, the others above it).
//
// How memory grows. On a mapping backend each of two arenas (small blocks <= small_block_limit, large blocks
// above it, kept apart so long-lived small tensors do not pin large ranges) is a reserved address range
// backed by physical memory mapped on demand in units (one driver allocation each: single chunks in the small
// arena, up to PoolOptions::large_map_unit_bytes in the large one; a unit is unmapped only whole). On a miss
// the pool places the request where it needs the fewest new chunks and maps them. It packs (unmaps whole idle
// free units elsewhere in the cache and maps memory where the request goes, instead of growing) under
// pressure and, sparingly, at its own high-water mark: see RemapPolicy. Pressure is the device nearly full
// (device_info().free_bytes against device_reserve_bytes; a reading is reused for 50 ms per reserve it leaves
// to spare beyond the miss and the reserve, up to 1 s, see detail/device_free_reading.h) or a budget the
// backend enforces (DeviceBackend::bytes_over_budget, which a LimitAdaptor reports). On a segment backend it
// grows by whole segments, as PyTorch's native allocator does.
//
// Out of memory. Before a miss fails, a last-resort pass synchronizes the streams that hold cache and
// releases every whole free unit (chunk, segment) of both arenas, then tries once more: an allocation fails
// only once no whole free unit is left (free memory inside a unit a live block keeps stays mapped). While
// captures are underway (set_captures_underway) there is no such pass: the miss fails at once. Any growth
// failure (the backend's or a budget's) is then RESOURCE_EXHAUSTED carrying the cause's message
// (CachingPool adds the pool's context).
//
// Streams. A block freed on stream A is reused on A at once. Reuse on another stream B makes B wait on the
// device for A's queued work (an event), never the host. Blocks used on extra streams (record_stream) are
// held until those streams' work is done. At most 64 distinct streams per pool: an allocation on a 65th is
// INVALID_ARGUMENT; record_stream on one is kept aside for its block, whose free then synchronizes that
// stream (a host wait, where the first 64 cost none), so the block is never reused early.
//
// Thread safety: NOT thread-safe. Callers serialize every call (CachingPool wraps it in a ThreadSafeAdaptor);
// fill_stats(), reserved_bytes() and set_captures_underway() alone may be called from any thread at any time.
// Ownership: does not own its backend, which must outlive it; it must outlive every block it hands out.
// Destroying it synchronizes its streams and releases all its memory; live blocks are logged as leaked.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "allocator/detail/arena.h"
#include "allocator/detail/block.h"
#include "allocator/detail/counter.h"
#include "allocator/detail/device_free_reading.h"
#include "allocator/detail/pointer_map.h"
#include "allocator/memory_resource.h"
#include "allocator/pool_options.h"
#include "allocator/pool_snapshot.h"
#include "allocator/pool_stats.h"

namespace memcoord {

class CorePool final : public DirectHooks<CorePool, MemoryResource> {
 public:
  // options.limit_bytes is ignored: a limit is a LimitAdaptor under the pool.
  explicit CorePool(DeviceBackend& backend, PoolOptions options = {});
  ~CorePool() override;

  // Sizes allocate() accepts: 1 byte to 1 PiB (larger is absurd: a negative size cast). allocate() checks
  // it first; a composer may check it before taking its lock.
  static bool ValidSize(std::size_t bytes) { return bytes - 1 < kMaxBytes; }
  // INVALID_ARGUMENT naming `pool` and what is wrong with `bytes`; OK for a valid size.
  static Status CheckSize(std::string_view pool, std::size_t bytes);

  // allocate/deallocate without Result (memory_resource.h), called directly by the layer above.
  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error);
  bool try_deallocate(void* ptr, Allocation& freed, Status& error);
  // A cache hit that calls nothing outside the pool (memory_resource.h, try_allocate_cached): a free block
  // of `stream` itself with no other stream recorded on it. False on anything else, nothing changed, and
  // when a marker a large free deferred is due on `stream` (try_allocate then records it).
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out);

  // Fills the core's counters: reserved (and its peak), backend calls, cache hits, trims, maps_chunks.
  // Lock-free; fields may come from slightly different instants.
  void fill_stats(PoolStats& s) const;
  // CachingPool::set_captures_underway: while set, no stream or marker query, no marker and no unmapping
  // (misses grow; trims release nothing; a failed miss skips the last-resort pass). Any thread; read by the
  // serialized calls.
  void set_captures_underway(bool underway) { captures_underway_.store(underway, std::memory_order_release); }
  // Fills the figures of the cache (largest free block, fragmentation), computed from the free blocks now,
  // so exact at this instant: no allocation pays for them. REQUIRES: serialized with the other calls.
  void fill_cache_stats(PoolStats& s) const;
  std::uint64_t reserved_bytes() const { return reserved_.current.load(); }  // lock-free
  // Bytes of live blocks (rounded sizes). REQUIRES: serialized with the other calls.
  std::uint64_t allocated_bytes() const { return allocated_bytes_; }
  // Peak reserved becomes the current reserved. Packing's own high-water mark is unaffected.
  void reset_peak_reserved() { reserved_.reset_peak(); }

  // Size of the live block at ptr as handed out (rounded), NOT_FOUND otherwise.
  Result<std::size_t> block_size(const void* ptr) const;
  PoolSnapshot snapshot() const;
  // Walks every block and checks the invariants (blocks tile their segments, free blocks merged and indexed,
  // reserved == mapped bytes, allocated == live blocks). O(blocks); for tests.
  Status check_invariants() const;

  const PoolOptions& options() const { return options_; }
  DeviceBackend& backend() const { return backend_; }

 private:
  static constexpr std::uint64_t kMaxBytes = 1ULL << 50;

  Status do_record_stream(void* ptr, StreamId stream) override;
  TrimResult do_trim(std::uint64_t target_bytes) override;

  detail::ArenaConfig arena_config(bool small) const;
  detail::Arena& arena_of(const detail::Block* b);
  // The pool's index of `stream` if it has seen it, without adding it.
  bool known_stream_index(StreamId stream, std::uint8_t& index) const;
  // The pool's index of `stream` (added if new), or false with INVALID_ARGUMENT past kMaxStreams.
  bool stream_index_of(StreamId stream, std::uint8_t& index, Status& error);
  // At the free of the block at `key`: synchronizes the streams record_stream found no index for.
  void wait_for_unindexed_streams(std::uintptr_t key);
  // nullptr with RESOURCE_EXHAUSTED in `error` when even the last-resort pass found no room.
  // Marks `b` (just taken for a request of `bytes`) live and fills `out`.
  void hand_out(detail::Block* b, std::size_t bytes, StreamId stream, TagId tag, Allocation& out);
  detail::Block* take_or_grow(std::size_t bytes, std::size_t size, std::uint8_t stream, Status& error);
  Result<detail::Block*> grow(detail::Arena& arena, std::size_t size, std::uint8_t stream, bool last_resort);
  Result<detail::Block*> grow_segments(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                       bool last_resort);
  Result<detail::Block*> grow_mapping(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                      bool last_resort);
  void pack_for(detail::Arena& arena, const detail::Placement& placement, std::uint8_t stream);
  void widen_to_unit_end(detail::Arena& arena, detail::Placement& placement);
  // After a free of `bytes` on `stream` (PoolOptions::large_free_marker_interval_us).
  void mark_large_free(std::size_t bytes, std::uint8_t stream);
  // On every call on `stream`: the marker a large free deferred, once its interval has passed.
  void mark_if_uncovered(std::uint8_t stream);
  // Whether packing at the mark for the small arena (`to_small`) or the large one would take back what the
  // newest move between the arenas gave the other, at the same high-water mark (see the definition).
  bool trade_comes_back(bool to_small) const;
  // Whether mark_if_uncovered would record now.
  bool marker_due(std::uint8_t stream) const;
  // How old a stream's newest marker must be for another (growing: the interval; steady: ten times it).
  std::chrono::microseconds marker_interval(std::chrono::steady_clock::time_point now) const;
  // At the mark, a shortfall of at least this many units is packed by waiting for the miss's own marker.
  static constexpr std::uint64_t kDrainShortfallUnits = 4;
  std::uint64_t drain_for_large_shortfall(detail::Arena& arena, const detail::Placement& placement,
                                          std::uint64_t shortfall, std::uint8_t stream);
  std::uint64_t device_shortfall(std::uint64_t need);
  void release_everything_cached();
  std::uint64_t release_cached(detail::Arena& arena, std::uint64_t want, detail::ReleaseWait wait,
                               const detail::Block* keep_a, const detail::Block* keep_b,
                               std::uint8_t wait_stream = 0);
  void account_reserved_growth(std::uint64_t bytes);
  // Mirrors StreamMarks' count of recorded markers into markers_, which stats read without the lock.
  void count_markers();
  void sync_backend_counters();

  DeviceBackend& backend_;
  const PoolOptions options_;

  std::vector<StreamId> stream_ids_;  // pool stream index -> backend stream
  // Live blocks used on streams past kMaxStreams (record_stream), which their wait masks cannot name.
  std::unordered_map<std::uintptr_t, std::vector<StreamId>> unindexed_waits_;
  bool warned_unindexed_ = false;
  detail::BlockSlab slab_;
  detail::PointerMap live_;
  detail::StreamMarks marks_;  // before the arenas, which hold a pointer to it
  detail::DeviceFreeReading device_free_;
  detail::Arena small_;
  detail::Arena large_;
  std::uint64_t allocated_bytes_ = 0;
  std::uint64_t high_water_ = 0;  // most reserved bytes ever (mapping arenas grow freely below it)
  // A miss may grow the pool by this much beyond the high-water mark without packing (see pack_for).
  std::uint64_t headroom_ = 0;
  std::uint64_t moved_at_mark_ = 0;  // bytes packing has unmapped at the mark, without pressure, in all
  // The newest move of memory between the arenas at the mark (trade_comes_back); none before the first.
  struct Trade {
    bool to_small = false;
    std::uint64_t high_water = 0;  // high_water_ when it moved
  };
  std::optional<Trade> last_trade_;
  std::chrono::steady_clock::time_point last_miss_{};  // when the newest miss began
  std::atomic<bool> captures_underway_{false};
  bool trim_skip_logged_ = false;  // do_trim's note that a capture made it release nothing, once

  // Written by the serialized calls, read by fill_stats from anywhere.
  detail::Gauge reserved_;
  detail::Counter cache_hits_, backend_allocations_, backend_frees_, backend_allocated_bytes_,
      backend_released_bytes_, pack_waits_, pack_stream_syncs_, pack_drains_, pack_wait_ns_, markers_,
      deferred_markers_, misses_, miss_ns_, trims_, trimmed_bytes_;
};

}  // namespace memcoord
