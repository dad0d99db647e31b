// Arena: the blocks of one size class (small or large) of one CachingPool, and how they grow.
//   Mapping arenas own reserved address ranges (segments) whose chunks are mapped on demand. A miss is placed
//   where it needs the fewest new chunks (next to a free block of the same stream, inside a hole); free
//   whole chunks can be unmapped anywhere (unmap_free_chunks) so the pool can move memory to where it is
//   needed instead of growing.
//   Physical memory is mapped in units: one driver allocation per unit (a miss's units reach the backend in
//   one map_pieces call), at most map_unit_bytes and never across a multiple of it (a miss of more than
//   kMaxUnitsPerMiss units maps that many larger ones instead: map_units.h), and a unit is unmapped only
//   whole. Units cost the driver per unit, not per byte (40-85 us each on an H200 whatever their size),
//   so large arenas map coarse units; a free range that covers only part of a unit keeps that unit mapped.
//   Segment arenas grow by whole backend allocations and give back only whole free segments.
// Streams are small per-pool indices; `stream_ids` maps them to backend stream ids. Free blocks carry the
// stamp of the pool's StreamMarks (stream_marks.h) when given one, so a busy block's last use can be waited
// for by marker instead of by synchronizing its whole stream.
// Not thread-safe: the owning pool's mutex guards every call. Blocks come from the pool's BlockSlab.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "allocator/detail/block.h"
#include "allocator/detail/free_index.h"
#include "allocator/detail/stream_marks.h"
#include "allocator/device_backend.h"
#include "allocator/pool_snapshot.h"
#include "common/result.h"

namespace memcoord::detail {

struct ArenaConfig {
  bool mapping = true;
  std::size_t chunk_bytes = 2 << 20;  // mapping: the backend's chunk
  std::uint64_t range_bytes = 0;      // mapping: address space reserved per segment
  // mapping: the largest unit mapped by one backend call, a multiple of chunk_bytes (0: chunk_bytes), except
  // for misses of more than kMaxUnitsPerMiss units and merged end pieces (map_units.h). Units below it never
  // cross the segment's base plus a multiple of it: without merged ends, whole units fit in any free run of
  // twice its size between them.
  std::size_t map_unit_bytes = 0;
  bool merge_unit_ends = false;  // mapping: UnitPieces' merge_ends (PoolOptions::merge_unit_ends)
  // mapping: a miss that grows a free run upward maps on to the next multiple of grow_step_bytes (0:
  // map_unit_bytes) from the segment's base, within the hole (PoolOptions::grow_to_unit_end).
  bool grow_to_unit_end = false;
  std::size_t grow_step_bytes = 0;  // a multiple of chunk_bytes (PoolOptions::large_grow_step_bytes)
  bool small = false;               // segment sizing: small arenas grow by 2 MiB segments
};

// Where a mapping miss will go: `map_bytes` of new chunks at `map_address` inside `hole` (or a new
// segment when hole is null), joined with the free neighbours `left`/`right` that it will absorb.
struct Placement {
  Block* hole = nullptr;
  Block* left = nullptr;
  Block* right = nullptr;
  std::uintptr_t map_address = 0;
  std::size_t map_bytes = 0;
};

// What release_free_memory does with a free block whose streams still have queued work.
// The two packing modes release idle blocks first and wait only for what idle ones could not give.
enum class ReleaseWait {
  kIdleOnly,  // skips it
  // Packing under pressure: when the block's one user is the packing stream, waits for the block's marker,
  // or synchronizes the stream when no marker covers the block; else skips it.
  kWaitForStream,
  // Packing without pressure: as kWaitForStream, but only when a marker older than the stream's newest
  // covers the block, so that the GPU keeps the work queued after it; skips the rest (the pool grows instead
  // of draining the GPU's queue: the newest marker is the one the miss just recorded).
  kWaitForOlderMarker,
  kSettle,  // synchronizes the block's streams, after settle_streams (trim and OOM recovery)
};

inline bool IsPacking(ReleaseWait wait) {
  return wait == ReleaseWait::kWaitForStream || wait == ReleaseWait::kWaitForOlderMarker;
}

class Arena {
 public:
  // `marks` (may be null: stream queries only) must outlive the arena.
  Arena(DeviceBackend& backend, ArenaConfig config, BlockSlab& slab, const std::vector<StreamId>& stream_ids,
        StreamMarks* marks = nullptr);
  ~Arena();  // releases every segment; live blocks are the pool's to report
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Cache hit: a free block of the stream (or, after a device-side wait, of another stream), split to
  // `size` and marked allocated. Never maps or allocates. nullptr on a miss.
  Block* take_cached(std::size_t size, std::uint8_t stream);
  // The same hit, served only when it needs no backend call at all: a free block of `stream` itself that
  // no other stream was recorded on (no device-side wait). nullptr otherwise, and nothing changes.
  Block* take_cached_without_waits(std::size_t size, std::uint8_t stream);

