// Memory over a trace: replays a Trace through a CachingPool, like Replay, and records after every event
// the live requested bytes (what the program asked for) and the pool's reserved bytes (what it took from
// the device), downsampled to at most `max_points` buckets of consecutive events. Each bucket keeps the
// maximum of each series within it, so no peak is lost however long the trace. Traces carry no timestamps:
// the x axis is the event number.
//
// Errors: as Replay (RESOURCE_EXHAUSTED when an allocation fails); the pool is left with every block the
// replay allocated freed. Not thread-safe with other users of the same pool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/trace.h"

namespace memcoord {

struct TimelinePoint {
  std::uint64_t event = 0;            // index of the bucket's last event
  std::uint64_t requested_bytes = 0;  // maximum of live requested bytes within the bucket
  std::uint64_t reserved_bytes = 0;   // maximum of the pool's reserved bytes within the bucket
};

struct TraceTimeline {
  std::string label;  // what replayed it, e.g. "memcoord (mapping)"
  std::vector<TimelinePoint> points;
  std::uint64_t peak_requested_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
};

Result<TraceTimeline> ReplayTimeline(const Trace& trace, CachingPool& pool, std::size_t max_points = 2000);

}  // namespace memcoord
