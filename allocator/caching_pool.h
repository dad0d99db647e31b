// CachingPool: a stream-aware caching allocator over one DeviceBackend, the class users hold. Blocks are
// carved from memory the backend provides and kept for reuse when freed, so a cache hit never maps memory
// and never blocks the host. It may queue device-side work: a wait on another stream's queued work (a block
// last used there), or a marker (an event) a large free owed; allocate_cached() makes neither.
//
// Composition. The pool is a stack of MemoryResources, the way RMM composes memory resources; each layer is
// its own class, file and test, and the hot path pays only for the layers attached. The fixed layers know
// the layer under them by its concrete type and call it directly (memory_resource.h, "Direct calls"):
//   OomRetryAdaptor     (only while an OOM hook is set) asks the hook, without the lock, and retries once
//   ThreadCacheAdaptor  a few free blocks per thread, reused on the same stream without the lock (a cached
//                       block is free in every figure users see; trims, limits, snapshots, an OOM and a
//                       thread's exit return them to the pool; caches nothing while a recorder or a
//                       history is set)
//   ThreadSafeAdaptor   one mutex around everything below
//   RecorderAdaptor     (only while a TraceRecorder or a history is set; one each) every allocation and free
//   TagAdaptor          (only once a tag is registered) live bytes per tag; untagged = total - tagged
//   StatsAdaptor        live bytes, requests, blocks, allocations, with peaks
//   CorePool            arenas, blocks, streams, packing, the last-resort pass (core_pool.h says how memory
//                       grows and when it packs)
//   LimitAdaptor        a DeviceBackend under the core: the quota on reserved bytes (set_limit)
//   the DeviceBackend   given by the caller
//
// Streams. A block freed on stream A is reused on A at once (stream order makes that safe). Reuse on another
// stream B makes B wait on the device for A's queued work (an event), never the host. Blocks used on extra
// streams (record_stream) are held until those streams' work is done. A stream the pool has seen must stay
// valid while the pool lives: its destructor synchronizes every stream it has seen (PyTorch never destroys
// its pooled streams; a C++ caller makes its streams before the pool and destroys them after it).
//
// Thread safety: every method is thread-safe. tag_usage() takes no lock on the pool's mutex; stats() takes it
// only to compute the cache's figures (largest free block, fragmentation), which no allocation keeps up;
// those two leave out blocks in thread caches (at most PoolOptions::thread_cache_bytes per thread).
// Ownership: the pool does not own its backend, which must outlive it; the pool must outlive every block it
// hands out. Destroying a pool releases all its memory; blocks still live then are reported as leaked.
// Errors: bad input (zero or absurd sizes, unknown or double-freed pointers, a limit below live use) returns
// a Status naming what was wrong and leaves the pool unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/device_backend.h"
#include "allocator/memory_resource.h"
#include "allocator/oom_retry_adaptor.h"
#include "allocator/pool_options.h"
#include "allocator/pool_snapshot.h"
#include "allocator/pool_stats.h"
#include "common/result.h"

namespace memcoord {

class TraceRecorder;
class TraceSink;

class CachingPool {
 public:
  explicit CachingPool(DeviceBackend& backend, PoolOptions options = {});
  ~CachingPool();
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // Returns a block of at least `bytes` (aligned to 512), usable on `stream`.
  // Errors: INVALID_ARGUMENT for 0 or absurd sizes or an unknown tag; RESOURCE_EXHAUSTED with the request,
  // limit, allocated, reserved, largest free block and top tags when it cannot be served.
  Result<void*> allocate(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged);
  // The same block allocate() would return from the cache, served only when that takes no call outside the
  // pool: a free block of `stream` itself, no other stream recorded on it (no device-side wait), no backend
  // call and no stream query. nullptr otherwise (nothing changed, nothing reported: call allocate()). For a
  // caller that must check something costly (is the stream being captured into a CUDA graph?) only before
  // the pool could reach the driver.
  void* allocate_cached(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged);
  // REQUIRES: ptr came from this pool and is live; otherwise NOT_FOUND and nothing changes.
  Status deallocate(void* ptr);
  // The free deallocate() would do when it takes no lock: `ptr` is a live block this thread allocated, its
  // thread cache keeps it, and `stream` is the block's own stream or kDefaultStream (nothing to record).
  // False otherwise (nothing changed, nothing reported: call deallocate(), after record_stream when the
  // stream differs). For the C ABI's hot path, where a Status costs more than the free.
  bool free_cached(void* ptr, StreamId stream = kDefaultStream);
  // Marks a live block as used on `stream` too: when freed, it is reused only after that stream's work.
  Status record_stream(void* ptr, StreamId stream);

