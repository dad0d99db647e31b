// A pool's history as the tools people already use read it. ReplayHistory replays a recorded trace (a
// worker's allocation history, TraceRecorder's format, or any shared trace) through a memcoord pool that
// grows by whole segments, recording every segment and block event with the addresses the pool gave;
// then:
//   SnapshotJson: PyTorch's memory snapshot, {"segments": [...], "device_traces": [[...]]} as
//     torch.cuda.memory._snapshot() returns it; written with ToPickle it opens in
//     `python -m torch.cuda._memory_viz trace_plot` and at pytorch.org/memory_viz. The segments are the
//     pool's state at the end of the trace (its cache); device_traces hold the last `max_events` events.
//   ChromeTraceJson: Chrome's trace-event JSON (Perfetto and chrome://tracing open it): counter tracks of
//     allocated and reserved bytes and instant events for each segment allocation and release. Traces carry
//     no clock: one event is one microsecond on the time axis.
// Not thread-safe (one replay at a time per backend).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "allocator/device_backend.h"
#include "allocator/trace.h"

namespace memcoord::cli {

struct HistoryEvent {
  // PyTorch's trace action names: "segment_alloc", "alloc", "free_requested", "free_completed",
  // "segment_free".
  const char* action = "";
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;      // block (rounded) or segment size
  std::uint64_t requested = 0;  // alloc: the size asked for
  std::uint64_t stream = 0;
  std::uint64_t event = 0;            // index of the trace event that caused it (the time axis)
  std::uint64_t allocated_bytes = 0;  // pool totals after it
  std::uint64_t reserved_bytes = 0;
};

struct HistoryBlock {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::uint64_t requested = 0;
  std::uint64_t stream = 0;
};

struct HistorySegment {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::uint64_t stream = 0;
  std::vector<HistoryBlock> live;  // live blocks inside it at the end, by address
};

struct PoolHistory {
  std::string workload;
  std::vector<HistoryEvent> events;
  std::vector<HistorySegment> segments;  // the pool's segments at the end of the trace
};

// Errors: as Replay (RESOURCE_EXHAUSTED when the backend runs out).
Result<PoolHistory> ReplayHistory(const Trace& trace, DeviceBackend& upstream);

nlohmann::json SnapshotJson(const PoolHistory& history, std::size_t max_events = 100000);
nlohmann::json ChromeTraceJson(const PoolHistory& history);

}  // namespace memcoord::cli
