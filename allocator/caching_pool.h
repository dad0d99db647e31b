// CachingPool: a stream-aware caching allocator over one DeviceBackend. Blocks are carved from memory the
// backend provides and kept for reuse when freed, so a cache hit never calls the backend (the driver) and
// never synchronizes anything.
//
// How memory grows. On a mapping backend (cuda-vmm, host, virtual) each of two arenas (small blocks
// <= small_block_limit, large blocks above it, kept apart so long-lived small tensors do not pin large
// ranges) is a reserved address range backed by physical chunks mapped on demand. On a miss the pool places
// the request where it needs the fewest new chunks and maps them. It packs (unmaps whole idle free chunks
// elsewhere in the cache and maps them where the request goes, instead of growing) under pressure (its
// limit, a nearly full device) and, sparingly, at its own high-water mark: see RemapPolicy. A loop over the
// same sizes stops calling the backend after its first round. On a segment backend (cuda, pinned-host) it
// grows by whole segments, as PyTorch's native allocator does.
//
// Streams. A block freed on stream A is reused on A at once (stream order makes that safe). Reuse on another
// stream B makes B wait on the device for A's queued work (an event), never the host. Blocks used on extra
// streams (record_stream) are held until those streams' work is done.
//
// Thread safety: every method is thread-safe; stats() and tag_usage() take no lock on the pool's mutex.
// Ownership: the pool does not own its backend, which must outlive it; the pool must outlive every block it
// hands out. Destroying a pool releases all its memory; blocks still live then are reported as leaked.
// Errors: bad input (zero or absurd sizes, unknown or double-freed pointers, a limit below live use) returns
// a Status naming what was wrong and leaves the pool unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/device_backend.h"
#include "allocator/pool_stats.h"
#include "common/result.h"

namespace memcoord {

class TraceRecorder;

// Tags name what an allocation is for ("activations", "optimizer", "gradients"); live bytes are kept per tag.
using TagId = std::uint8_t;
constexpr TagId kUntagged = 0;
constexpr std::size_t kMaxTags = 64;

enum class PoolGrowth {
  kAuto,  // mapping when the backend supports it, else segments
  kMapping,
  kSegments,
};

// When a mapping arena packs: unmaps idle free chunks elsewhere in its cache and maps them where a miss
// needs memory, instead of growing. Packing keeps reserved memory near what live blocks need but costs
// driver calls (tens of microseconds a chunk on a GPU), and memory moved away may be wanted back.
enum class RemapPolicy {
  // Default. Under pressure (a limit that would be exceeded, a device nearly out of free memory) packs
  // whatever idle cache the miss needs, from both arenas. Without pressure, packs only at the pool's
  // high-water mark and only within the request's arena, and each byte moved raises the mark by 1/64 of a
  // byte (up to 1/64 of it): a loop that keeps missing stops calling the driver after a round or two, a loop
  // over the same sizes after its first round.
  kUnderPressure,
  // Packs from both arenas on every miss at the high-water mark: the smallest footprint, and a driver call
  // on each such miss even in a steady loop. For comparison (benchmarks) only.
  kEveryMiss,
};

struct PoolOptions {
  std::string name = "default";
  PoolGrowth growth = PoolGrowth::kAuto;
  RemapPolicy remap = RemapPolicy::kUnderPressure;
  std::size_t small_block_limit = 1 << 20;  // requests up to this go to the small arena
  std::uint64_t limit_bytes = 0;            // quota on reserved bytes; 0: no limit but the device's
  // Address space reserved per arena range on mapping backends; 0: twice the device's total memory.
  std::uint64_t address_range_bytes = 0;
  // A miss that would leave the device with less free memory than this packs the cache first (pressure);
  // 0: 1/32 of the device's total memory.
  std::uint64_t device_reserve_bytes = 0;
};

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

class CachingPool {
 public:
  explicit CachingPool(DeviceBackend& backend, PoolOptions options = {});
  ~CachingPool();
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // Returns a block of at least `bytes` (aligned to 512), usable on `stream`.
  // Errors: INVALID_ARGUMENT for 0 or absurd sizes or an unknown tag; RESOURCE_EXHAUSTED with the request,
  // limit, allocated, reserved, largest free block and top tags when it cannot be served.
  Result<void*> allocate(std::size_t bytes, StreamId stream = kDefaultStream, TagId tag = kUntagged);
  // REQUIRES: ptr came from this pool and is live; otherwise NOT_FOUND and nothing changes.
  Status deallocate(void* ptr);
  // Marks a live block as used on `stream` too: when freed, it is reused only after that stream's work.
  Status record_stream(void* ptr, StreamId stream);

  // Releases cached (free) memory until reserved <= target_bytes or nothing free remains. Never touches a
  // live block; synchronizes only the streams that last used the memory it releases.
  TrimResult trim(std::uint64_t target_bytes = 0);
  // A quota on reserved bytes (0 removes it). Trims cache to fit; FAILED_PRECONDITION when live blocks alone
  // exceed it (the limit is then unchanged).
  Status set_limit(std::uint64_t limit_bytes);
  void set_oom_hook(OomHook hook);
  // Every allocation and free is written to `recorder` (nullptr stops). The recorder must outlive its use.
  void set_recorder(TraceRecorder* recorder);

  // Registers (or finds) a tag by name. Errors: INVALID_ARGUMENT for an empty name or more than kMaxTags.
  Result<TagId> tag(std::string_view name);

  PoolStats stats() const;
  std::vector<TagUsage> tag_usage() const;  // tags with live bytes, largest first
  // Size of the live block at ptr as handed out (rounded), NOT_FOUND otherwise.
  Result<std::size_t> block_size(const void* ptr) const;

  const std::string& name() const;
  DeviceBackend& backend() const;

  // Walks every block and checks the pool's invariants (blocks tile their segments, free blocks merged and
  // indexed, reserved == mapped bytes, allocated == live blocks). O(blocks), takes the lock; for tests.
  Status check_invariants() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord
