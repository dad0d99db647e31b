#include "allocator/tag_registry.h"

#include <fmt/format.h>

#include <algorithm>

namespace memcoord {

TagRegistry::TagRegistry(std::string owner) : owner_(std::move(owner)) { names_[kUntagged] = "untagged"; }

Result<TagId> TagRegistry::tag(std::string_view name) {
  if (name.empty()) return InvalidArgument("tag name must not be empty");
  const std::size_t count = tag_count();
  for (std::size_t i = 0; i < count; ++i) {
    if (names_[i] == name) return static_cast<TagId>(i);
  }
  if (count >= kMaxTags) {
    return InvalidArgument(fmt::format("{}: more than {} tags; reuse tag names", owner_, kMaxTags));
  }
  names_[count] = std::string(name);
  count_.store(count + 1, std::memory_order_release);
  return static_cast<TagId>(count);
}

Status TagRegistry::unknown_tag(TagId tag) const {
  return InvalidArgument(fmt::format("{}: unknown tag id {}; register tags with tag(name)", owner_, tag));
}

std::uint64_t TagRegistry::tagged_bytes() const {
  std::uint64_t total = 0;
  for (std::size_t i = 1; i < tag_count(); ++i) total += bytes_[i].load();
  return total;
}

std::uint64_t TagRegistry::tagged_blocks() const {
  std::uint64_t total = 0;
  for (std::size_t i = 1; i < tag_count(); ++i) total += blocks_[i].load();
  return total;
}

std::vector<TagUsage> TagRegistry::usage(std::uint64_t untagged_bytes, std::uint64_t untagged_blocks,
                                         const TagFigures* not_live) const {
  std::vector<TagUsage> out;
  if (untagged_bytes != 0) out.push_back(TagUsage{names_[kUntagged], untagged_bytes, untagged_blocks});
  const std::size_t count = tag_count();
  for (std::size_t i = 1; i < count; ++i) {
    std::uint64_t bytes = bytes_[i].load();
    std::uint64_t blocks = blocks_[i].load();
    if (not_live != nullptr) {
      bytes -= std::min(bytes, not_live->bytes[i]);
      blocks -= std::min(blocks, not_live->blocks[i]);
    }
    if (bytes == 0) continue;
    out.push_back(TagUsage{names_[i], bytes, blocks});
  }
  std::sort(out.begin(), out.end(), [](const TagUsage& a, const TagUsage& b) {
    return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.tag < b.tag;
  });
  return out;
}

}  // namespace memcoord
