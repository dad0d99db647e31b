// memcoord_snapshot_json / memcoord_free_string (memcoord.h): every pool on a device with its counters
// (the PoolStats `memcoord status` shows) and its segments and blocks (CachingPool::snapshot()), the input
// of python/memcoord/_snapshot.py, which turns it into torch.cuda.memory._snapshot()'s shape. The JSON is
// built with nlohmann::json and handed out as a malloc'ed C string.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

namespace memcoord::capi {
Result<int> ResolveDevice(const Runtime& runtime, int device);
void ForEachPool(Runtime& runtime, int device, const std::function<void(CachingPool&)>& visit);

namespace {

nlohmann::json StatsJson(const PoolStats& s) {
  return {{"allocated_bytes", s.allocated_bytes},
          {"peak_allocated_bytes", s.peak_allocated_bytes},
          {"requested_bytes", s.requested_bytes},
          {"peak_requested_bytes", s.peak_requested_bytes},
          {"reserved_bytes", s.reserved_bytes},
          {"peak_reserved_bytes", s.peak_reserved_bytes},
          {"active_bytes", s.active_bytes},
          {"peak_active_bytes", s.peak_active_bytes},
          {"live_blocks", s.live_blocks},
          {"allocations", s.allocations},
          {"frees", s.allocations - s.live_blocks},
          {"cache_hits", s.cache_hits},
          {"backend_allocations", s.backend_allocations},
          {"backend_frees", s.backend_frees},
          {"backend_allocated_bytes", s.backend_allocated_bytes},
          {"backend_released_bytes", s.backend_released_bytes},
          {"pack_waits", s.pack_waits},
          {"pack_stream_syncs", s.pack_stream_syncs},
          {"pack_drains", s.pack_drains},
          {"markers", s.markers},
          {"deferred_markers", s.deferred_markers},
          {"pack_wait_ns", s.pack_wait_ns},
          {"misses", s.misses},
          {"miss_ns", s.miss_ns},
          {"maps_chunks", s.maps_chunks},
          {"trims", s.trims},
          {"trimmed_bytes", s.trimmed_bytes},
          {"idle_cache_flushes", s.idle_cache_flushes},
          {"peak_sums", s.peak_sums},
          {"other_thread_frees", s.other_thread_frees},
          {"ooms", s.ooms},
          {"largest_free_bytes", s.largest_free_bytes},
          {"limit_bytes", s.limit_bytes},
          {"fragmentation", s.fragmentation}};
}

const char* StateName(BlockSnapshot::State state) {
  switch (state) {
    case BlockSnapshot::State::kAllocated:
      return "active_allocated";
    case BlockSnapshot::State::kFree:
      return "inactive";
    case BlockSnapshot::State::kUnmapped:
      return "unmapped";
  }
  return "inactive";
}

nlohmann::json BlockJson(const BlockSnapshot& b) {
  return {{"address", b.address},
          {"size", b.size},
          {"requested", b.requested},
          {"state", StateName(b.state)},
          {"stream", b.stream}};
}

// `mapping`: the pool grows by mapped chunks (PoolStats::maps_chunks), so the segment is a reserved address
// range with memory mapped into parts of it. Only then does it carry "mapped_bytes", which the Python side
// reads as PyTorch's is_expandable.
nlohmann::json SegmentJson(const SegmentSnapshot& s, bool mapping) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const BlockSnapshot& b : s.blocks) blocks.push_back(BlockJson(b));
  nlohmann::json out{
      {"address", s.address}, {"size", s.size}, {"small", s.small}, {"blocks", std::move(blocks)}};
  if (mapping) out["mapped_bytes"] = s.mapped_bytes;
  return out;
}

nlohmann::json PoolJson(CachingPool& pool) {
  // Counters first, then the segments: each is consistent in itself (the snapshot under the pool's lock),
  // the two may differ by what ran in between.
  const PoolStats stats = pool.stats();
  nlohmann::json out{{"name", pool.name()}, {"stats", StatsJson(stats)}};
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentSnapshot& s : pool.snapshot().segments)
    segments.push_back(SegmentJson(s, stats.maps_chunks));
  out["segments"] = std::move(segments);
  out["segments_available"] = true;  // kept for readers written when pools could not list their segments
  return out;
}

// The device's recorded allocation history (memcoord_record_history), oldest first: the "trace" PyTorch's
// memory_viz draws (actions "alloc" and "free"; sizes as asked; no stack frames).
nlohmann::json TraceJson(Runtime& runtime, int device) {
  nlohmann::json trace = nlohmann::json::array();
  for (const memcoord::TraceHistory::Event& e : runtime.worker->history(device)) {
    trace.push_back({{"action", e.alloc ? "alloc" : "free"},
                     {"addr", e.address},
                     {"size", e.bytes},
                     {"stream", e.stream},
                     {"time_us", e.time_us}});
  }
  return trace;
}

Result<std::string> SnapshotText(Runtime& runtime, int device) {
  MEMCOORD_ASSIGN_OR_RETURN(int resolved, ResolveDevice(runtime, device));
  nlohmann::json doc{{"device", resolved}, {"pools", nlohmann::json::array()}};
  ForEachPool(runtime, resolved, [&](CachingPool& p) { doc["pools"].push_back(PoolJson(p)); });
  doc["trace"] = TraceJson(runtime, resolved);
  return doc.dump();
}

}  // namespace
}  // namespace memcoord::capi

extern "C" {

char* memcoord_snapshot_json(int device) {
  using namespace memcoord::capi;
  return Boundary("memcoord_snapshot_json", static_cast<char*>(nullptr), [&]() -> char* {
    CallGuard guard;
    if (guard.runtime() == nullptr) return (FailNotInitialized("memcoord_snapshot_json"), nullptr);
    auto text = SnapshotText(*guard.runtime(), device);
    if (!text.ok()) return (Fail(text.status()), nullptr);
    char* out = static_cast<char*>(std::malloc(text->size() + 1));
    if (out == nullptr) {
      return (Fail(memcoord::ResourceExhausted("memcoord_snapshot_json: host memory exhausted")), nullptr);
    }
    std::memcpy(out, text->c_str(), text->size() + 1);
    return out;
  });
}

void memcoord_free_string(char* s) { std::free(s); }

int memcoord_record_history(int device, int enabled, uint64_t max_entries) {
  using namespace memcoord::capi;
  return Boundary("memcoord_record_history", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_record_history");
    auto resolved = ResolveDevice(*guard.runtime(), device);
    if (!resolved.ok()) return Fail(resolved.status());
    if (enabled != 0 && (max_entries == 0 || max_entries > MEMCOORD_HISTORY_MAX_ENTRIES)) {
      return Fail(memcoord::InvalidArgument(
          fmt::format("memcoord_record_history: max_entries must be between 1 and {}, got {}",
                      MEMCOORD_HISTORY_MAX_ENTRIES, max_entries)));
    }
    const memcoord::Status status = guard.runtime()->worker->record_history(
        *resolved, enabled != 0, static_cast<std::size_t>(max_entries));
    return status.ok() ? 0 : Fail(status);
  });
}

}  // extern "C"