  // Mapping arenas: plans where a miss of `size` goes (reserving a new segment if no hole can take it).
  Result<Placement> plan(std::size_t size, std::uint8_t stream);
  // With ArenaConfig::grow_to_unit_end: a placement that maps upward from its hole's start (the request's
  // free run, if any, below it; a new segment's too) ends at the next multiple of the grow step
  // (ArenaConfig::grow_step_bytes, else the unit) from the segment's base, or at the hole's end. The slack
  // above the request is free memory the next requests take without a miss. Otherwise, or for any other
  // placement, nothing changes.
  void extend_to_unit_end(Placement& p) const;
  // Maps the placement's chunks and allocates `size` there. On failure nothing changes.
  Result<Block*> map_and_take(const Placement& placement, std::size_t size, std::uint8_t stream);

  // Segment arenas: allocates a new segment for `size` and takes the block from it.
  Result<Block*> grow_segment(std::size_t size, std::uint8_t stream);

  // Returns an allocated block to the cache, merging it with free neighbours of the same stream.
  void release(Block* block);

  // Gives memory back to the backend: whole free chunks (mapping) or whole free segments, largest free
  // blocks first, until `want_bytes` are released. A block whose streams are busy is skipped or waited for,
  // as `wait` says (the packing modes: only a block used by `wait_stream` alone, and only once the idle
  // blocks did not give enough; never for a block that holds no whole unit, which has nothing to give).
  // `keep_a`/`keep_b` are never touched (a placement's hole neighbours, so the hole itself stays as
  // planned). Returns the bytes released.
  std::uint64_t release_free_memory(std::uint64_t want_bytes, ReleaseWait wait, const Block* keep_a = nullptr,
                                    const Block* keep_b = nullptr, std::uint8_t wait_stream = 0);
  // Whole mapped units inside free blocks whose one user is `stream` (idle or not; `keep_a`/`keep_b` left
  // out): what release_free_memory could release for `stream` with ReleaseWait::kWaitForStream. O(free blocks
  // of at least a chunk on that stream); mapping arenas only (0 otherwise).
  std::uint64_t own_stream_free_units(std::uint8_t stream, const Block* keep_a = nullptr,
                                      const Block* keep_b = nullptr) const;
  // Synchronizes every stream that owns cached memory here, then merges adjacent free blocks of different
  // streams (once their streams are idle, ownership no longer matters). `keep_a`/`keep_b` are never merged
  // (so never recycled). Trim and OOM recovery only.
  void settle_streams(const Block* keep_a = nullptr, const Block* keep_b = nullptr);
  // Frees address ranges that are entirely unmapped (after a trim).
  void release_empty_segments();

  std::uint64_t reserved_bytes() const { return reserved_bytes_; }
  // The cache's figures, computed when asked (O(streams), plus the top bin's blocks): for reports only.
  std::uint64_t free_bytes() const;
  std::size_t largest_free() const;
  // Backend allocations made and released: segments, or mapped units (one driver allocation each).
  std::uint64_t backend_allocations() const { return backend_allocations_; }
  std::uint64_t backend_frees() const { return backend_frees_; }
  std::uint64_t backend_allocated_bytes() const { return backend_allocated_bytes_; }  // mapped or allocated
  std::uint64_t backend_released_bytes() const { return backend_released_bytes_; }    // unmapped or released
  // Host waits release_free_memory made for a busy block with ReleaseWait::kWaitForStream (packing), and
  // those of them that synchronized the whole stream (no marker covered the block's last use).
  std::uint64_t pack_waits() const { return pack_waits_; }
  std::uint64_t pack_stream_syncs() const { return pack_stream_syncs_; }
  std::uint64_t pack_wait_ns() const { return pack_wait_ns_; }  // host time in those waits (steady clock)
  bool mapping() const { return config_.mapping; }
  std::size_t chunk_bytes() const { return config_.chunk_bytes; }
  std::size_t map_unit_bytes() const { return std::max(config_.map_unit_bytes, config_.chunk_bytes); }

  // Appends every live segment with its blocks (streams as backend ids). For snapshots; O(blocks).
  void snapshot(std::vector<SegmentSnapshot>& out) const;

  // Walks every segment and checks the invariants of block.h plus the byte accounting; returns the first
  // violation as INTERNAL. For tests.
  Status check_invariants() const;

 private:
  struct Segment {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    Block* first = nullptr;
    bool live = false;
  };

  FreeIndex& free_of(std::uint8_t stream) {  // on every hit: inline, the growth out of line
    if (stream >= free_.size()) add_free_indexes(stream);
    return *free_[stream];
  }
  void add_free_indexes(std::uint8_t stream);  // empty indexes up to `stream`
  void insert_free(Block* b);
  void remove_free(Block* b);
  void add_hole(Block* b);
  void remove_hole(Block* b);
  Block* split_front(Block* b, std::size_t size);  // b keeps the front `size`; returns the remainder
  Block* merge_free_neighbours(Block* b);          // b is kFree, not indexed; returns the merged block
  Block* merge_hole_neighbours(Block* hole);       // hole is kHole, in the list; returns the merged hole
  Block* take(Block* free_block, std::size_t size, std::uint8_t stream);
  // The block of `index` a request of `size` takes: its best fit, or the next fitting one when that one's
  // size is below the best's growable_bytes. nullptr when none fits. O(1) (two FreeIndex::find at most).
  Block* fit(const FreeIndex& index, std::size_t size) const;
  // A free block's size plus that of the hole (unmapped address space) right after it, if any.
  static std::uint64_t growable_bytes(const Block* b);
  bool streams_idle(const Block* b) const;
  // Whether free block `b`'s last use has completed: by its marker when only its owner stream used it,
  // else by querying its streams. Never blocks.
  bool block_idle(const Block* b);
  // Blocks until free block `b` is idle: up to its marker when one covers it, else by synchronizing its
  // streams (counted in pack_stream_syncs_ when `packing`).
  Status wait_until_idle(const Block* b, bool packing);
  // Whether release_free_memory may wait for busy block `b`.
  bool may_wait_for(const Block* b, ReleaseWait wait, std::uint8_t wait_stream) const;
  // One pass of release_free_memory over the free blocks, largest first: idle blocks, and busy ones that
  // `wait` allows (kIdleOnly: none).
  std::uint64_t release_pass(std::uint64_t want_bytes, ReleaseWait wait, const Block* keep_a,
                             const Block* keep_b, std::uint8_t wait_stream);
  // Unmaps the whole units of free block `b` from the top, at least `want_bytes` of them (mapping arenas),
  // or releases its segment when it spans it (segment arenas). Returns the bytes released.
  std::uint64_t release_block(Block* b, std::uint64_t want_bytes);
  Status synchronize_streams(const Block* b) const;
  void unlink(Block* b);
  Result<std::uint32_t> new_mapping_segment(std::size_t min_bytes);
  // Mapping units. With map_unit_bytes == chunk_bytes every chunk is a unit and unit_starts_ stays empty.
  bool coarse_units() const { return config_.mapping && config_.map_unit_bytes > config_.chunk_bytes; }
  // Maps [address, address+bytes) as units (UnitPieces; `base` the segment's), in one backend map_pieces
  // call; all or nothing.
  Status map_units(std::uintptr_t base, std::uintptr_t address, std::size_t bytes);
  // Unmaps [lo, hi), a run of whole units.
  void unmap_units(std::uintptr_t lo, std::uintptr_t hi);
  // The whole units inside free block `b`: [lo, hi), empty (hi <= lo) when there is none.
  void whole_units_in(const Block* b, std::uintptr_t& lo, std::uintptr_t& hi) const;
  bool holds_whole_unit(const Block* b) const;  // whole_units_in(b) is not empty
  // The highest unit boundary c in [lo, hi) with hi - c >= bytes, else lo. REQUIRES: lo and hi are
  // boundaries.
  std::uintptr_t unit_cut(std::uintptr_t lo, std::uintptr_t hi, std::uint64_t bytes) const;
  Status check_units() const;  // unit_starts_ against the mapped runs (check_invariants)
  std::size_t chunk_floor(std::uintptr_t a) const { return a & ~(config_.chunk_bytes - 1); }
  std::size_t chunk_ceil(std::uintptr_t a) const {
    return (a + config_.chunk_bytes - 1) & ~(config_.chunk_bytes - 1);
  }

  DeviceBackend& backend_;
  ArenaConfig config_;
  BlockSlab& slab_;
  const std::vector<StreamId>& stream_ids_;
  StreamMarks* marks_;
  std::vector<std::unique_ptr<FreeIndex>> free_;  // by stream index
  std::vector<Segment> segments_;
  Block* holes_ = nullptr;                // list through bin_prev/bin_next
  std::set<std::uintptr_t> unit_starts_;  // coarse units only: where each mapped unit begins
  std::uint64_t reserved_bytes_ = 0;
  std::uint64_t backend_allocations_ = 0;
  std::uint64_t backend_frees_ = 0;
  std::uint64_t backend_allocated_bytes_ = 0;
  std::uint64_t backend_released_bytes_ = 0;
  std::uint64_t pack_waits_ = 0;
  std::uint64_t pack_stream_syncs_ = 0;
  std::uint64_t pack_wait_ns_ = 0;
};

}  // namespace memcoord::detail
