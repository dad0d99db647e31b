// MemoryResource: what a caching pool and each of its adaptors look like from above. allocate/deallocate (and
// try_allocate/try_deallocate, the same without a Result, for hot paths), record_stream and trim are public
// and non-virtual; each calls a private virtual hook, so behaviour shared by every resource lives once here.
// A pool is built as a stack: a CorePool at the bottom (blocks, streams, packing) and adaptors above it, each
// taking the resource below (its upstream) in its constructor, adding one behaviour and forwarding the rest
// (ResourceAdaptor). CachingPool composes the stack users see.
//
// Contract every resource keeps:
//   - A block is usable on the stream it was allocated on at once; on another stream only after
//     record_stream or synchronization (the pool makes reuse across streams wait on the device).
//   - Blocks are aligned to 512 bytes; Allocation::size (the rounded size) >= the bytes asked.
//   - deallocate(p) REQUIRES p came from this resource (through the same stack) and is live; otherwise
//     NOT_FOUND (null: INVALID_ARGUMENT) and nothing changes. It returns what was freed, so adaptors above
//     learn a block's size, stream and tag without keeping their own table.
//   - A failed call leaves the resource as it was. RESOURCE_EXHAUSTED means out of memory (or over a limit).
//   - trim(target) releases cached memory until reserved <= target or nothing free remains; never touches
//     a live block.
// Thread safety: none promised by this interface; each implementation says. ThreadSafeAdaptor makes any
// stack safe to share. Ownership: an adaptor never owns its upstream, which must outlive it.
//
// Direct calls. Through a MemoryResource& every call is virtual. A final resource on a hot path (CorePool
// and the adaptors) also declares its own public try_allocate/try_deallocate/try_allocate_cached, with the
// same contract, which hide the base's: a caller that holds the concrete type (an adaptor whose Upstream
// parameter names it, as in CachingPool's stack) calls them directly, so the compiler can inline the layers
// into one another. Its virtual hooks forward to them (DirectHooks, below), so both ways reach the same code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/device_backend.h"
#include "allocator/pool_stats.h"
#include "common/result.h"

namespace memcoord {

// Tags name what an allocation is for ("activations", "optimizer", "gradients"); live bytes are kept per tag.
using TagId = std::uint8_t;
constexpr TagId kUntagged = 0;
constexpr std::size_t kMaxTags = 64;

// One block as a resource handed it out (allocate) or took it back (deallocate).
struct Allocation {
  void* ptr = nullptr;
  std::size_t size = 0;              // bytes the block occupies (the request rounded up to 512)
  std::size_t requested = 0;         // bytes asked for
  StreamId stream = kDefaultStream;  // the stream it was allocated on
  TagId tag = kUntagged;
};

class MemoryResource {
 public:
  MemoryResource() = default;
  MemoryResource(const MemoryResource&) = delete;
  MemoryResource& operator=(const MemoryResource&) = delete;
  virtual ~MemoryResource() = default;

  // Errors: INVALID_ARGUMENT for 0 or absurd sizes or an unknown tag; RESOURCE_EXHAUSTED when no memory.
  Result<Allocation> allocate(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged) {
    Allocation out;
    Status error;
    if (do_allocate(bytes, stream, tag, out, error)) return out;
    return error;
  }
  Result<Allocation> deallocate(void* ptr) {
    Allocation freed;
    Status error;
    if (do_deallocate(ptr, freed, error)) return freed;
    return error;
  }
  // The same two calls for hot paths, which build no Result and, on success, no Status: true with `out`
  // (`freed`) filled, or false with `error` set to what allocate (deallocate) would have returned. `error`
  // is written only on failure.
  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    return do_allocate(bytes, stream, tag, out, error);
  }
  bool try_deallocate(void* ptr, Allocation& freed, Status& error) {
    return do_deallocate(ptr, freed, error);
  }
  // A cache hit that calls nothing outside the resource stack: no backend (driver) call, no device-side
  // wait on another stream's work, no stream query. True with `out` filled, counted by every layer as
  // allocate would count it; false (nothing changed, no error: allocate then says what it would do) for
  // anything else, bad input included. For callers that must not reach the driver on a hit but may on a
  // miss after a check of their own (the C ABI during CUDA graph capture). A resource that cannot tell
  // refuses: the default hook returns false.
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
    return do_allocate_cached(bytes, stream, tag, out);
  }
  // Marks a live block as used on `stream` too: when freed, it is reused only after that stream's work.
  Status record_stream(void* ptr, StreamId stream) { return do_record_stream(ptr, stream); }
  TrimResult trim(std::uint64_t target_bytes = 0) { return do_trim(target_bytes); }

 private:
  // The hooks keep try_allocate's and try_deallocate's contract.
  virtual bool do_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) = 0;
  virtual bool do_deallocate(void* ptr, Allocation& freed, Status& error) = 0;
  virtual bool do_allocate_cached(std::size_t /*bytes*/, StreamId /*stream*/, TagId /*tag*/,
                                  Allocation& /*out*/) {
    return false;
  }
  virtual Status do_record_stream(void* ptr, StreamId stream) = 0;
  virtual TrimResult do_trim(std::uint64_t target_bytes) = 0;
};

// An adaptor's base: forwards every call to `upstream` unchanged; an adaptor overrides only the hooks its
// one behaviour needs. Does not own the upstream. `Upstream` is the type the adaptor knows its upstream by:
// MemoryResource (any resource, reached through the virtual hooks) or a final resource type, whose
// try_allocate/try_deallocate the adaptor then calls directly (see the note on direct calls above).
template <typename Upstream = MemoryResource>
class ResourceAdaptor : public MemoryResource {
 public:
  explicit ResourceAdaptor(Upstream& upstream) : upstream_(&upstream) {}
  Upstream& upstream() const { return *upstream_; }

 protected:
  // For adaptors whose upstream may change (ThreadSafeAdaptor, under its own lock).
  void set_upstream(Upstream& upstream) { upstream_ = &upstream; }

 private:
  bool do_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) override {
    return upstream_->try_allocate(bytes, stream, tag, out, error);
  }
  bool do_deallocate(void* ptr, Allocation& freed, Status& error) override {
    return upstream_->try_deallocate(ptr, freed, error);
  }
  bool do_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) override {
    return upstream_->try_allocate_cached(bytes, stream, tag, out);
  }
  Status do_record_stream(void* ptr, StreamId stream) override {
    return upstream_->record_stream(ptr, stream);
  }
  TrimResult do_trim(std::uint64_t target_bytes) override { return upstream_->trim(target_bytes); }

  Upstream* upstream_;
};

// The virtual hooks of a final resource that declares its own try_allocate/try_deallocate/
// try_allocate_cached (the note on direct calls above): they forward to those, so both ways reach the same
// code. `Base` is MemoryResource or a ResourceAdaptor; the resource still implements do_record_stream and
// do_trim itself (or keeps its base's).
template <typename Derived, typename Base>
class DirectHooks : public Base {
 public:
  using Base::Base;

 private:
  bool do_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) override {
    return static_cast<Derived*>(this)->try_allocate(bytes, stream, tag, out, error);
  }
  bool do_deallocate(void* ptr, Allocation& freed, Status& error) override {
    return static_cast<Derived*>(this)->try_deallocate(ptr, freed, error);
  }
  bool do_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) override {
    return static_cast<Derived*>(this)->try_allocate_cached(bytes, stream, tag, out);
  }
};

}  // namespace memcoord
