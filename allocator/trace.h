// Allocation traces: parsing for replay. Two formats, detected from the content:
//   memcoord / PyTorch (the shared traces): `a|f|r|S ADDR SIZE STREAM [tTHREAD]` lines, '#' comments, plain
//     or gzip. `a` allocates, `f` frees (the block is back in the pool); `r` and `S` are PyTorch's own
//     bookkeeping and are skipped. The optional fifth field names the thread that made the call (`t0`, `t1`,
//     ...: TraceRecorder writes it); without it every event is thread 0.
//   RMM's CSV memory log: a header `Thread,Time,Action,Pointer,Size,Stream`, actions `allocate`, `free`
//     (and `allocate failure`, skipped); its Thread column names the threads.
// Threads are numbered densely in the order they first appear (at most kMaxTraceThreads).
// Events refer to live blocks by a dense slot number so a replay needs no hash map.
// Errors name the file, the line, what was found and what is accepted: unknown format, garbage lines,
// a free of an address that is not live, a truncated gzip stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

constexpr std::uint32_t kMaxTraceThreads = 64;

struct TraceEvent {
  enum class Kind : std::uint8_t { kAlloc, kFree };
  Kind kind = Kind::kAlloc;
  std::uint16_t thread = 0;  // the calling thread, dense from 0 (see above)
  std::uint32_t slot = 0;    // live-block slot; a free names the slot of its allocation
  std::uint64_t bytes = 0;   // requested bytes (allocations)
  StreamId stream = kDefaultStream;
};

struct Trace {
  std::string format;  // "memcoord" or "rmm-csv"
  std::string workload;
  std::vector<TraceEvent> events;
  std::uint32_t slots = 0;    // number of distinct slots used
  std::uint32_t threads = 1;  // distinct threads (1 when the trace names none)
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t peak_live_bytes = 0;  // peak of live requested bytes, as the trace itself says
};

Result<Trace> ReadTrace(const std::string& path);
// Parses from text already in memory (used by tests and by ReadTrace after decompression).
Result<Trace> ParseTrace(const std::string& text, const std::string& name);

}  // namespace memcoord
