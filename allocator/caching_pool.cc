#include "allocator/caching_pool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>

#include "allocator/detail/arena.h"
#include "allocator/detail/block.h"
#include "allocator/detail/pointer_map.h"
#include "allocator/trace_recorder.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

constexpr std::size_t kAlignment = 512;
constexpr std::size_t kMaxStreams = 64;
// No device has a petabyte; larger requests are bugs (negative sizes cast to size_t land here).
constexpr std::uint64_t kAbsurdBytes = 1ULL << 50;
// RemapPolicy::kUnderPressure: the headroom a pool earns from remapping at its high-water mark, as a
// fraction of the bytes remapped and at most that fraction of the mark.
constexpr std::uint64_t kHeadroomDivisor = 64;

// A counter written only under the pool's mutex and read by anyone without it.
struct Counter {
  std::atomic<std::uint64_t> value{0};
  std::uint64_t load() const { return value.load(std::memory_order_relaxed); }
  void store(std::uint64_t v) { value.store(v, std::memory_order_relaxed); }
  void add(std::uint64_t d) { store(load() + d); }
  void sub(std::uint64_t d) { store(load() - d); }
};

// Current and peak of one quantity.
struct Gauge {
  Counter current;
  Counter peak;
  void add(std::uint64_t d) {
    current.add(d);
    if (current.load() > peak.load()) peak.store(current.load());
  }
  void sub(std::uint64_t d) { current.sub(d); }
};

}  // namespace

class CachingPool::Impl {
 public:
  Impl(DeviceBackend& backend, PoolOptions options)
      : backend_(backend),
        options_(std::move(options)),
        small_(backend, arena_config(/*small=*/true), slab_, stream_ids_),
        large_(backend, arena_config(/*small=*/false), slab_, stream_ids_) {
    stream_ids_.reserve(kMaxStreams);
    stream_ids_.push_back(kDefaultStream);
    tag_names_[kUntagged] = "untagged";
    tag_count_ = 1;
    limit_.store(options_.limit_bytes);
  }

