#include "allocator/trace_timeline.h"

#include <fmt/format.h>

#include <algorithm>

namespace memcoord {

Result<TraceTimeline> ReplayTimeline(const Trace& trace, CachingPool& pool, std::size_t max_points) {
  max_points = std::max<std::size_t>(max_points, 1);
  const std::size_t per_bucket =
      std::max<std::size_t>(1, (trace.events.size() + max_points - 1) / max_points);
  std::vector<void*> slots(trace.slots, nullptr);
  std::vector<std::uint64_t> slot_bytes(trace.slots, 0);
  TraceTimeline out;
  TimelinePoint bucket;
  std::uint64_t live = 0;
  Status failure;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == TraceEvent::Kind::kAlloc) {
      Result<void*> p = pool.allocate(e.bytes, e.stream);
      if (!p.ok()) {
        failure = p.status().WithContext(fmt::format("timeline replay event {}: ", i));
        break;
      }
      slots[e.slot] = *p;
      slot_bytes[e.slot] = e.bytes;
      live += e.bytes;
    } else {
      Status s = pool.deallocate(slots[e.slot]);
      if (!s.ok()) {
        failure = s.WithContext(fmt::format("timeline replay event {}: ", i));
        break;
      }
      slots[e.slot] = nullptr;
      live -= slot_bytes[e.slot];
    }
    const std::uint64_t reserved = pool.stats().reserved_bytes;
    bucket.event = i;
    bucket.requested_bytes = std::max(bucket.requested_bytes, live);
    bucket.reserved_bytes = std::max(bucket.reserved_bytes, reserved);
    out.peak_requested_bytes = std::max(out.peak_requested_bytes, live);
    out.peak_reserved_bytes = std::max(out.peak_reserved_bytes, reserved);
    if ((i + 1) % per_bucket == 0 || i + 1 == trace.events.size()) {
      out.points.push_back(bucket);
      bucket = TimelinePoint{};
    }
  }
  for (void* p : slots) {
    if (p != nullptr) (void)pool.deallocate(p);
  }
  if (!failure.ok()) return failure;
  return out;
}

}  // namespace memcoord
