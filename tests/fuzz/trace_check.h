// What every trace the parsers accept must satisfy (allocator/trace.h): slot events replay against a live
// set without a double allocation or a free of a dead slot, the counts add up, and the peak of live
// requested bytes is the one the events imply. Aborts (a fuzzer finding) on the first violation.
#pragma once

#include <cstdlib>
#include <vector>

#include "allocator/trace.h"

namespace memcoord::fuzz {

inline void CheckTrace(const Trace& trace) {
  if (trace.events.empty()) std::abort();  // an accepted trace has events
  if (trace.allocations + trace.frees != trace.events.size()) std::abort();
  std::vector<std::uint64_t> live(trace.slots, 0);  // bytes per live slot, 0 when free
  unsigned __int128 live_bytes = 0, peak = 0;
  for (const TraceEvent& e : trace.events) {
    if (e.slot >= trace.slots) std::abort();
    if (e.kind == TraceEvent::Kind::kAlloc) {
      if (e.bytes == 0 || live[e.slot] != 0) std::abort();
      live[e.slot] = e.bytes;
      live_bytes += e.bytes;
      if (live_bytes > peak) peak = live_bytes;
    } else {
      if (live[e.slot] == 0) std::abort();
      live_bytes -= live[e.slot];
      live[e.slot] = 0;
    }
  }
  // Past 2^64 live bytes the parser's 64-bit peak cannot hold the sum (no real trace gets near it).
  if (peak <= UINT64_MAX && trace.peak_live_bytes != static_cast<std::uint64_t>(peak)) std::abort();
}

}  // namespace memcoord::fuzz
