// ThreadSafeAdaptor: makes a resource stack safe to share between threads by holding one mutex around every
// call into `upstream`. Everything below it (a CorePool and the adaptors over it) may then be
// single-threaded; their figures are relaxed atomics that readers see without the lock.
// lock() hands the same mutex to a composer (CachingPool) for operations that span several layers (a limit
// change that trims, a tag registration, a snapshot) and for changing the upstream (set_upstream), which is
// only ever dereferenced under the lock. Its upstream is any MemoryResource (CachingPool changes it as
// optional layers come and go), so its calls below go through the virtual hooks. Never hold the lock while
// calling out to unknown code (an OOM hook): OomRetryAdaptor therefore sits above this adaptor.
// Ownership: does not own `upstream`.
#pragma once

#include <mutex>

#include "allocator/memory_resource.h"

namespace memcoord {

class ThreadSafeAdaptor final : public DirectHooks<ThreadSafeAdaptor, ResourceAdaptor<>> {
 public:
  explicit ThreadSafeAdaptor(MemoryResource& upstream) : DirectHooks(upstream) {}

  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    std::lock_guard<std::mutex> guard(mu_);
    return upstream().try_allocate(bytes, stream, tag, out, error);
  }
  bool try_deallocate(void* ptr, Allocation& freed, Status& error) {
    std::lock_guard<std::mutex> guard(mu_);
    return upstream().try_deallocate(ptr, freed, error);
  }
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
    std::lock_guard<std::mutex> guard(mu_);
    return upstream().try_allocate_cached(bytes, stream, tag, out);
  }

  [[nodiscard]] std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(mu_); }
  // The mutex when it is free now; an empty lock (owns_lock() false) when another thread holds it.
  [[nodiscard]] std::unique_lock<std::mutex> try_lock() const {
    return std::unique_lock<std::mutex>(mu_, std::try_to_lock);
  }
  // REQUIRES: the caller holds lock().
  void set_upstream(MemoryResource& upstream) { ResourceAdaptor::set_upstream(upstream); }

 private:
  Status do_record_stream(void* ptr, StreamId stream) override {
    std::lock_guard<std::mutex> guard(mu_);
    return upstream().record_stream(ptr, stream);
  }
  TrimResult do_trim(std::uint64_t target_bytes) override {
    std::lock_guard<std::mutex> guard(mu_);
    return upstream().trim(target_bytes);
  }

  mutable std::mutex mu_;  // serializes every call into upstream() and guards the upstream pointer
};

}  // namespace memcoord
