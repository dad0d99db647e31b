// TagRegistry: tag names (TagId 0 is "untagged"; at most kMaxTags) and the live bytes and blocks counted
// against each registered tag. TagAdaptor is the resource layer that counts through it.
// Thread safety: tag(), count() and uncount() must be serialized (the pool's lock); known(), tag_count(),
// usage(), tagged_bytes() and tagged_blocks() may be called from any thread (names are written before the
// count that publishes them, counters are relaxed atomics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/detail/counter.h"
#include "allocator/memory_resource.h"
#include "allocator/pool_stats.h"

namespace memcoord {

// Bytes and blocks per tag id.
struct TagFigures {
  std::array<std::uint64_t, kMaxTags> bytes{};
  std::array<std::uint64_t, kMaxTags> blocks{};
};

class TagRegistry {
 public:
  // `owner` names the registry in errors ("pool 'x'").
  explicit TagRegistry(std::string owner = "pool");

  // Registers (or finds) a tag by name. Errors: INVALID_ARGUMENT for an empty name or more than kMaxTags.
  Result<TagId> tag(std::string_view name);
  bool known(TagId tag) const { return tag < tag_count(); }
  std::size_t tag_count() const { return count_.load(std::memory_order_acquire); }  // "untagged" included
  // INVALID_ARGUMENT naming the owner and `tag` (an unregistered id).
  Status unknown_tag(TagId tag) const;
  // Tags with live bytes, largest first (ties by name); the untagged figures are the caller's. `not_live`:
  // figures counted here that are not live to users (blocks in thread caches), subtracted per tag.
  std::vector<TagUsage> usage(std::uint64_t untagged_bytes, std::uint64_t untagged_blocks,
                              const TagFigures* not_live = nullptr) const;
  std::uint64_t tagged_bytes() const;  // all registered tags but "untagged"
  std::uint64_t tagged_blocks() const;

  // A live block of `bytes` under `tag` appears (count) or goes (uncount). REQUIRES: tag is known.
  void count(TagId tag, std::uint64_t bytes) {
    bytes_[tag].add(bytes);
    blocks_[tag].add(1);
  }
  void uncount(TagId tag, std::uint64_t bytes) {
    bytes_[tag].sub(bytes);
    blocks_[tag].sub(1);
  }

 private:
  const std::string owner_;
  std::array<std::string, kMaxTags> names_;
  std::atomic<std::size_t> count_{1};
  std::array<detail::Counter, kMaxTags> bytes_;
  std::array<detail::Counter, kMaxTags> blocks_;
};

}  // namespace memcoord
