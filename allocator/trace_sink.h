// TraceSink: where a RecorderAdaptor sends every successful allocation and free of a pool: a TraceRecorder
// (a trace file `memcoord replay` reads) or a TraceHistory (the recent events kept in memory for snapshots,
// as PyTorch's _record_memory_history keeps them). Calls come under the pool's lock, so a sink's record
// methods must be cheap and must never call back into the pool.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/device_backend.h"

namespace memcoord {

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // `bytes`: as the caller asked; `stream`: the block's allocation stream.
  virtual void record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream) = 0;
  virtual void record_free(std::uintptr_t address, std::size_t bytes, StreamId stream) = 0;
};

}  // namespace memcoord
