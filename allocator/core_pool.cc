#include "allocator/core_pool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "allocator/detail/small_growth_fence.h"

namespace memcoord {
namespace {

constexpr std::size_t kAlignment = 512;
constexpr std::size_t kMaxStreams = 64;
// RemapPolicy::kUnderPressure: the headroom a pool earns from remapping at its high-water mark, as a
// fraction of the bytes remapped and at most that fraction of the mark, once it has remapped more than
// 1/kFreeRemapDivisor of the mark there in all (before that, every miss at the mark packs what it needs).
constexpr std::uint64_t kHeadroomDivisor = 64;
constexpr std::uint64_t kFreeRemapDivisor = 16;
// A free of a block of at least a chunk records a marker on its stream when the stream's newest is older
// than PoolOptions::large_free_marker_interval_us while the pool grows (a miss within
// free_marker_growing_window_ms), and kSteadyMarkerSpacing times older otherwise. Packing at the next miss
// can then wait for the work up to such a marker instead of growing (a block freed after a stream's newest
// marker could only be waited for by draining the queue). A free that records none leaves the stream
// uncovered, and the pool's next call on that stream after the interval records the marker: the last frees
// of a burst (the gradients zero_grad frees at a step's end) are otherwise covered only by the next miss's
// own marker, and that miss grows the pool instead of packing them. Bounded: by default a thousand events a
// second per stream (~2 us each) while growing, a hundred in a steady loop (0.02% of a thread), plus one
// clock read per large free and per call on an uncovered stream.
constexpr std::uint64_t kSteadyMarkerSpacing = 10;

// `bytes` rounded up to a multiple of `chunk`, at least one chunk (`bytes` is bounded by an address range).
std::size_t ChunkMultiple(std::uint64_t bytes, std::size_t chunk) {
  return static_cast<std::size_t>(std::max<std::uint64_t>((bytes + chunk - 1) / chunk * chunk, chunk));
}

}  // namespace

CorePool::CorePool(DeviceBackend& backend, PoolOptions options)
    : backend_(backend),
      options_(std::move(options)),
      marks_(backend, stream_ids_),
      device_free_(options_.device_reserve_bytes),
      small_(backend, arena_config(/*small=*/true), slab_, stream_ids_, &marks_),
      large_(backend, arena_config(/*small=*/false), slab_, stream_ids_, &marks_) {
  stream_ids_.reserve(kMaxStreams);
  stream_ids_.push_back(kDefaultStream);
}

CorePool::~CorePool() {
  if (live_.size() > 0) {
    spdlog::warn("pool '{}' destroyed with {} live blocks ({} bytes): released with the pool", options_.name,
                 live_.size(), allocated_bytes_);
  }
  for (StreamId s : stream_ids_) (void)backend_.synchronize(s);
}

detail::ArenaConfig CorePool::arena_config(bool small) const {
  detail::ArenaConfig c;
  const bool can_map = backend_.chunk_bytes() > 0;
  c.mapping = options_.growth == PoolGrowth::kMapping || (options_.growth == PoolGrowth::kAuto && can_map);
  c.chunk_bytes = can_map ? backend_.chunk_bytes() : (2 << 20);
  std::uint64_t range = options_.address_range_bytes;
  if (range == 0) range = 2 * backend_.device_info().total_bytes;
  c.range_bytes =
      std::max<std::uint64_t>((range + c.chunk_bytes - 1) / c.chunk_bytes * c.chunk_bytes, c.chunk_bytes);
  c.small = small;
  // A unit larger than the address range could never be mapped whole: the range bounds it (and keeps the
  // rounding below from overflowing on an absurd option).
  std::uint64_t unit = small ? c.chunk_bytes
                             : (options_.large_map_unit_bytes != 0 ? options_.large_map_unit_bytes
                                                                   : PoolOptions::kDefaultLargeMapUnit);
  unit = std::min<std::uint64_t>(unit, c.range_bytes);
  c.map_unit_bytes = ChunkMultiple(unit, c.chunk_bytes);
  if (!small) {
    const std::uint64_t step = options_.large_grow_step_bytes != 0 ? options_.large_grow_step_bytes
                                                                   : PoolOptions::kDefaultLargeGrowStep;
    c.grow_step_bytes = ChunkMultiple(std::min<std::uint64_t>(step, c.range_bytes), c.chunk_bytes);
  }
  c.merge_unit_ends = !small && options_.merge_unit_ends;
  c.grow_to_unit_end = !small && options_.grow_to_unit_end;
  return c;
}

// No device has a petabyte; larger requests are bugs (negative sizes cast to size_t land there).
Status CorePool::CheckSize(std::string_view pool, std::size_t bytes) {
  if (bytes == 0) {
    return InvalidArgument(fmt::format("pool '{}': allocation of 0 bytes; sizes must be positive", pool));
  }
  if (bytes > kMaxBytes) {
    return InvalidArgument(fmt::format(
        "pool '{}': allocation of {} bytes is absurd (over 1 PiB; a negative size?)", pool, bytes));
  }
  return Status::Ok();
}

bool CorePool::try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
  if (!ValidSize(bytes)) {
    error = CheckSize(options_.name, bytes);
    return false;
  }
  const std::size_t size = (bytes + kAlignment - 1) & ~(kAlignment - 1);
  std::uint8_t stream_index = 0;
  if (!stream_index_of(stream, stream_index, error)) return false;
  mark_if_uncovered(stream_index);
  detail::Block* b = take_or_grow(bytes, size, stream_index, error);
  if (b == nullptr) return false;
  hand_out(b, bytes, stream, tag, out);
  return true;
}

