// TagAdaptor: counts the live bytes and blocks of each registered tag (its TagRegistry: tag names, TagId 0
// is "untagged", at most kMaxTags). An allocation with an unregistered tag is INVALID_ARGUMENT and never
// reaches `upstream`. Untagged blocks pass through uncounted: whoever owns the totals (CachingPool, from its
// StatsAdaptor) derives the untagged figures as total minus tagged, so a pool pays for tags only once it
// registers one (CachingPool puts this adaptor in its stack at the first tag()).
// Thread safety: allocate/deallocate/tag() must be serialized (ThreadSafeAdaptor above it); the registry's
// readers may be called from any thread (tag_registry.h). Ownership: does not own `upstream`.
// `Upstream`: see ResourceAdaptor (CachingPool names its StatsAdaptor).
#pragma once

#include <string>

#include "allocator/memory_resource.h"
#include "allocator/tag_registry.h"

namespace memcoord {

template <typename Upstream = MemoryResource>
class TagAdaptor final : public DirectHooks<TagAdaptor<Upstream>, ResourceAdaptor<Upstream>>,
                         public TagRegistry {
 public:
  // `owner` names the registry in errors ("pool 'x'").
  explicit TagAdaptor(Upstream& upstream, std::string owner = "pool")
      : DirectHooks<TagAdaptor, ResourceAdaptor<Upstream>>(upstream), TagRegistry(std::move(owner)) {}

  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    if (!known(tag)) {
      error = unknown_tag(tag);
      return false;
    }
    if (!this->upstream().try_allocate(bytes, stream, tag, out, error)) return false;
    if (tag != kUntagged) count(tag, out.size);
    return true;
  }
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
    if (!known(tag) || !this->upstream().try_allocate_cached(bytes, stream, tag, out)) return false;
    if (tag != kUntagged) count(tag, out.size);
    return true;
  }
  bool try_deallocate(void* ptr, Allocation& freed, Status& error) {
    if (!this->upstream().try_deallocate(ptr, freed, error)) return false;
    if (freed.tag != kUntagged) uncount(freed.tag, freed.size);
    return true;
  }

 private:
};

}  // namespace memcoord