  // Releases cached (free) memory until reserved <= target_bytes or no whole free unit remains (memory goes
  // back in whole units). Never touches a live block; first synchronizes the streams that own free memory in
  // the arenas it trims (the host waits for their queued work). While captures are underway
  // (set_captures_underway) it releases nothing and returns 0 released: no synchronize, query or driver call.
  TrimResult trim(std::uint64_t target_bytes = 0);
  // A quota on reserved bytes (0 removes it). Trims cache to fit; FAILED_PRECONDITION when live blocks alone
  // exceed it (the limit is then unchanged). A limit above the live bytes but below what trimming leaves
  // reserved (free memory inside units that live blocks keep mapped: memory is unmapped in whole units) is
  // taken: misses that need new memory are then refused until frees bring the pool under it, as a
  // coordinator's shrinking quota wants.
  Status set_limit(std::uint64_t limit_bytes);
  void set_oom_hook(OomHook hook);
  // Every allocation and free is written to `recorder` (nullptr stops). The recorder must outlive its use.
  void set_recorder(TraceRecorder* recorder);
  // Every allocation and free also goes to `history` (recent events for snapshots; nullptr stops), beside any
  // recorder. The history must outlive its use.
  void set_history(TraceSink* history);

  // While true, the pool makes no stream or marker query, records no marker and unmaps nothing (a CUDA graph
  // capture is underway on its device: an event or stream query there invalidates the capture): misses grow
  // instead of packing, trims (set_limit's too) release nothing, and a miss the backend refuses fails without
  // the last-resort pass (which synchronizes streams). Set it before the capture begins and clear it after it
  // ends; any thread. A CUDA graph's private pool keeps it set while in use: its graphs replay into its free
  // blocks, which must stay mapped.
  void set_captures_underway(bool underway);

  // Registers (or finds) a tag by name. Errors: INVALID_ARGUMENT for an empty name or more than kMaxTags.
  Result<TagId> tag(std::string_view name);

  PoolStats stats() const;
  // stats() without waiting for the pool's lock: when another thread holds it (a trim or a miss waiting for
  // a stream), largest_free_bytes and fragmentation are those the last stats() call computed; every other
  // figure is as stats() reads it. For periodic reporting, which must go on while the pool is busy (the
  // coordinator takes a rank that stops reporting for dead).
  PoolStats stats_without_waiting() const;
  // Peaks (allocated, requested, active, reserved) become the current figures, so the next peak is that of
  // what runs from now on (torch.cuda.reset_peak_memory_stats). Counters (allocations, trims, ...) stay.
  void reset_peak_stats();
  // Every segment with the blocks that tile it (allocated, free or unmapped, with stream and tag), at one
  // instant. O(blocks), takes the lock.
  PoolSnapshot snapshot() const;
  std::vector<TagUsage> tag_usage() const;  // tags with live bytes, largest first
  // Size of the live block at ptr as handed out (rounded), NOT_FOUND otherwise.
  Result<std::size_t> block_size(const void* ptr) const;

  const std::string& name() const;
  DeviceBackend& backend() const;

  // Walks every block and checks the pool's invariants (blocks tile their segments, free blocks merged and
  // indexed, reserved == mapped bytes == the limit's count, allocated == live blocks == the stats' figure).
  // O(blocks), takes the lock; for tests.
  Status check_invariants() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord
