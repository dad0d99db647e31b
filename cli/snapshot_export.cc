#include "cli/snapshot_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "allocator/caching_pool.h"

namespace memcoord::cli {
namespace {

// Forwards to `upstream` and records each segment allocation and release (no mapping: a pool on it grows
// by segments, which is what PyTorch's snapshot describes). Does not own `upstream`.
class SegmentLogBackend final : public DeviceBackend {
 public:
  struct Entry {
    bool allocated;
    std::uint64_t address;
    std::uint64_t bytes;
  };
  explicit SegmentLogBackend(DeviceBackend& upstream) : upstream_(upstream) {}
  std::vector<Entry> take() { return std::exchange(log_, {}); }

  Status wait_for(StreamId waiter, StreamId producer) override {
    return upstream_.wait_for(waiter, producer);
  }
  bool stream_idle(StreamId stream) override { return upstream_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return upstream_.synchronize(stream); }
  DeviceInfo device_info() override { return upstream_.device_info(); }
  std::string_view kind() const override { return upstream_.kind(); }

 private:
  Result<void*> do_allocate(std::size_t bytes) override {
    Result<void*> p = upstream_.allocate(bytes);
    if (p.ok()) log_.push_back({true, reinterpret_cast<std::uintptr_t>(*p), bytes});
    return p;
  }
  void do_release(void* ptr, std::size_t bytes) noexcept override {
    log_.push_back({false, reinterpret_cast<std::uintptr_t>(ptr), bytes});
    upstream_.release(ptr, bytes);
  }