  ~Impl() {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.size() > 0) {
      spdlog::warn("pool '{}' destroyed with {} live blocks ({} bytes): released with the pool",
                   options_.name, live_.size(), allocated_.current.load());
    }
    for (StreamId s : stream_ids_) (void)backend_.synchronize(s);
  }

  detail::ArenaConfig arena_config(bool small) const {
    detail::ArenaConfig c;
    const bool can_map = backend_.chunk_bytes() > 0;
    c.mapping = options_.growth == PoolGrowth::kMapping || (options_.growth == PoolGrowth::kAuto && can_map);
    c.chunk_bytes = can_map ? backend_.chunk_bytes() : (2 << 20);
    std::uint64_t range = options_.address_range_bytes;
    if (range == 0) range = 2 * backend_.device_info().total_bytes;
    c.range_bytes =
        std::max<std::uint64_t>((range + c.chunk_bytes - 1) / c.chunk_bytes * c.chunk_bytes, c.chunk_bytes);
    c.small = small;
    return c;
  }

  Result<void*> allocate(std::size_t bytes, StreamId stream, TagId tag) {
    if (bytes == 0)
      return InvalidArgument(
          fmt::format("pool '{}': allocation of 0 bytes; sizes must be positive", options_.name));
    if (bytes > kAbsurdBytes) {
      return InvalidArgument(
          fmt::format("pool '{}': allocation of {} bytes is absurd (over 1 PiB; a negative size?)",
                      options_.name, bytes));
    }
    if (tag >= kMaxTags || (tag != kUntagged && tag >= tag_count_.load())) {
      return InvalidArgument(
          fmt::format("pool '{}': unknown tag id {}; register tags with tag(name)", options_.name, tag));
    }
    const std::size_t size = (bytes + kAlignment - 1) & ~(kAlignment - 1);
    std::unique_lock<std::mutex> lock(mu_);
    MEMCOORD_ASSIGN_OR_RETURN(std::uint8_t stream_index, stream_index_of(stream));
    detail::Arena& arena = bytes <= options_.small_block_limit ? small_ : large_;
    detail::Block* b = arena.take_cached(size, stream_index);
    if (b != nullptr) {
      cache_hits_.add(1);
    } else {
      Result<detail::Block*> grown = grow(arena, size, stream_index, /*last_resort=*/false);
      if (!grown.ok()) grown = grow(arena, size, stream_index, /*last_resort=*/true);
      if (!grown.ok() && oom_hook_) {
        OomEvent event{options_.name, bytes, limit_.load(), reserved_.current.load(),
                       allocated_.current.load()};
        OomHook hook = oom_hook_;
        lock.unlock();  // the hook may call back into this pool (trim, stats) or wait on the coordinator
        const bool retry = hook(event);
        lock.lock();
        if (retry) {
          b = arena.take_cached(size, stream_index);
          if (b == nullptr) grown = grow(arena, size, stream_index, /*last_resort=*/true);
        }
      }
      if (b == nullptr) {
        if (!grown.ok()) {
          ooms_.add(1);
          update_cache_stats();
          return oom_status(bytes, stream, grown.status());
        }
        b = *grown;
      }
    }
    b->requested = bytes;
    b->tag = tag;
    live_.insert(b->address, b);
    allocated_.add(b->size);
    active_.add(b->size);
    requested_.add(bytes);
    tag_bytes_[tag].add(b->size);
    tag_blocks_[tag].add(1);
    allocations_.add(1);
    update_cache_stats();
    if (recorder_ != nullptr) recorder_->record_alloc(b->address, bytes, stream);
    return reinterpret_cast<void*>(b->address);
  }

  Status deallocate(void* ptr) {
    if (ptr == nullptr)
      return InvalidArgument(fmt::format("pool '{}': free of a null pointer", options_.name));
    std::lock_guard<std::mutex> lock(mu_);
    detail::Block* b = live_.erase(reinterpret_cast<std::uintptr_t>(ptr));
    if (b == nullptr) {
      return NotFound(
          fmt::format("pool '{}': free of {} which is not a live block of this pool (never allocated "
                      "here, or already freed)",
                      options_.name, ptr));
    }
    allocated_.sub(b->size);
    active_.sub(b->size);
    requested_.sub(b->requested);
    tag_bytes_[b->tag].sub(b->size);
    tag_blocks_[b->tag].sub(1);
    if (recorder_ != nullptr) recorder_->record_free(b->address, b->requested, stream_ids_[b->stream]);
    arena_of(b).release(b);
    update_cache_stats();
    return Status::Ok();
  }

  Status record_stream(void* ptr, StreamId stream) {
    std::lock_guard<std::mutex> lock(mu_);
    detail::Block* b = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (b == nullptr) {
      return NotFound(
          fmt::format("pool '{}': record_stream on {} which is not a live block", options_.name, ptr));
    }
    MEMCOORD_ASSIGN_OR_RETURN(std::uint8_t index, stream_index_of(stream));
    if (index != b->stream) b->wait_mask |= 1ULL << index;
    return Status::Ok();
  }

  TrimResult trim(std::uint64_t target) {
    const auto start = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    TrimResult result = trim_locked(target);
    result.duration_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  Status set_limit(std::uint64_t limit) {
    std::lock_guard<std::mutex> lock(mu_);
    if (limit != 0 && limit < allocated_.current.load()) {
      return FailedPrecondition(
          fmt::format("pool '{}': limit {} ({} bytes) is below the {} bytes live in the pool; free memory "
                      "first or choose a "
                      "limit of at least {}",
                      options_.name, FormatBytes(limit), limit, allocated_.current.load(),
                      FormatBytes(allocated_.current.load())));
    }
    if (limit != 0 && reserved_.current.load() > limit) (void)trim_locked(limit);
    limit_.store(limit);
    update_cache_stats();
    return Status::Ok();
  }

  void set_oom_hook(OomHook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    oom_hook_ = std::move(hook);
  }

  void set_recorder(TraceRecorder* recorder) {
    std::lock_guard<std::mutex> lock(mu_);
    recorder_ = recorder;
  }

  Result<TagId> tag(std::string_view name) {
    if (name.empty()) return InvalidArgument("tag name must not be empty");
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t count = tag_count_.load();
    for (std::size_t i = 0; i < count; ++i) {
      if (tag_names_[i] == name) return static_cast<TagId>(i);
    }
    if (count >= kMaxTags) {
      return InvalidArgument(
          fmt::format("pool '{}': more than {} tags; reuse tag names", options_.name, kMaxTags));
    }
    tag_names_[count] = std::string(name);
    tag_count_.store(count + 1);
    return static_cast<TagId>(count);
  }

  PoolStats stats() const {
    PoolStats s;
    s.allocated_bytes = allocated_.current.load();
    s.peak_allocated_bytes = allocated_.peak.load();
    s.requested_bytes = requested_.current.load();
    s.peak_requested_bytes = requested_.peak.load();
    s.reserved_bytes = reserved_.current.load();
    s.peak_reserved_bytes = reserved_.peak.load();
    s.active_bytes = active_.current.load();
    s.peak_active_bytes = active_.peak.load();
    s.live_blocks = live_blocks_.load();
    s.allocations = allocations_.load();
    s.cache_hits = cache_hits_.load();
    s.backend_allocations = backend_allocations_.load();
    s.backend_frees = backend_frees_.load();
    s.backend_allocated_bytes = backend_allocated_bytes_.load();
    s.backend_released_bytes = backend_released_bytes_.load();
    s.maps_chunks = large_.mapping();
    s.trims = trims_.load();
    s.trimmed_bytes = trimmed_bytes_.load();
    s.ooms = ooms_.load();
    s.largest_free_bytes = largest_free_.load();
    s.limit_bytes = limit_.load();
    const std::uint64_t free_total = free_bytes_.load();
    s.fragmentation = free_total == 0
                          ? 0.0
                          : 1.0 - static_cast<double>(s.largest_free_bytes) / static_cast<double>(free_total);
    return s;
  }

  std::vector<TagUsage> tag_usage() const {
    std::vector<TagUsage> out;
    const std::size_t count = tag_count_.load();
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t bytes = tag_bytes_[i].load();
      if (bytes == 0) continue;
      out.push_back(TagUsage{tag_names_[i], bytes, tag_blocks_[i].load()});
    }
    std::sort(out.begin(), out.end(), [](const TagUsage& a, const TagUsage& b) {
      return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.tag < b.tag;
    });
    return out;
  }

  Result<std::size_t> block_size(const void* ptr) const {
    std::lock_guard<std::mutex> lock(mu_);
    const detail::Block* b = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (b == nullptr) return NotFound(fmt::format("{} is not a live block of pool '{}'", ptr, options_.name));
    return b->size;
  }

  Status check_invariants() const {
    std::lock_guard<std::mutex> lock(mu_);
    MEMCOORD_RETURN_IF_ERROR(small_.check_invariants().WithContext("small arena: "));
    MEMCOORD_RETURN_IF_ERROR(large_.check_invariants().WithContext("large arena: "));
    std::uint64_t live_bytes = 0;
    live_.for_each([&](std::uintptr_t, const detail::Block* b) { live_bytes += b->size; });
    if (live_bytes != allocated_.current.load()) return Internal("allocated bytes disagree with live blocks");
    if (small_.reserved_bytes() + large_.reserved_bytes() != reserved_.current.load()) {
      return Internal("reserved bytes disagree with the arenas");
    }
    if (reserved_.current.load() < allocated_.current.load()) return Internal("reserved below allocated");
    return Status::Ok();
  }

  const std::string& name() const { return options_.name; }
  DeviceBackend& backend() const { return backend_; }

 private:
  detail::Arena& arena_of(const detail::Block* b) {
    return b->requested <= options_.small_block_limit ? small_ : large_;
  }

  Result<std::uint8_t> stream_index_of(StreamId stream) {
    for (std::size_t i = 0; i < stream_ids_.size(); ++i) {
      if (stream_ids_[i] == stream) return static_cast<std::uint8_t>(i);
    }
    if (stream_ids_.size() >= kMaxStreams) {
      return InvalidArgument(
          fmt::format("pool '{}': more than {} distinct streams; reuse streams or use one pool "
                      "per group of streams",
                      options_.name, kMaxStreams));
    }
    stream_ids_.push_back(stream);
    return static_cast<std::uint8_t>(stream_ids_.size() - 1);
  }

  std::uint64_t effective_limit() const {
    const std::uint64_t limit = limit_.load();
    return limit != 0 ? limit : std::numeric_limits<std::uint64_t>::max();
  }

  // A miss: grow the arena by a segment or by mapped chunks. `last_resort` first synchronizes busy streams
  // and frees everything cached in both arenas.
  Result<detail::Block*> grow(detail::Arena& arena, std::size_t size, std::uint8_t stream, bool last_resort) {
    if (!arena.mapping()) return grow_segments(arena, size, stream, last_resort);
    return grow_mapping(arena, size, stream, last_resort);
  }

  Result<detail::Block*> grow_segments(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                       bool last_resort) {
    const std::uint64_t limit = effective_limit();
    if (last_resort) release_everything_cached();
    const std::size_t segment_guess = size;  // the arena rounds up; the limit is checked after
    if (reserved_.current.load() + segment_guess > limit) return ResourceExhausted("the pool's limit");
    const std::uint64_t before = arena.reserved_bytes();
    Result<detail::Block*> b = arena.grow_segment(size, stream);
    if (!b.ok()) return b;
    account_reserved_growth(arena.reserved_bytes() - before);
    if (reserved_.current.load() > limit) {
      // The rounded segment crossed the limit: give it back and fail like a limit hit.
      detail::Block* block = *b;
      arena.release(block);
      release_cached(arena, arena.reserved_bytes() - before, true, nullptr, nullptr);
      return ResourceExhausted("the pool's limit");
    }
    return b;
  }

  // Mapping arenas: place the request where it needs the fewest new chunks, make room for those chunks
  // (pack_for), then map them.
  Result<detail::Block*> grow_mapping(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                      bool last_resort) {
    if (last_resort) release_everything_cached();
    MEMCOORD_ASSIGN_OR_RETURN(detail::Placement placement, arena.plan(size, stream));
    if (!last_resort) pack_for(arena, placement);
    const std::uint64_t limit = effective_limit();
    if (reserved_.current.load() + placement.map_bytes > limit) return ResourceExhausted("the pool's limit");
    const std::uint64_t before = arena.reserved_bytes();
    Result<detail::Block*> b = arena.map_and_take(placement, size, stream);
    if (!b.ok()) return b;
    account_reserved_growth(arena.reserved_bytes() - before);
    high_water_ = std::max(high_water_, reserved_.current.load());
    return b;
  }

  // Packing: unmapping idle free chunks so that the chunks a placement needs come from the cache instead of
  // from new memory. It costs driver calls (an unmap now, a map again if that memory is wanted back), so:
  //   under pressure (the limit, or a device nearly full) it takes idle chunks from both arenas, as many as
  //     the placement needs to fit;
  //   otherwise only at the pool's own high-water mark, and only within the request's arena (a loop over
  //     small and large sizes never trades chunks between the two), and (RemapPolicy::kUnderPressure) every
  //     byte moved raises the mark by 1/64 of a byte, up to 1/64 of it: a pool that keeps remapping grows a
  //     little instead, and its misses stop calling the driver;
  //   below the high-water mark, never: the pool grows.
  // The hole's neighbours stay untouched: unmapping them would merge holes under the placement.
  void pack_for(detail::Arena& arena, const detail::Placement& placement) {
    const std::uint64_t need = placement.map_bytes;
    if (need == 0) return;
    detail::Arena& other = &arena == &small_ ? large_ : small_;
    const std::uint64_t reserved = reserved_.current.load();
    const std::uint64_t pressure = std::max(over_limit(reserved + need), device_shortfall(need));
    if (pressure > 0) {
      std::uint64_t got = release_cached(arena, pressure, false, placement.hole->prev, placement.hole->next);
      if (got < pressure) release_cached(other, pressure - got, false, nullptr, nullptr);
      return;
    }
    const std::uint64_t mark = high_water_ + headroom_;
    if (reserved + need <= mark) return;
    const bool every_miss = options_.remap == RemapPolicy::kEveryMiss;
    const std::uint64_t want = reserved + need - mark;
    std::uint64_t got = release_cached(arena, want, false, placement.hole->prev, placement.hole->next);
    if (every_miss) {
      if (got < want) release_cached(other, want - got, false, nullptr, nullptr);
      return;
    }
    headroom_ = std::min(high_water_ / kHeadroomDivisor, headroom_ + got / kHeadroomDivisor);
  }

  // Bytes by which reserved memory `after` would exceed the limit (0 when within it).
  std::uint64_t over_limit(std::uint64_t after) const {
    const std::uint64_t limit = effective_limit();
    return after > limit ? after - limit : 0;
  }

  // Bytes the device lacks for mapping `need` more while keeping its reserve free (0 when it has them).
  // Asks the backend (cudaMemGetInfo on CUDA, ~5 us) only on a miss that is about to map anyway.
  std::uint64_t device_shortfall(std::uint64_t need) {
    const DeviceInfo info = backend_.device_info();
    const std::uint64_t reserve =
        options_.device_reserve_bytes != 0 ? options_.device_reserve_bytes : info.total_bytes / 32;
    const std::uint64_t wanted = need + reserve;
    return info.free_bytes >= wanted ? 0 : wanted - info.free_bytes;
  }

  void release_everything_cached() {
    release_cached(small_, std::numeric_limits<std::uint64_t>::max(), true, nullptr, nullptr);
    release_cached(large_, std::numeric_limits<std::uint64_t>::max(), true, nullptr, nullptr);
  }

  std::uint64_t release_cached(detail::Arena& arena, std::uint64_t want, bool synchronize,
                               const detail::Block* keep_a, const detail::Block* keep_b) {
    const std::uint64_t before = arena.reserved_bytes();
    const std::uint64_t released = arena.release_free_memory(want, synchronize, keep_a, keep_b);
    reserved_.sub(before - arena.reserved_bytes());
    sync_backend_counters();
    return released;
  }

  void account_reserved_growth(std::uint64_t bytes) {
    reserved_.add(bytes);
    sync_backend_counters();
  }

  void sync_backend_counters() {
    backend_allocations_.store(small_.backend_allocations() + large_.backend_allocations());
    backend_frees_.store(small_.backend_frees() + large_.backend_frees());
    backend_allocated_bytes_.store(small_.backend_allocated_bytes() + large_.backend_allocated_bytes());
    backend_released_bytes_.store(small_.backend_released_bytes() + large_.backend_released_bytes());
  }

  TrimResult trim_locked(std::uint64_t target) {
    TrimResult result;
    const std::uint64_t before = reserved_.current.load();
    if (before > target) {
      const std::uint64_t want = before - target;
      std::uint64_t got = release_cached(large_, want, true, nullptr, nullptr);
      if (got < want) release_cached(small_, want - got, true, nullptr, nullptr);
      if (target == 0) {
        large_.release_empty_segments();
        small_.release_empty_segments();
      }
    }
    result.released_bytes = before - reserved_.current.load();
    result.reserved_after_bytes = reserved_.current.load();
    trims_.add(1);
    trimmed_bytes_.add(result.released_bytes);
    update_cache_stats();
    return result;
  }

  void update_cache_stats() {
    largest_free_.store(std::max(small_.largest_free(), large_.largest_free()));
    free_bytes_.store(small_.free_bytes() + large_.free_bytes());
    live_blocks_.store(live_.size());
  }

  Status oom_status(std::size_t bytes, StreamId stream, const Status& cause) const {
    std::string tags;
    std::vector<TagUsage> usage = tag_usage();
    for (std::size_t i = 0; i < usage.size() && i < 5; ++i) {
      tags += fmt::format("{}{} {}", i == 0 ? "" : ", ", usage[i].tag, FormatBytes(usage[i].live_bytes));
    }
    const std::uint64_t limit = limit_.load();
    return ResourceExhausted(
        fmt::format("pool '{}' on {}: out of memory allocating {} ({} bytes) on stream {:#x}: limit {}, "
                    "allocated {}, reserved {}, "
                    "largest free block {}, device free {}; top tags: {}; cause: {}",
                    options_.name, backend_.kind(), FormatBytes(bytes), bytes, stream,
                    limit == 0 ? std::string("none") : FormatBytes(limit),
                    FormatBytes(allocated_.current.load()), FormatBytes(reserved_.current.load()),
                    FormatBytes(largest_free_.load()), FormatBytes(backend_.device_info().free_bytes),
                    tags.empty() ? std::string("none") : tags, cause.message()));
  }

  DeviceBackend& backend_;
  const PoolOptions options_;

  mutable std::mutex mu_;  // guards everything below except the atomics, which it only serializes writes to
  std::vector<StreamId> stream_ids_;  // pool stream index -> backend stream
  detail::BlockSlab slab_;
  detail::PointerMap live_;
  detail::Arena small_;
  detail::Arena large_;
  std::uint64_t high_water_ = 0;  // most reserved bytes ever (mapping arenas grow freely below it)
  // A miss may grow the pool by this much beyond the high-water mark without packing (see pack_for).
  std::uint64_t headroom_ = 0;
  OomHook oom_hook_;
  TraceRecorder* recorder_ = nullptr;
  std::array<std::string, kMaxTags> tag_names_;

  Gauge allocated_, requested_, reserved_, active_;
  Counter live_blocks_, allocations_, cache_hits_, backend_allocations_, backend_frees_,
      backend_allocated_bytes_, backend_released_bytes_, trims_, trimmed_bytes_, ooms_, largest_free_,
      free_bytes_, limit_;
  std::atomic<std::size_t> tag_count_{0};
  std::array<Counter, kMaxTags> tag_bytes_;
  std::array<Counter, kMaxTags> tag_blocks_;

  friend class CachingPool;
};

CachingPool::CachingPool(DeviceBackend& backend, PoolOptions options)
    : impl_(std::make_unique<Impl>(backend, std::move(options))) {}
CachingPool::~CachingPool() = default;

Result<void*> CachingPool::allocate(std::size_t bytes, StreamId stream, TagId tag) {
  return impl_->allocate(bytes, stream, tag);
}
Status CachingPool::deallocate(void* ptr) { return impl_->deallocate(ptr); }
Status CachingPool::record_stream(void* ptr, StreamId stream) { return impl_->record_stream(ptr, stream); }
TrimResult CachingPool::trim(std::uint64_t target_bytes) { return impl_->trim(target_bytes); }
Status CachingPool::set_limit(std::uint64_t limit_bytes) { return impl_->set_limit(limit_bytes); }
void CachingPool::set_oom_hook(OomHook hook) { impl_->set_oom_hook(std::move(hook)); }
void CachingPool::set_recorder(TraceRecorder* recorder) { impl_->set_recorder(recorder); }
Result<TagId> CachingPool::tag(std::string_view name) { return impl_->tag(name); }
PoolStats CachingPool::stats() const { return impl_->stats(); }
std::vector<TagUsage> CachingPool::tag_usage() const { return impl_->tag_usage(); }
Result<std::size_t> CachingPool::block_size(const void* ptr) const { return impl_->block_size(ptr); }
const std::string& CachingPool::name() const { return impl_->name(); }
DeviceBackend& CachingPool::backend() const { return impl_->backend(); }
Status CachingPool::check_invariants() const { return impl_->check_invariants(); }

}  // namespace memcoord
