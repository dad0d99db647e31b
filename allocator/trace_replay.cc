#include "allocator/trace_replay.h"

#include <fmt/format.h>
#include <time.h>

#include <chrono>
#include <vector>

namespace memcoord {
namespace {
std::int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

PoolOptions ForLaggedReplay(PoolOptions options) {
  options.large_free_marker_interval_us = 0;
  return options;
}

Result<ReplayResult> Replay(const Trace& trace, CachingPool& pool, LaggingStreamsAdaptor* lagging) {
  std::vector<void*> slots(trace.slots, nullptr);
  const PoolStats before = pool.stats();
  Status failure;
  std::size_t done = 0;
  const std::int64_t cpu_start = ThreadCpuNs();
  const auto start = std::chrono::steady_clock::now();
  for (const TraceEvent& e : trace.events) {
    if (lagging != nullptr) lagging->advance();
    if (e.kind == TraceEvent::Kind::kAlloc) {
      Result<void*> p = pool.allocate(e.bytes, e.stream);
      if (!p.ok()) {
        failure = p.status().WithContext(fmt::format("replay event {}: ", done));
        break;
      }
      slots[e.slot] = *p;
    } else {
      Status s = pool.deallocate(slots[e.slot]);
      if (!s.ok()) {
        failure = s.WithContext(fmt::format("replay event {}: ", done));
        break;
      }
      slots[e.slot] = nullptr;
    }
    ++done;
  }
  const auto stop = std::chrono::steady_clock::now();
  const std::int64_t cpu_stop = ThreadCpuNs();
  const PoolStats after = pool.stats();
  for (void* p : slots) {
    if (p != nullptr) (void)pool.deallocate(p);
  }
  if (!failure.ok()) return failure;

  ReplayResult r;
  r.events = done;
  r.allocations = trace.allocations;
  r.frees = trace.frees;
  r.peak_requested_bytes = trace.peak_live_bytes;
  r.peak_reserved_bytes = after.peak_reserved_bytes;
  r.ratio = trace.peak_live_bytes == 0
                ? 0.0
                : static_cast<double>(r.peak_reserved_bytes) / static_cast<double>(trace.peak_live_bytes);
  if (done > 0) {
    r.wall_ns_per_event =
        std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(done);
    r.ns_per_event = static_cast<double>(cpu_stop - cpu_start) / static_cast<double>(done);
  }
  r.cache_hits = after.cache_hits - before.cache_hits;
  r.backend_allocations = after.backend_allocations - before.backend_allocations;
  r.backend_frees = after.backend_frees - before.backend_frees;
  r.backend_allocated_bytes = after.backend_allocated_bytes - before.backend_allocated_bytes;
  r.backend_released_bytes = after.backend_released_bytes - before.backend_released_bytes;
  PoolStats calls = after;  // the model reads the counters of this replay only
  calls.backend_allocations = r.backend_allocations;
  calls.backend_frees = r.backend_frees;
  calls.backend_allocated_bytes = r.backend_allocated_bytes;
  calls.backend_released_bytes = r.backend_released_bytes;
  r.modeled_driver_ms = ModeledDriverMs(calls);
  r.pack_waits = after.pack_waits - before.pack_waits;
  r.pack_stream_syncs = after.pack_stream_syncs - before.pack_stream_syncs;
  if (lagging != nullptr) {
    r.waited_events = lagging->waited_events();
    r.lag_events = lagging->lag();
  }
  return r;
}

}  // namespace memcoord
