// RecorderAdaptor: writes every successful allocation and free that passes through it to a TraceRecorder
// (`a ADDR BYTES STREAM` / `f ADDR BYTES STREAM`, bytes as asked, the block's allocation stream), the trace
// format `memcoord replay` reads. Failed calls are not recorded.
// The trace is in the resource's own order only if the calls through this adaptor are serialized with the
// resource's (a ThreadSafeAdaptor above it, as in CachingPool): then a free is always written before the
// allocation that reuses its address. Recording itself is cheap: TraceRecorder formats into a buffer and
// does its I/O on its own thread, never under the pool's lock.
// Ownership: owns neither `upstream` nor `recorder`; both must outlive it.
#pragma once

#include "allocator/memory_resource.h"
#include "allocator/trace_recorder.h"

namespace memcoord {

class RecorderAdaptor final : public DirectHooks<RecorderAdaptor, ResourceAdaptor<>> {
 public:
  RecorderAdaptor(MemoryResource& upstream, TraceRecorder& recorder)
      : DirectHooks(upstream), recorder_(recorder) {}
  TraceRecorder& recorder() const { return recorder_; }

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
  TraceRecorder& recorder_;
};

}  // namespace memcoord