bool CorePool::try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
  if (!ValidSize(bytes)) return false;
  std::uint8_t stream_index = 0;
  if (!known_stream_index(stream, stream_index)) return false;
  // A deferred marker is a CUDA call, which this path never makes: the caller's full path records it.
  if (marker_due(stream_index)) return false;
  const std::size_t size = (bytes + kAlignment - 1) & ~(kAlignment - 1);
  detail::Arena& arena = bytes <= options_.small_block_limit ? small_ : large_;
  detail::Block* b = arena.take_cached_without_waits(size, stream_index);
  if (b == nullptr) return false;
  cache_hits_.add(1);
  hand_out(b, bytes, stream, tag, out);
  return true;
}

void CorePool::hand_out(detail::Block* b, std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
  b->requested = bytes;
  b->tag = tag;
  live_.insert(b->address, b);
  allocated_bytes_ += b->size;
  out = Allocation{reinterpret_cast<void*>(b->address), b->size, bytes, stream, tag};
}

// A hit from the cache, else growth, else the last-resort pass (see the header).
detail::Block* CorePool::take_or_grow(std::size_t bytes, std::size_t size, std::uint8_t stream,
                                      Status& error) {
  detail::Arena& arena = bytes <= options_.small_block_limit ? small_ : large_;
  detail::Block* b = arena.take_cached(size, stream);
  if (b != nullptr) {
    cache_hits_.add(1);
    return b;
  }
  if (&arena == &small_ && detail::SmallGrowthFence::RefuseGrowth()) {
    // The thread cache above returns every thread's cached blocks and asks again (small_growth_fence.h).
    error = Unavailable(
        fmt::format("pool '{}': small-block growth held back for the thread caches' blocks", options_.name));
    return nullptr;
  }
  last_miss_ = std::chrono::steady_clock::now();
  Result<detail::Block*> grown = grow(arena, size, stream, /*last_resort=*/false);
  // The last-resort pass synchronizes streams and unmaps: never while captures are underway (see do_trim).
  if (!grown.ok() && !captures_underway_.load(std::memory_order_acquire)) {
    device_free_.invalidate();  // the device had less than the reading said: read it again next time
    grown = grow(arena, size, stream, /*last_resort=*/true);
  }
  misses_.add(1);
  miss_ns_.add(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - last_miss_)
          .count()));
  if (!grown.ok()) {
    error = ResourceExhausted(grown.status().message());
    return nullptr;
  }
  return *grown;
}

bool CorePool::try_deallocate(void* ptr, Allocation& freed, Status& error) {
  if (ptr == nullptr) {
    error = InvalidArgument(fmt::format("pool '{}': free of a null pointer", options_.name));
    return false;
  }
  detail::Block* b = live_.erase(reinterpret_cast<std::uintptr_t>(ptr));
  if (b == nullptr) {
    error =
        NotFound(fmt::format("pool '{}': free of {} which is not a live block of this pool (never allocated "
                             "here, or already freed)",
                             options_.name, ptr));
    return false;
  }
  if (!unindexed_waits_.empty()) wait_for_unindexed_streams(reinterpret_cast<std::uintptr_t>(ptr));
  allocated_bytes_ -= b->size;
  freed = Allocation{ptr, b->size, b->requested, stream_ids_[b->stream], b->tag};
  const std::uint8_t stream = b->stream;
  arena_of(b).release(b);
  mark_large_free(freed.size, stream);
  return true;
}

Status CorePool::do_record_stream(void* ptr, StreamId stream) {
  detail::Block* b = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (b == nullptr) {
    return NotFound(
        fmt::format("pool '{}': record_stream on {} which is not a live block", options_.name, ptr));
  }
  std::uint8_t index = 0;
  Status error;
  if (!stream_index_of(stream, index, error)) {
    // No bit for this stream in the wait mask: the free waits for it on the host instead.
    std::vector<StreamId>& streams = unindexed_waits_[reinterpret_cast<std::uintptr_t>(ptr)];
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) streams.push_back(stream);
    if (!warned_unindexed_) {
      warned_unindexed_ = true;
      spdlog::warn(
          "pool '{}': record_stream on a stream past the first {} it has seen: the blocks' frees "
          "will synchronize such streams ({})",
          options_.name, kMaxStreams, error.message());
    }
    return Status::Ok();
  }
  if (index != b->stream) b->wait_mask |= 1ULL << index;
  return Status::Ok();
}

void CorePool::wait_for_unindexed_streams(std::uintptr_t key) {
  auto it = unindexed_waits_.find(key);
  if (it == unindexed_waits_.end()) return;
  for (StreamId stream : it->second) {
    if (Status synced = backend_.synchronize(stream); !synced.ok()) {
      spdlog::error("pool '{}': synchronizing stream {:#x} before freeing {:#x}: {}", options_.name, stream,
                    key, synced.ToString());
    }
  }
  unindexed_waits_.erase(it);
}

TrimResult CorePool::do_trim(std::uint64_t target) {
  const auto start = std::chrono::steady_clock::now();
  TrimResult result;
  const std::uint64_t before = reserved_.current.load();
  // While captures are underway a synchronize (settling streams) or an event query would invalidate one,
  // and a graph's private pool must keep its blocks mapped for replays: release nothing.
  const bool capturing = captures_underway_.load(std::memory_order_acquire);
  if (capturing && !trim_skip_logged_) {
    trim_skip_logged_ = true;
    spdlog::debug("pool '{}': trim released nothing: a CUDA graph capture is underway (logged once)",
                  options_.name);
  }
  if (before > target && !capturing) {
    const std::uint64_t want = before - target;
    std::uint64_t got = release_cached(large_, want, detail::ReleaseWait::kSettle, nullptr, nullptr);
    if (got < want) release_cached(small_, want - got, detail::ReleaseWait::kSettle, nullptr, nullptr);
    if (target == 0) {
      large_.release_empty_segments();
      small_.release_empty_segments();
    }
  }
  result.released_bytes = before - reserved_.current.load();
  result.reserved_after_bytes = reserved_.current.load();
  trims_.add(1);
  trimmed_bytes_.add(result.released_bytes);
  result.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void CorePool::fill_stats(PoolStats& s) const {
  s.reserved_bytes = reserved_.current.load();
  s.peak_reserved_bytes = reserved_.peak.load();
  s.cache_hits = cache_hits_.load();
  s.backend_allocations = backend_allocations_.load();
  s.backend_frees = backend_frees_.load();
  s.backend_allocated_bytes = backend_allocated_bytes_.load();
  s.backend_released_bytes = backend_released_bytes_.load();
  s.pack_waits = pack_waits_.load();
  s.pack_stream_syncs = pack_stream_syncs_.load();
  s.pack_drains = pack_drains_.load();
  s.markers = markers_.load();
  s.deferred_markers = deferred_markers_.load();
  s.pack_wait_ns = pack_wait_ns_.load();
  s.misses = misses_.load();
  s.miss_ns = miss_ns_.load();
  s.maps_chunks = large_.mapping();
  s.trims = trims_.load();
  s.trimmed_bytes = trimmed_bytes_.load();
}

void CorePool::fill_cache_stats(PoolStats& s) const {
  s.largest_free_bytes = std::max(small_.largest_free(), large_.largest_free());
  const std::uint64_t free_total = small_.free_bytes() + large_.free_bytes();
  s.fragmentation = free_total == 0
                        ? 0.0
                        : 1.0 - static_cast<double>(s.largest_free_bytes) / static_cast<double>(free_total);
}

Result<std::size_t> CorePool::block_size(const void* ptr) const {
  const detail::Block* b = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (b == nullptr) return NotFound(fmt::format("{} is not a live block of pool '{}'", ptr, options_.name));
  return b->size;
}

PoolSnapshot CorePool::snapshot() const {
  PoolSnapshot out;
  small_.snapshot(out.segments);
  large_.snapshot(out.segments);
  return out;
}

Status CorePool::check_invariants() const {
  MEMCOORD_RETURN_IF_ERROR(small_.check_invariants().WithContext("small arena: "));
  MEMCOORD_RETURN_IF_ERROR(large_.check_invariants().WithContext("large arena: "));
  std::uint64_t live_bytes = 0;
  live_.for_each([&](std::uintptr_t, const detail::Block* b) { live_bytes += b->size; });
  if (live_bytes != allocated_bytes_) return Internal("allocated bytes disagree with live blocks");
  if (small_.reserved_bytes() + large_.reserved_bytes() != reserved_.current.load()) {
    return Internal("reserved bytes disagree with the arenas");
  }
  if (reserved_.current.load() < allocated_bytes_) return Internal("reserved below allocated");
  return Status::Ok();
}

detail::Arena& CorePool::arena_of(const detail::Block* b) {
  return b->requested <= options_.small_block_limit ? small_ : large_;
}

bool CorePool::known_stream_index(StreamId stream, std::uint8_t& index) const {
  for (std::size_t i = 0; i < stream_ids_.size(); ++i) {
    if (stream_ids_[i] == stream) {
      index = static_cast<std::uint8_t>(i);
      return true;
    }
  }
  return false;
}

bool CorePool::stream_index_of(StreamId stream, std::uint8_t& index, Status& error) {
  if (known_stream_index(stream, index)) return true;
  if (stream_ids_.size() >= kMaxStreams) {
    error =
        InvalidArgument(fmt::format("pool '{}': more than {} distinct streams; reuse streams or use one pool "
                                    "per group of streams",
                                    options_.name, kMaxStreams));
    return false;
  }
  stream_ids_.push_back(stream);
  index = static_cast<std::uint8_t>(stream_ids_.size() - 1);
  return true;
}

// A miss: grow the arena by a segment or by mapped chunks. `last_resort` first synchronizes busy streams
// and frees everything cached in both arenas.
Result<detail::Block*> CorePool::grow(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                      bool last_resort) {
  if (!arena.mapping()) return grow_segments(arena, size, stream, last_resort);
  return grow_mapping(arena, size, stream, last_resort);
}

// A segment the backend refuses (its budget, the device) fails the miss; nothing was allocated.
Result<detail::Block*> CorePool::grow_segments(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                               bool last_resort) {
  if (last_resort) release_everything_cached();
  const std::uint64_t before = arena.reserved_bytes();
  Result<detail::Block*> b = arena.grow_segment(size, stream);
  if (!b.ok()) return b;
  account_reserved_growth(arena.reserved_bytes() - before);
  return b;
}

// Mapping arenas: place the request where it needs the fewest new chunks, make room for those chunks
// (pack_for), then map them (which a budget below may refuse: nothing then changes).
Result<detail::Block*> CorePool::grow_mapping(detail::Arena& arena, std::size_t size, std::uint8_t stream,
                                              bool last_resort) {
  if (last_resort) release_everything_cached();
  MEMCOORD_ASSIGN_OR_RETURN(detail::Placement placement, arena.plan(size, stream));
  if (!last_resort) widen_to_unit_end(arena, placement);
  // A marker per miss (an event, ~2 us beside the ~40 us a unit costs the driver): blocks freed before it
  // can later be waited for up to here instead of to the stream's end (stream_marks.h). Pools that must
  // not wait (capture pools) record none.
  // During a CUDA graph capture on the device an event or stream query invalidates the capture: no marker,
  // no packing (which queries); the pool grows.
  const bool capturing = captures_underway_.load(std::memory_order_acquire);
  if (options_.pack_waits_for_streams && !capturing) {
    marks_.record(stream, last_miss_);
    count_markers();
  }
  if (!last_resort && !capturing) pack_for(arena, placement, stream);
  const std::uint64_t before = arena.reserved_bytes();
  Result<detail::Block*> b = arena.map_and_take(placement, size, stream);
  if (!b.ok()) return b;
  account_reserved_growth(arena.reserved_bytes() - before);
  high_water_ = std::max(high_water_, reserved_.current.load());
  return b;
}

// PoolOptions::grow_to_unit_end. The slack is a convenience: never where it would press on a budget or on the
// device's free memory (the exact shortfall then goes on alone, as without the option).
void CorePool::widen_to_unit_end(detail::Arena& arena, detail::Placement& placement) {
  detail::Placement wide = placement;
  arena.extend_to_unit_end(wide);
  if (wide.map_bytes == placement.map_bytes) return;
  if (backend_.bytes_over_budget(wide.map_bytes) > 0 || device_shortfall(wide.map_bytes) > 0) return;
  placement = wide;
}

void CorePool::mark_large_free(std::size_t bytes, std::uint8_t stream) {
  if (!options_.pack_waits_for_streams || !large_.mapping()) return;
  if (bytes < large_.chunk_bytes()) {
    mark_if_uncovered(stream);
    return;
  }
  if (captures_underway_.load(std::memory_order_acquire)) return;
  const auto now = std::chrono::steady_clock::now();
  marks_.record_if_older(stream, now, marker_interval(now));
  count_markers();
}

// Only streams a large free left uncovered (never set without pack_waits_for_streams and a mapping arena).
void CorePool::mark_if_uncovered(std::uint8_t stream) {
  if (!marks_.uncovered(stream) || captures_underway_.load(std::memory_order_acquire)) return;
  const auto now = std::chrono::steady_clock::now();
  const std::uint64_t before = marks_.recorded_total();
  marks_.record_if_older(stream, now, marker_interval(now));
  deferred_markers_.add(marks_.recorded_total() - before);
  count_markers();
}

bool CorePool::marker_due(std::uint8_t stream) const {
  if (!marks_.uncovered(stream) || captures_underway_.load(std::memory_order_acquire)) return false;
  const auto now = std::chrono::steady_clock::now();
  return marks_.owed_now(stream, now, marker_interval(now));
}

std::chrono::microseconds CorePool::marker_interval(std::chrono::steady_clock::time_point now) const {
  const bool growing = now - last_miss_ <= std::chrono::milliseconds(options_.free_marker_growing_window_ms);
  return std::chrono::microseconds(std::uint64_t{options_.large_free_marker_interval_us} *
                                   (growing ? 1 : kSteadyMarkerSpacing));
}

// Packing: unmapping free chunks so that the chunks a placement needs come from the cache instead of from
// new memory. Idle chunks go first. A chunk whose last user, the miss's own stream, still has queued work
// is taken after the host waits for it (PoolOptions::pack_waits_for_streams); chunks of other busy streams
// are left. It costs driver calls (an unmap now, a map again if that memory is wanted back), so:
//   under pressure (the backend's budget, or a device nearly full) it takes chunks from both arenas, as
//     many as the placement needs to fit, waiting up to the chunk's marker or, with none, for the stream;
//   otherwise only at the pool's own high-water mark, waiting only for a marker older than the one this
//     miss recorded, or for none with PoolOptions::pack_waits_at_mark off (a wait for the miss's own marker
//     would drain the GPU's queue: the pool grows instead, unless it would grow by kDrainShortfallUnits
//     units or more: drain_for_large_shortfall, which waits either way), from the request's
//     arena first and then (RemapPolicy::kUnderPressure: until the pool has moved 1/kFreeRemapDivisor of
//     the mark this way in all) from the other one: idle small-block chunks can hold a large miss at the
//     peak, and the other way round. Past that 1/16, every byte moved raises the mark by 1/64 of a byte, up
//     to 1/64 of it: a pool that keeps remapping grows a little instead and its misses stop calling the
//     driver. A loop whose small and large requests take each other's chunks stops trading them at the first
//     chunk that would come back at an unchanged mark (trade_comes_back). Before
//     it a miss at the mark takes all it needs: packing that little while a pool grows to its peak costs a
//     few driver calls, and headroom earned from the first moves let the peak rise by what they earned
//     (replays of bench/traces/alternating_threads: one 2 MiB chunk above expandable segments' peak with
//     headroom from the first byte and no other-arena packing, as on the GPU; at it with this rule, a chunk
//     above it again once chunks were not taken back, and 4 MiB below it since Arena::fit);
//   below the high-water mark, never: the pool grows.
// The hole's neighbours stay untouched: unmapping them would merge holes under the placement.
void CorePool::pack_for(detail::Arena& arena, const detail::Placement& placement, std::uint8_t stream) {
  const std::uint64_t need = placement.map_bytes;
  if (need == 0) return;
  detail::Arena& other = &arena == &small_ ? large_ : small_;
  const std::uint64_t reserved = reserved_.current.load();
  const std::uint64_t pressure = std::max(backend_.bytes_over_budget(need), device_shortfall(need));
  // Under pressure a drain beats running out; at the mark, growing a little beats draining the GPU's queue.
  const bool waits = options_.pack_waits_for_streams;
  if (pressure > 0) {
    const detail::ReleaseWait wait =
        waits ? detail::ReleaseWait::kWaitForStream : detail::ReleaseWait::kIdleOnly;
    std::uint64_t got =
        release_cached(arena, pressure, wait, placement.hole->prev, placement.hole->next, stream);
    if (got < pressure) release_cached(other, pressure - got, wait, nullptr, nullptr, stream);
    return;
  }
  // PoolOptions::pack_waits_at_mark off: only chunks whose work is done; drains (below) still wait.
  const detail::ReleaseWait wait = waits && options_.pack_waits_at_mark
                                       ? detail::ReleaseWait::kWaitForOlderMarker
                                       : detail::ReleaseWait::kIdleOnly;
  const std::uint64_t mark = high_water_ + headroom_;
  if (reserved + need <= mark) return;
  const std::uint64_t want = reserved + need - mark;
  std::uint64_t got = release_cached(arena, want, wait, placement.hole->prev, placement.hole->next, stream);
  got += drain_for_large_shortfall(arena, placement, want - std::min(want, got), stream);
  const bool every_miss = options_.remap == RemapPolicy::kEveryMiss;
  const bool few_moves_yet = moved_at_mark_ <= high_water_ / kFreeRemapDivisor;
  const bool to_small = &arena == &small_;
  if (got < want && (every_miss || (few_moves_yet && !trade_comes_back(to_small)))) {
    const std::uint64_t taken = release_cached(other, want - got, wait, nullptr, nullptr, stream);
    if (taken > 0) last_trade_ = Trade{to_small, high_water_};
    got += taken;
  }
  if (every_miss) return;
  moved_at_mark_ += got;
  if (moved_at_mark_ > high_water_ / kFreeRemapDivisor) {
    headroom_ = std::min(high_water_ / kHeadroomDivisor, headroom_ + got / kHeadroomDivisor);
  }
}

// Memory that packing at the mark moved from one arena to the other, taken back with no new high-water mark
// in between, is a loop whose small and large requests peak at different moments of each round: it would move
// the same chunks every round until the 1/16 above (ResNet-50 on an H100: three units each way a step for the
// 16 steps measured, at times with a host wait of 0.5-3.5 ms for a marker). Such a miss takes nothing from
// the other arena and the pool grows instead: then each arena keeps what the loop needs, and the loop stops
// calling the driver. What that costs, on replays of the traces recorded on the GPUs under memcoord (with
// Arena::fit's rule): the alternating GPT-2/ResNet-50 pair +6 MiB (still 4 below expandable segments' model),
// ResNet-50 -4 MiB at --gpu-lag 0 and 1000 and +2 at 200 (without the rule it still traded at 9/16 of the
// trace), GPT-2 fp32 and the Llama unchanged; when it came (12da257, before Arena::fit), +2, -4 to -6,
// unchanged. On perturbed copies of bench/traces, see RemapPolicy.
bool CorePool::trade_comes_back(bool to_small) const {
  return last_trade_ && last_trade_->to_small != to_small && last_trade_->high_water == high_water_;
}

// At the mark, when what older markers proved done still leaves the pool to grow by at least
// kDrainShortfallUnits units and this stream's own free units hold that much, the pool waits for the miss's
// own marker (all the work queued on the stream before the miss) and packs them. Without this, the footprint
// depends on where the large frees' markers happened to fall: replays of bench/traces at --gpu-lag 200 with
// no marker at frees peak 456-1,466 MiB higher on alternating, gpt2_fp32 and varlen; with it, alternating
// and gpt2_fp32 peak as the replays that record one at every free do, varlen 52 MiB above them. Smaller
// shortfalls grow instead (a drain costs the GPU's queue; growing a unit or three costs ~50 us a unit).
// Returns the bytes released.
std::uint64_t CorePool::drain_for_large_shortfall(detail::Arena& arena, const detail::Placement& placement,
                                                  std::uint64_t shortfall, std::uint8_t stream) {
  const std::uint64_t threshold = kDrainShortfallUnits * arena.map_unit_bytes();
  if (!options_.pack_waits_for_streams || shortfall < threshold) return 0;
  if (arena.own_stream_free_units(stream, placement.hole->prev, placement.hole->next) < threshold) return 0;
  pack_drains_.add(1);
  return release_cached(arena, shortfall, detail::ReleaseWait::kWaitForStream, placement.hole->prev,
                        placement.hole->next, stream);
}

// Bytes the device lacks for mapping `need` more while keeping its reserve free (0 when it has them). Only a
// miss that is about to map asks, and it asks the backend (cudaMemGetInfo on CUDA) only when the last reading
// is old or the device is near its reserve (device_free_reading.h).
std::uint64_t CorePool::device_shortfall(std::uint64_t need) {
  return device_free_.shortfall(backend_, need, reserved_.current.load(), last_miss_);
}

void CorePool::release_everything_cached() {
  release_cached(small_, std::numeric_limits<std::uint64_t>::max(), detail::ReleaseWait::kSettle, nullptr,
                 nullptr);
  release_cached(large_, std::numeric_limits<std::uint64_t>::max(), detail::ReleaseWait::kSettle, nullptr,
                 nullptr);
}

std::uint64_t CorePool::release_cached(detail::Arena& arena, std::uint64_t want, detail::ReleaseWait wait,
                                       const detail::Block* keep_a, const detail::Block* keep_b,
                                       std::uint8_t wait_stream) {
  const std::uint64_t before = arena.reserved_bytes();
  const std::uint64_t released = arena.release_free_memory(want, wait, keep_a, keep_b, wait_stream);
  reserved_.sub(before - arena.reserved_bytes());
  sync_backend_counters();
  return released;
}

void CorePool::count_markers() { markers_.store(marks_.recorded_total()); }

void CorePool::account_reserved_growth(std::uint64_t bytes) {
  reserved_.add(bytes);
  sync_backend_counters();
}

void CorePool::sync_backend_counters() {
  backend_allocations_.store(small_.backend_allocations() + large_.backend_allocations());
  backend_frees_.store(small_.backend_frees() + large_.backend_frees());
  backend_allocated_bytes_.store(small_.backend_allocated_bytes() + large_.backend_allocated_bytes());
  backend_released_bytes_.store(small_.backend_released_bytes() + large_.backend_released_bytes());
  pack_waits_.store(small_.pack_waits() + large_.pack_waits());
  pack_stream_syncs_.store(small_.pack_stream_syncs() + large_.pack_stream_syncs());
  pack_wait_ns_.store(small_.pack_wait_ns() + large_.pack_wait_ns());
}

}  // namespace memcoord
