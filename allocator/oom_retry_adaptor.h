// OomRetryAdaptor: when `upstream` answers an allocation with RESOURCE_EXHAUSTED (for a pool: after its own
// last-resort pass released its whole cache), asks an OOM hook whether it made room (raised the limit,
// trimmed another pool, got quota from the coordinator); if the hook says so, the allocation is retried once,
// and that answer is final. Other errors pass unchanged and never call the hook. Without a hook it only
// forwards (CachingPool leaves it out of the stack then).
// The hook is called with no lock of the resource held: it may call back into the pool (trim, stats,
// set_limit) or wait on the coordinator. So this adaptor must sit ABOVE a ThreadSafeAdaptor, never below.
// Thread safety: thread-safe (set_hook and the failure path share a small mutex; the success path takes
// none). Ownership: does not own `upstream`. `Upstream`: see ResourceAdaptor (CachingPool names its
// ThreadSafeAdaptor).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "allocator/memory_resource.h"

namespace memcoord {

// What the pool tells its OOM hook: it could not serve `requested_bytes` even after freeing its cache.
struct OomEvent {
  std::string pool;
  std::uint64_t requested_bytes = 0;
  std::uint64_t limit_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t allocated_bytes = 0;
};
// Called without the pool's lock held; returns true when it made room (raised the limit, trimmed another
// pool) and the allocation should be retried once more.
using OomHook = std::function<bool(const OomEvent&)>;

template <typename Upstream = MemoryResource>
class OomRetryAdaptor final : public ResourceAdaptor<Upstream> {
 public:
  // `describe` fills the event for a failed request of `bytes` (the pool's name and figures).
  OomRetryAdaptor(Upstream& upstream, std::function<OomEvent(std::size_t bytes)> describe)
      : ResourceAdaptor<Upstream>(upstream), describe_(std::move(describe)) {}

  void set_hook(OomHook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }
  bool has_hook() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<bool>(hook_);
  }

  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    if (this->upstream().try_allocate(bytes, stream, tag, out, error)) return true;
    if (error.code() != StatusCode::kResourceExhausted) return false;
    return ask_and_retry(bytes, stream, tag, out, error);
  }

 private:
  bool do_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) override {
    return try_allocate(bytes, stream, tag, out, error);
  }

  // The failure path: `error` holds the first RESOURCE_EXHAUSTED, kept when the hook declines.
  bool ask_and_retry(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    OomHook hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = hook_;  // a copy: set_hook may run while the hook does
    }
    if (!hook || !hook(describe_(bytes))) return false;
    error = Status::Ok();
    return this->upstream().try_allocate(bytes, stream, tag, out, error);
  }

  const std::function<OomEvent(std::size_t)> describe_;
  mutable std::mutex mu_;  // guards hook_
  OomHook hook_;
};

}  // namespace memcoord
