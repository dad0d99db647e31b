// MemoryResource: what a caching pool and each of its adaptors look like from above. allocate/deallocate/
// record_stream/trim are public and non-virtual; each calls a private virtual hook, so behaviour shared by
// every resource lives once here. A pool is built as a stack: a CorePool at the bottom (blocks, streams,
// packing) and adaptors above it, each taking the resource below (its upstream) in its constructor, adding
// one behaviour and forwarding the rest (ResourceAdaptor). CachingPool composes the stack users see.
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
    return do_allocate(bytes, stream, tag);
  }
  Result<Allocation> deallocate(void* ptr) { return do_deallocate(ptr); }
  // Marks a live block as used on `stream` too: when freed, it is reused only after that stream's work.
  Status record_stream(void* ptr, StreamId stream) { return do_record_stream(ptr, stream); }
  TrimResult trim(std::uint64_t target_bytes = 0) { return do_trim(target_bytes); }

 private:
  virtual Result<Allocation> do_allocate(std::size_t bytes, StreamId stream, TagId tag) = 0;
  virtual Result<Allocation> do_deallocate(void* ptr) = 0;
  virtual Status do_record_stream(void* ptr, StreamId stream) = 0;
  virtual TrimResult do_trim(std::uint64_t target_bytes) = 0;
};

// An adaptor's base: forwards every call to `upstream` unchanged; an adaptor overrides only the hooks its
// one behaviour needs. Does not own the upstream.
class ResourceAdaptor : public MemoryResource {
 public:
  explicit ResourceAdaptor(MemoryResource& upstream) : upstream_(&upstream) {}
  MemoryResource& upstream() const { return *upstream_; }

 protected:
  // For adaptors whose upstream may change (ThreadSafeAdaptor, under its own lock).
  void set_upstream(MemoryResource& upstream) { upstream_ = &upstream; }

 private:
  Result<Allocation> do_allocate(std::size_t bytes, StreamId stream, TagId tag) override {
    return upstream_->allocate(bytes, stream, tag);
  }
  Result<Allocation> do_deallocate(void* ptr) override { return upstream_->deallocate(ptr); }
  Status do_record_stream(void* ptr, StreamId stream) override {
    return upstream_->record_stream(ptr, stream);
  }
  TrimResult do_trim(std::uint64_t target_bytes) override { return upstream_->trim(target_bytes); }

  MemoryResource* upstream_;
};

}  // namespace memcoord
