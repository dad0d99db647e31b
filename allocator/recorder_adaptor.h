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

class RecorderAdaptor final : public ResourceAdaptor {
 public:
  RecorderAdaptor(MemoryResource& upstream, TraceRecorder& recorder)
      : ResourceAdaptor(upstream), recorder_(recorder) {}
  TraceRecorder& recorder() const { return recorder_; }

 private:
  Result<Allocation> do_allocate(std::size_t bytes, StreamId stream, TagId tag) override {
    Result<Allocation> a = upstream().allocate(bytes, stream, tag);
    if (a.ok()) recorder_.record_alloc(reinterpret_cast<std::uintptr_t>(a->ptr), a->requested, a->stream);
    return a;
  }
  Result<Allocation> do_deallocate(void* ptr) override {
    Result<Allocation> a = upstream().deallocate(ptr);
    if (a.ok()) recorder_.record_free(reinterpret_cast<std::uintptr_t>(a->ptr), a->requested, a->stream);
    return a;
  }

  TraceRecorder& recorder_;
};

}  // namespace memcoord
