// peak_free_blocks TRACE [ALLOC_CONF]: where a pool's memory goes at its peak. Replays an allocation trace on
// one thread through a default pool on the virtual backend (ALLOC_CONF as MEMCOORD_ALLOC_CONF would set it)
// and prints, as one JSON object, the snapshot taken when reserved bytes last rose: the request that raised
// them, the bytes live then, and the large arena's free mapped blocks by size. A free block smaller than the
// large arena's unit holds no whole unit, so its memory can only be unmapped with its live neighbours': the
// pool's overhead at the peak that packing cannot reach (README, "Llama-like workloads, perturbed").
// Invariant checked before printing: the large arena's mapped bytes are its live and free blocks' bytes.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/pool_conf.h"
#include "allocator/trace.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

struct Peak {
  std::uint64_t reserved_bytes = 0;
  std::size_t event = 0;
  std::uint64_t request_bytes = 0;
  std::uint64_t live_requested_bytes = 0;
  PoolSnapshot snapshot;
};

// Replays `trace` on one thread; the snapshot of each new peak of reserved bytes replaces the last.
Result<Peak> ReplayToPeak(const Trace& trace, CachingPool& pool) {
  std::vector<void*> blocks(trace.slots, nullptr);
  std::vector<std::uint64_t> requested(trace.slots, 0);
  std::uint64_t live = 0;
  Peak peak;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == TraceEvent::Kind::kFree) {
      MEMCOORD_RETURN_IF_ERROR(pool.deallocate(blocks[e.slot]));
      live -= requested[e.slot];
      blocks[e.slot] = nullptr;
      continue;
    }
    MEMCOORD_ASSIGN_OR_RETURN(blocks[e.slot], pool.allocate(e.bytes, e.stream));
    requested[e.slot] = e.bytes;
    live += e.bytes;
    const std::uint64_t reserved = pool.stats().reserved_bytes;
    if (reserved > peak.reserved_bytes) {
      peak = Peak{reserved, i, e.bytes, live, pool.snapshot()};
    }
  }
  for (void* b : blocks) {
    if (b != nullptr) MEMCOORD_RETURN_IF_ERROR(pool.deallocate(b));
  }
  return peak;
}

struct LargeArenaFigures {
  std::uint64_t mapped_bytes = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t free_blocks = 0;
  std::uint64_t free_bytes_under_a_unit = 0;  // in free blocks smaller than one unit
  std::uint64_t free_blocks_under_a_unit = 0;
  std::map<std::uint64_t, std::uint64_t> free_blocks_by_mib;  // size rounded down to MiB -> count
};

LargeArenaFigures Tally(const PoolSnapshot& snapshot, std::uint64_t unit_bytes) {
  LargeArenaFigures f;
  for (const SegmentSnapshot& segment : snapshot.segments) {
    if (segment.small) continue;
    f.mapped_bytes += segment.mapped_bytes;
    for (const BlockSnapshot& b : segment.blocks) {
      if (b.state == BlockSnapshot::State::kAllocated) {
        f.live_bytes += b.size;
      } else if (b.state == BlockSnapshot::State::kFree) {
        f.free_bytes += b.size;
        ++f.free_blocks;
        ++f.free_blocks_by_mib[b.size >> 20];
        if (b.size < unit_bytes) {
          f.free_bytes_under_a_unit += b.size;
          ++f.free_blocks_under_a_unit;
        }
      }
    }
  }
  return f;
}

void Print(const Peak& peak, const LargeArenaFigures& f, std::uint64_t unit_bytes) {
  std::printf(
      "{\"peak_reserved_bytes\": %llu, \"event\": %zu, \"request_bytes\": %llu, \"live_requested_bytes\": "
      "%llu, "
      "\"unit_bytes\": %llu, \"large_mapped_bytes\": %llu, \"large_live_block_bytes\": %llu, "
      "\"large_free_bytes\": %llu, \"large_free_blocks\": %llu, \"free_bytes_in_blocks_under_a_unit\": %llu, "
      "\"free_blocks_under_a_unit\": %llu, \"free_blocks_by_mib\": {",
      static_cast<unsigned long long>(peak.reserved_bytes), peak.event,
      static_cast<unsigned long long>(peak.request_bytes),
      static_cast<unsigned long long>(peak.live_requested_bytes), static_cast<unsigned long long>(unit_bytes),
      static_cast<unsigned long long>(f.mapped_bytes), static_cast<unsigned long long>(f.live_bytes),
      static_cast<unsigned long long>(f.free_bytes), static_cast<unsigned long long>(f.free_blocks),
      static_cast<unsigned long long>(f.free_bytes_under_a_unit),
      static_cast<unsigned long long>(f.free_blocks_under_a_unit));
  const char* comma = "";
  for (const auto& [mib, count] : f.free_blocks_by_mib) {
    std::printf("%s\"%llu\": %llu", comma, static_cast<unsigned long long>(mib),
                static_cast<unsigned long long>(count));
    comma = ", ";
  }
  std::printf("}}\n");
}

int Main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: peak_free_blocks TRACE [ALLOC_CONF]\n");
    return 2;
  }
  Result<Trace> trace = ReadTrace(argv[1]);
  if (!trace.ok()) {
    std::fprintf(stderr, "peak_free_blocks: %s\n", trace.status().ToString().c_str());
    return 2;
  }
  Result<PoolOptions> options = ApplyPoolConf(argc == 3 ? argv[2] : "", PoolOptions{});
  if (!options.ok()) {
    std::fprintf(stderr, "peak_free_blocks: %s\n", options.status().ToString().c_str());
    return 2;
  }
  VirtualBackend backend;
  CachingPool pool(backend, *options);
  Result<Peak> peak = ReplayToPeak(*trace, pool);
  if (!peak.ok()) {
    std::fprintf(stderr, "peak_free_blocks: %s\n", peak.status().ToString().c_str());
    return 1;
  }
  const std::uint64_t unit_bytes =
      options->large_map_unit_bytes != 0 ? options->large_map_unit_bytes : PoolOptions::kDefaultLargeMapUnit;
  const LargeArenaFigures figures = Tally(peak->snapshot, unit_bytes);
  if (figures.mapped_bytes != figures.live_bytes + figures.free_bytes) {
    std::fprintf(stderr, "peak_free_blocks: the large arena maps %llu bytes but its blocks hold %llu\n",
                 static_cast<unsigned long long>(figures.mapped_bytes),
                 static_cast<unsigned long long>(figures.live_bytes + figures.free_bytes));
    return 1;
  }
  Print(*peak, figures, unit_bytes);
  return 0;
}

}  // namespace
}  // namespace memcoord

int main(int argc, char** argv) { return memcoord::Main(argc, argv); }