  DeviceBackend& upstream_;
  std::vector<Entry> log_;
};

struct LiveBlock {
  std::uint64_t bytes;
  std::uint64_t requested;
  std::uint64_t stream;
};

// Moves the backend's segment events into the history, stamped with trace event `index`.
void DrainSegments(SegmentLogBackend& log, std::uint64_t index, const PoolStats& stats,
                   std::map<std::uint64_t, std::uint64_t>& segments, PoolHistory& out) {
  for (const auto& e : log.take()) {
    out.events.push_back({e.allocated ? "segment_alloc" : "segment_free", e.address, e.bytes, 0, 0, index,
                          stats.allocated_bytes, stats.reserved_bytes});
    if (e.allocated) {
      segments[e.address] = e.bytes;
    } else {
      segments.erase(e.address);
    }
  }
}

}  // namespace

Result<PoolHistory> ReplayHistory(const Trace& trace, DeviceBackend& upstream) {
  SegmentLogBackend backend(upstream);
  PoolOptions options;
  options.name = "snapshot";
  options.growth = PoolGrowth::kSegments;
  PoolHistory out;
  out.workload = trace.workload;
  std::map<std::uint64_t, std::uint64_t> segments;  // address -> bytes
  std::map<std::uint64_t, LiveBlock> live;          // address -> block
  std::vector<void*> slots(trace.slots, nullptr);
  {
    CachingPool pool(backend, options);
    for (std::size_t i = 0; i < trace.events.size(); ++i) {
      const TraceEvent& e = trace.events[i];
      if (e.kind == TraceEvent::Kind::kAlloc) {
        Result<void*> p = pool.allocate(e.bytes, e.stream);
        if (!p.ok()) return p.status().WithContext(fmt::format("snapshot replay event {}: ", i));
        slots[e.slot] = *p;
        const PoolStats stats = pool.stats();
        DrainSegments(backend, i, stats, segments, out);
        const auto address = reinterpret_cast<std::uintptr_t>(*p);
        const std::uint64_t bytes = pool.block_size(*p).ok() ? *pool.block_size(*p) : e.bytes;
        live[address] = LiveBlock{bytes, e.bytes, e.stream};
        out.events.push_back(
            {"alloc", address, bytes, e.bytes, e.stream, i, stats.allocated_bytes, stats.reserved_bytes});
      } else {
        const auto address = reinterpret_cast<std::uintptr_t>(slots[e.slot]);
        const LiveBlock block = live[address];
        const PoolStats before = pool.stats();
        out.events.push_back({"free_requested", address, block.bytes, block.requested, block.stream, i,
                              before.allocated_bytes, before.reserved_bytes});
        MEMCOORD_RETURN_IF_ERROR(pool.deallocate(slots[e.slot]));
        slots[e.slot] = nullptr;
        live.erase(address);
        const PoolStats stats = pool.stats();
        out.events.push_back({"free_completed", address, block.bytes, block.requested, block.stream, i,
                              stats.allocated_bytes, stats.reserved_bytes});
        DrainSegments(backend, i, stats, segments, out);
      }
    }
    // The end state: every segment the pool holds, with the blocks still live in it.
    for (const auto& [address, bytes] : segments) {
      HistorySegment s{address, bytes, 0, {}};
      for (auto it = live.lower_bound(address); it != live.end() && it->first < address + bytes; ++it) {
        s.live.push_back({it->first, it->second.bytes, it->second.requested, it->second.stream});
        s.stream = it->second.stream;
      }
      out.segments.push_back(std::move(s));
    }
    for (void* p : slots) {
      if (p != nullptr) (void)pool.deallocate(p);
    }
  }
  return out;
}

nlohmann::json SnapshotJson(const PoolHistory& history, std::size_t max_events) {
  nlohmann::json segments = nlohmann::json::array();
  for (const HistorySegment& s : history.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    std::uint64_t at = s.address, allocated = 0, requested = 0;
    auto inactive = [&](std::uint64_t end) {
      if (end > at) {
        blocks.push_back({{"address", at},
                          {"size", end - at},
                          {"requested_size", 0},
                          {"state", "inactive"},
                          {"frames", nlohmann::json::array()}});
      }
    };
    for (const HistoryBlock& b : s.live) {
      inactive(b.address);
      blocks.push_back({{"address", b.address},
                        {"size", b.bytes},
                        {"requested_size", b.requested},
                        {"state", "active_allocated"},
                        {"frames", nlohmann::json::array()}});
      allocated += b.bytes;
      requested += b.requested;
      at = b.address + b.bytes;
    }
    inactive(s.address + s.bytes);
    segments.push_back({{"device", 0},
                        {"address", s.address},
                        {"total_size", s.bytes},
                        {"allocated_size", allocated},
                        {"active_size", allocated},
                        {"requested_size", requested},
                        {"stream", s.stream},
                        {"segment_type", s.bytes <= (1u << 20) ? "small" : "large"},
                        {"segment_pool_id", nlohmann::json::array({0, 0})},
                        {"is_expandable", false},
                        {"frames", nlohmann::json::array()},
                        {"blocks", std::move(blocks)}});
  }
  nlohmann::json trace = nlohmann::json::array();
  const std::size_t first = history.events.size() > max_events ? history.events.size() - max_events : 0;
  for (std::size_t i = first; i < history.events.size(); ++i) {
    const HistoryEvent& e = history.events[i];
    trace.push_back({{"action", e.action},
                     {"addr", e.address},
                     {"size", e.bytes},
                     {"stream", e.stream},
                     {"time_us", e.event},
                     {"frames", nlohmann::json::array()}});
  }
  return {{"segments", std::move(segments)},
          {"device_traces", nlohmann::json::array({std::move(trace)})},
          {"allocator_settings", {{"memcoord_workload", history.workload}, {"growth", "segments"}}}};
}

nlohmann::json ChromeTraceJson(const PoolHistory& history) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"args", {{"name", "memcoord pool: " + history.workload}}}});
  std::uint64_t last_event = UINT64_MAX;
  for (const HistoryEvent& e : history.events) {
    const bool segment = e.action[0] == 's';
    if (segment) {
      events.push_back({{"name", e.action},
                        {"ph", "i"},
                        {"s", "p"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", e.event},
                        {"args", {{"address", fmt::format("{:#x}", e.address)}, {"bytes", e.bytes}}}});
    }
    if (e.event == last_event && !segment) continue;  // one counter sample per trace event is enough
    last_event = e.event;
    events.push_back({{"name", "pool memory (bytes)"},
                      {"ph", "C"},
                      {"pid", 1},
                      {"ts", e.event},
                      {"args", {{"allocated", e.allocated_bytes}, {"reserved", e.reserved_bytes}}}});
  }
  return {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData", {{"source", "memcoord replay --chrome-trace"}, {"time_axis", "1 us = 1 trace event"}}}};
}

}  // namespace memcoord::cli
