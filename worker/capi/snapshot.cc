// memcoord_snapshot_json / memcoord_free_string (memcoord.h): every pool on a device with its counters
// (the PoolStats `memcoord status` shows) and, where the pool can list them (CachingPool::snapshot(), an
// allocator addition), its segments and blocks. The JSON is built with nlohmann::json and handed out as a
// malloc'ed C string.
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
          {"maps_chunks", s.maps_chunks},
          {"trims", s.trims},
          {"trimmed_bytes", s.trimmed_bytes},
          {"ooms", s.ooms},
          {"largest_free_bytes", s.largest_free_bytes},
          {"limit_bytes", s.limit_bytes},
          {"fragmentation", s.fragmentation}};
}

nlohmann::json PoolJson(CachingPool& pool) {
  nlohmann::json out{{"name", pool.name()}, {"stats", StatsJson(pool.stats())}};
  out["segments_available"] = false;  // CachingPool offers no segment/block listing yet
  return out;
}

Result<std::string> SnapshotText(Runtime& runtime, int device) {
  MEMCOORD_ASSIGN_OR_RETURN(int resolved, ResolveDevice(runtime, device));
  nlohmann::json doc{{"device", resolved}, {"pools", nlohmann::json::array()}};
  ForEachPool(runtime, resolved, [&](CachingPool& p) { doc["pools"].push_back(PoolJson(p)); });
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

}  // extern "C"
