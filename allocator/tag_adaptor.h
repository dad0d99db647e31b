// TagAdaptor: a registry of tag names (TagId 0 is "untagged"; at most kMaxTags) and the live bytes and
// blocks of each registered tag. An allocation with an unregistered tag is INVALID_ARGUMENT and never
// reaches `upstream`. Untagged blocks pass through uncounted: whoever owns the totals (CachingPool, from its
// StatsAdaptor) derives the untagged figures as total minus tagged, so a pool pays for tags only once it
// registers one (CachingPool puts this adaptor in its stack at the first tag()).
// Thread safety: allocate/deallocate/tag() must be serialized (ThreadSafeAdaptor above it); known(),
// tag_count() and usage() may be called from any thread (names are written before the count that
// publishes them, counters are relaxed atomics). Ownership: does not own `upstream`.
#pragma once

#include <array>
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/detail/counter.h"
#include "allocator/memory_resource.h"
#include "allocator/pool_stats.h"

namespace memcoord {

class TagAdaptor final : public ResourceAdaptor {
 public:
  // `owner` names the registry in errors ("pool 'x'").
  explicit TagAdaptor(MemoryResource& upstream, std::string owner = "pool");

  // Registers (or finds) a tag by name. Errors: INVALID_ARGUMENT for an empty name or more than kMaxTags.
  Result<TagId> tag(std::string_view name);
  bool known(TagId tag) const { return tag < tag_count(); }
  std::size_t tag_count() const { return count_.load(std::memory_order_acquire); }  // "untagged" included
  // Tags with live bytes, largest first (ties by name); the untagged figures are the caller's.
  std::vector<TagUsage> usage(std::uint64_t untagged_bytes, std::uint64_t untagged_blocks) const;
  std::uint64_t tagged_bytes() const;  // all registered tags but "untagged"
  std::uint64_t tagged_blocks() const;

 private:
  Result<Allocation> do_allocate(std::size_t bytes, StreamId stream, TagId tag) override;
  Result<Allocation> do_deallocate(void* ptr) override;

  const std::string owner_;
  std::array<std::string, kMaxTags> names_;
  std::atomic<std::size_t> count_{1};
  std::array<detail::Counter, kMaxTags> bytes_;
  std::array<detail::Counter, kMaxTags> blocks_;
};

}  // namespace memcoord
