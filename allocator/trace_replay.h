// Replays a parsed Trace through a CachingPool and measures what the pool did: peak reserved against the
// trace's peak requested bytes (the fragmentation ratio) and the cost of pool operations alone (parsing
// excluded), as thread CPU time and as wall-clock time. Every block is freed again at the end, so the pool is
// reusable.
#pragma once

#include <cstdint>

#include "allocator/caching_pool.h"
#include "allocator/driver_cost.h"
#include "allocator/trace.h"

namespace memcoord {

struct ReplayResult {
  std::uint64_t events = 0;  // pool operations: allocations + frees
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t peak_requested_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  double ratio = 0.0;              // peak reserved / peak requested
  double ns_per_event = 0.0;       // thread CPU time per operation (immune to other processes' load)
  double wall_ns_per_event = 0.0;  // wall-clock time per operation
  std::uint64_t cache_hits = 0;
  std::uint64_t backend_allocations = 0;
  std::uint64_t backend_frees = 0;            // unmap calls (mapping) or segment releases
  std::uint64_t backend_allocated_bytes = 0;  // what the map calls (or segment allocations) covered
  std::uint64_t backend_released_bytes = 0;   // what the unmap calls (or segment releases) covered
  // What those calls would cost on an H200 (allocator/driver_cost.h), whatever backend replayed them.
  double modeled_driver_ms = 0.0;
};

// Errors: RESOURCE_EXHAUSTED (with the pool's message) when an allocation fails; the pool is left with
// every block the replay allocated freed.
Result<ReplayResult> Replay(const Trace& trace, CachingPool& pool);

}  // namespace memcoord
