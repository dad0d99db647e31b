// Replays a parsed Trace through a CachingPool and measures what the pool did: peak reserved against the
// trace's peak requested bytes (the fragmentation ratio) and the cost of pool operations alone (parsing
// excluded), as thread CPU time and as wall-clock time. Every block is freed again at the end, so the pool is
// reusable.
// Threads. A trace that names several threads (a TraceRecorder's of a PyTorch run: the training loop and
// autograd's thread) is replayed by as many threads, each event by its own thread and every event in the
// trace's order (a thread waits for its turn), so each thread's cache in the pool fills and empties as in the
// recorded run; a block freed by another thread goes back to the pool, as it did there. ReplayThreads::kOne
// replays every event on the calling thread instead.
#pragma once

#include <cstdint>

#include "allocator/caching_pool.h"
#include "allocator/driver_cost.h"
#include "allocator/lagging_streams_adaptor.h"
#include "allocator/trace.h"

namespace memcoord {

struct ReplayResult {
  std::uint64_t events = 0;  // pool operations: allocations + frees
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t peak_requested_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  double ratio = 0.0;  // peak reserved / peak requested
  // Thread CPU time per operation (immune to other processes' load); with several threads, theirs summed,
  // the waiting for turns included.
  double ns_per_event = 0.0;
  double wall_ns_per_event = 0.0;  // wall-clock time per operation
  std::uint64_t cache_hits = 0;
  std::uint64_t backend_allocations = 0;
  // Misses: allocations the cache could not serve, each growing the pool (on a GPU, one cuMemSetAccess
  // call each on mapping backends, whatever the units it maps).
  std::uint64_t misses = 0;
  std::uint64_t backend_frees = 0;            // unmap calls (mapping) or segment releases
  std::uint64_t backend_allocated_bytes = 0;  // what the map calls (or segment allocations) covered
  std::uint64_t backend_released_bytes = 0;   // what the unmap calls (or segment releases) covered
  // What those calls would cost on an H200 (allocator/driver_cost.h), whatever backend replayed them.
  double modeled_driver_ms = 0.0;
  // With lagging streams (Replay's `lagging`): packing's host waits for a busy block (as the pool's stats
  // count them), the GPU events those waits covered, and the lag the replay ran with (0: idle streams).
  std::uint64_t pack_waits = 0;
  std::uint64_t pack_stream_syncs = 0;
  std::uint64_t waited_events = 0;
  std::uint64_t lag_events = 0;
  std::uint32_t threads = 1;             // threads that made the calls
  std::uint64_t idle_cache_flushes = 0;  // thread caches returned for their threads' idleness
  std::uint64_t peak_sums = 0;  // PoolStats::peak_sums: exact sums of the thread caches for the peaks
  // Memory mapped (or segments allocated) at the end of the replay, by arena: what a training run's pool
  // holds after its last step (bench_allocators.py's "arenas_mapped"; PyTorch's small and large pools).
  std::uint64_t small_arena_bytes = 0;
  std::uint64_t large_arena_bytes = 0;
};

enum class ReplayThreads {
  kRecorded,  // one thread per thread the trace names
  kOne,       // every event on the calling thread
};

// Errors: RESOURCE_EXHAUSTED (with the pool's message) when an allocation fails; the pool is left with
// every block the replay allocated freed.
// A replay runs about a thousand times faster than the training it recorded, so a marker interval in
// microseconds (PoolOptions::large_free_marker_interval_us) would leave thousands of events between two
// markers. For a replay over a LaggingStreamsAdaptor: `options` with a marker at every large free instead
// (about one every ten events on GPT-2, where a millisecond of an H200 step is ~12 events).
PoolOptions ForLaggedReplay(PoolOptions options);

// Each event makes the calls the C ABI makes for PyTorch: allocate_cached, then allocate when it declines;
// free_cached, then deallocate. `lagging`: the backend under `pool` when it is a LaggingStreamsAdaptor,
// advanced once per event (null: the pool's streams are whatever its backend says, idle on the virtual
// backend).
Result<ReplayResult> Replay(const Trace& trace, CachingPool& pool, LaggingStreamsAdaptor* lagging = nullptr,
                            ReplayThreads threads = ReplayThreads::kRecorded);

}  // namespace memcoord
