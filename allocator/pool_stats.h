// PoolStats: a snapshot of one CachingPool's counters. The counters are read without the pool's lock (relaxed
// atomics), so fields may come from slightly different instants; each field on its own is exact at some
// instant. largest_free_bytes and fragmentation are computed from the free blocks when read, under the lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memcoord {

struct PoolStats {
  std::uint64_t allocated_bytes = 0;  // live blocks, rounded sizes
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t requested_bytes = 0;  // live blocks, sizes as asked
  std::uint64_t peak_requested_bytes = 0;
  std::uint64_t reserved_bytes = 0;  // memory taken from the backend (mapped chunks or segments)
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t active_bytes = 0;  // allocated plus freed blocks still awaiting other streams
  std::uint64_t peak_active_bytes = 0;
  std::uint64_t live_blocks = 0;
  std::uint64_t peak_live_blocks = 0;  // the most live_blocks since the last peak reset
  std::uint64_t allocations = 0;       // successful allocate() calls
  // Rounded sizes of every successful allocation and of every free, as users see them (a block freed into a
  // thread cache is freed; one served from it is allocated): allocated_bytes_total - freed_bytes_total is
  // allocated_bytes. PyTorch's "allocated_bytes.all.allocated" and ".freed".
  std::uint64_t allocated_bytes_total = 0;
  std::uint64_t freed_bytes_total = 0;
  std::uint64_t cache_hits = 0;               // allocations served without the backend
  std::uint64_t backend_allocations = 0;      // segments allocated or units mapped (driver allocations)
  std::uint64_t backend_frees = 0;            // segments released or units unmapped
  std::uint64_t backend_allocated_bytes = 0;  // bytes those allocations mapped or allocated
  std::uint64_t backend_released_bytes = 0;   // bytes those frees unmapped or released
  // Packing waits: the host waited for a stream's queued work so that packing could unmap a free block the
  // miss's own stream last used (PoolOptions::pack_waits_for_streams): up to the first marker recorded after
  // the block's last free (the GPU keeps the work queued after it), or, counted in pack_stream_syncs too,
  // to the stream's end when no marker covered it (that drains the GPU's queue).
  std::uint64_t pack_waits = 0;
  std::uint64_t pack_stream_syncs = 0;
  // Misses at the high-water mark that waited for their own marker (all the stream's work queued before the
  // miss) to pack a shortfall of 4 units or more (CorePool::drain_for_large_shortfall); their waits are among
  // pack_waits.
  std::uint64_t pack_drains = 0;
  // Markers recorded in the pool's streams (CUDA events, at misses and large frees), and of them those a
  // large free owed and a later call on its stream recorded (stream_marks.h).
  std::uint64_t markers = 0;
  std::uint64_t deferred_markers = 0;
  // Misses (allocations the cache could not serve, each growing the pool) and the host time they took,
  // packing, waits and driver calls included (steady clock); pack_wait_ns is the part spent in packing waits.
  std::uint64_t misses = 0;
  std::uint64_t miss_ns = 0;
  std::uint64_t pack_wait_ns = 0;
  bool maps_chunks = false;  // the pool grows by mapped chunks (else by whole segments)
  std::uint64_t trims = 0;
  std::uint64_t trimmed_bytes = 0;
  // Thread caches returned to the pool because their threads had stopped allocating
  // (PoolOptions::thread_cache_idle_misses).
  std::uint64_t idle_cache_flushes = 0;
  // Exact sums of every thread's cache that allocations made to settle the peaks (ThreadCacheAdaptor): one
  // whenever an allocation's cheap bound on a peak passes it (one pass for the allocated and requested
  // peaks). Each reads every thread cache's counters, lines their owners write at every call, so with several
  // threads allocating a sum costs a cache miss per thread.
  std::uint64_t peak_sums = 0;
  // Frees of a block that another thread allocated (ThreadCacheAdaptor): each takes the slow path (the
  // freeing thread's slot lock, the other slots' in turn until the owner's, then the pool's), as PyTorch's
  // autograd thread does for the forward pass's blocks. 0 without thread caches.
  std::uint64_t other_thread_frees = 0;
  std::uint64_t ooms = 0;
  std::uint64_t largest_free_bytes = 0;  // largest block allocatable without the backend
  std::uint64_t limit_bytes = 0;         // 0: no limit
  // 1 - largest free / total free (0 when nothing is free): how scattered the cache is.
  double fragmentation = 0.0;
};

struct TagUsage {
  std::string tag;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_blocks = 0;
};

struct TrimResult {
  std::uint64_t released_bytes = 0;
  std::uint64_t reserved_after_bytes = 0;
  double duration_ms = 0.0;
};

}  // namespace memcoord
