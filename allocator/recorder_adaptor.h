// RecorderAdaptor: sends every successful allocation and free that passes through it to a TraceSink (bytes as
// asked, the block's allocation stream): a TraceRecorder writes the trace format `memcoord replay` reads
// (`a ADDR BYTES STREAM` / `f ADDR BYTES STREAM`), a TraceHistory keeps the recent events for snapshots.
// Failed calls are not recorded.
// The trace is in the resource's own order only if the calls through this adaptor are serialized with the
// resource's (a ThreadSafeAdaptor above it, as in CachingPool): then a free is always written before the
// allocation that reuses its address. Recording itself is cheap: TraceRecorder formats into a buffer and
// does its I/O on its own thread, never under the pool's lock; TraceHistory copies into a ring.
// Ownership: owns neither `upstream` nor `recorder`; both must outlive it.
#pragma once

#include "allocator/memory_resource.h"
#include "allocator/trace_sink.h"

namespace memcoord {

class RecorderAdaptor final : public DirectHooks<RecorderAdaptor, ResourceAdaptor<>> {
 public:
  RecorderAdaptor(MemoryResource& upstream, TraceSink& recorder)
      : DirectHooks(upstream), recorder_(recorder) {}
  TraceSink& recorder() const { return recorder_; }

  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    if (!upstream().try_allocate(bytes, stream, tag, out, error)) return false;
    recorder_.record_alloc(reinterpret_cast<std::uintptr_t>(out.ptr), out.requested, out.stream);
    return true;
  }
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
    if (!upstream().try_allocate_cached(bytes, stream, tag, out)) return false;
    recorder_.record_alloc(reinterpret_cast<std::uintptr_t>(out.ptr), out.requested, out.stream);
    return true;
  }
  bool try_deallocate(void* ptr, Allocation& freed, Status& error) {
    if (!upstream().try_deallocate(ptr, freed, error)) return false;
    recorder_.record_free(reinterpret_cast<std::uintptr_t>(freed.ptr), freed.requested, freed.stream);
    return true;
  }

 private:
  TraceSink& recorder_;
};

}  // namespace memcoord
