#include "allocator/detail/arena.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <limits>

#include "allocator/detail/map_units.h"

namespace memcoord::detail {
namespace {

constexpr std::size_t kMinSplitBytes = 512;
constexpr std::size_t kSmallSegmentBytes = 2 << 20;
constexpr std::size_t kLargeSegmentBytes = 20 << 20;  // segment for requests below kLargeRoundThreshold
constexpr std::size_t kLargeRoundThreshold = 10 << 20;
constexpr std::size_t kSegmentRound = 2 << 20;

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Arena::Arena(DeviceBackend& backend, ArenaConfig config, BlockSlab& slab,
             const std::vector<StreamId>& stream_ids, StreamMarks* marks)
    : backend_(backend), config_(config), slab_(slab), stream_ids_(stream_ids), marks_(marks) {}

Arena::~Arena() {
  for (Segment& seg : segments_) {
    if (!seg.live) continue;
    if (config_.mapping) {
      // Mapped memory is everything between holes; unmap each such run.
      std::uintptr_t run_start = 0;
      bool in_run = false;
      for (Block* b = seg.first; b != nullptr;) {
        Block* next = b->next;
        if (b->state != BlockState::kHole && !in_run) {
          run_start = b->address;
          in_run = true;
        }
        if (b->state == BlockState::kHole && in_run) {
          backend_.unmap(run_start, b->address - run_start);
          in_run = false;
        }
        if (next == nullptr && in_run) backend_.unmap(run_start, b->end() - run_start);
        slab_.recycle(b);
        b = next;
      }
      backend_.free_address(seg.base, seg.size);
    } else {
      for (Block* b = seg.first; b != nullptr;) {
        Block* next = b->next;
        slab_.recycle(b);
        b = next;
      }
      backend_.release(reinterpret_cast<void*>(seg.base), seg.size);
    }
    seg.live = false;
  }
}

void Arena::add_free_indexes(std::uint8_t stream) {
  while (free_.size() <= stream) free_.push_back(std::make_unique<FreeIndex>());
}

void Arena::insert_free(Block* b) {
  b->state = BlockState::kFree;
  free_of(b->stream).insert(b);
}

void Arena::remove_free(Block* b) { free_of(b->stream).remove(b); }

void Arena::add_hole(Block* b) {
  b->state = BlockState::kHole;
  b->stream = 0;
  b->wait_mask = 0;
  b->free_stamp = 0;
  b->bin_prev = nullptr;
  b->bin_next = holes_;
  if (holes_ != nullptr) holes_->bin_prev = b;
  holes_ = b;
}

void Arena::remove_hole(Block* b) {
  if (b->bin_prev != nullptr) {
    b->bin_prev->bin_next = b->bin_next;
  } else {
    holes_ = b->bin_next;
  }
  if (b->bin_next != nullptr) b->bin_next->bin_prev = b->bin_prev;
  b->bin_prev = b->bin_next = nullptr;
}

Block* Arena::split_front(Block* b, std::size_t size) {
  Block* rest = slab_.make();
  rest->address = b->address + size;
  rest->size = b->size - size;
  rest->prev = b;
  rest->next = b->next;
  if (b->next != nullptr) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  rest->segment = b->segment;
  rest->stream = b->stream;
  rest->wait_mask = b->wait_mask;
  rest->free_stamp = b->free_stamp;
  rest->state = b->state;
  return rest;
}

void Arena::unlink(Block* b) {
  if (b->prev != nullptr) b->prev->next = b->next;
  if (b->next != nullptr) b->next->prev = b->prev;
  if (segments_[b->segment].first == b) segments_[b->segment].first = b->next;
  slab_.recycle(b);
}

Block* Arena::merge_free_neighbours(Block* b) {
  Block* prev = b->prev;
  if (prev != nullptr && prev->state == BlockState::kFree && prev->stream == b->stream) {
    remove_free(prev);
    prev->size += b->size;
    prev->wait_mask |= b->wait_mask;
    prev->free_stamp = std::max(prev->free_stamp, b->free_stamp);
    unlink(b);
    b = prev;
  }
  Block* next = b->next;
  if (next != nullptr && next->state == BlockState::kFree && next->stream == b->stream) {
    remove_free(next);
    b->size += next->size;
    b->wait_mask |= next->wait_mask;
    b->free_stamp = std::max(b->free_stamp, next->free_stamp);
    unlink(next);
  }
  return b;
}

Block* Arena::merge_hole_neighbours(Block* hole) {
  Block* prev = hole->prev;
  if (prev != nullptr && prev->state == BlockState::kHole) {
    remove_hole(hole);
    prev->size += hole->size;
    unlink(hole);
    hole = prev;
  }
  Block* next = hole->next;
  if (next != nullptr && next->state == BlockState::kHole) {
    remove_hole(next);
    hole->size += next->size;
    unlink(next);
  }
  return hole;
}

bool Arena::streams_idle(const Block* b) const {
  if (!backend_.stream_idle(stream_ids_[b->stream])) return false;
  for (std::uint64_t mask = b->wait_mask; mask != 0; mask &= mask - 1) {
    if (!backend_.stream_idle(stream_ids_[static_cast<std::size_t>(std::countr_zero(mask))])) return false;
  }
  return true;
}

Status Arena::synchronize_streams(const Block* b) const {
  MEMCOORD_RETURN_IF_ERROR(backend_.synchronize(stream_ids_[b->stream]));
  for (std::uint64_t mask = b->wait_mask; mask != 0; mask &= mask - 1) {
    MEMCOORD_RETURN_IF_ERROR(
        backend_.synchronize(stream_ids_[static_cast<std::size_t>(std::countr_zero(mask))]));
  }
  return Status::Ok();
}

bool Arena::block_idle(const Block* b) {
  const bool own_stream_only = (b->wait_mask & ~(1ULL << b->stream)) == 0;
  if (marks_ != nullptr && own_stream_only && marks_->reached(b->stream, b->free_stamp)) return true;
  return streams_idle(b);
}

Status Arena::wait_until_idle(const Block* b, bool packing) {
  const bool own_stream_only = (b->wait_mask & ~(1ULL << b->stream)) == 0;
  if (marks_ != nullptr && own_stream_only) {
    MEMCOORD_ASSIGN_OR_RETURN(bool waited, marks_->wait(b->stream, b->free_stamp));
    if (waited) return Status::Ok();
  }
  if (packing) ++pack_stream_syncs_;
  return synchronize_streams(b);
}

// `b` is kFree and not in any index. Splits off the remainder, makes `stream` wait for the block's earlier
// users when they are other streams, and marks it allocated.
Block* Arena::take(Block* b, std::size_t size, std::uint8_t stream) {
  if (b->size - size >= kMinSplitBytes) {
    Block* rest = split_front(b, size);
    insert_free(rest);
  }
  std::uint64_t waits = b->wait_mask;
  if (b->stream != stream) waits |= 1ULL << b->stream;
  waits &= ~(1ULL << stream);
  for (; waits != 0; waits &= waits - 1) {
    const auto producer = static_cast<std::size_t>(std::countr_zero(waits));
    Status s = backend_.wait_for(stream_ids_[stream], stream_ids_[producer]);
    if (!s.ok()) spdlog::error("cross-stream wait failed: {}", s.ToString());
  }
  b->stream = stream;
  b->wait_mask = 0;
  b->state = BlockState::kAllocated;
  return b;
}

// Best fit, with one step of PyTorch's rule for expandable segments (get_free_block ranks a free block by its
// size plus the unmapped range after it): a block before a hole is where a miss grows while mapping less, so
// the next fitting block is taken instead when its size is below that sum. In replays of 24 perturbed copies
// of each trace recorded on the GPUs, against best fit alone (with FreeIndex's lowest address among equal
// sizes): peaks lower on average by 74 MiB on the Llama, 11 on GPT-2 fp32 and 6 on the alternating pair, 2
// MiB higher on ResNet-50; on bench/traces' GPT-2 generation, 6 MiB higher on average over 12 copies and 60
// MiB on the trace itself (see the README).
Block* Arena::fit(const FreeIndex& index, std::size_t size) const {
  Block* best = index.find(size);
  if (best == nullptr || !config_.mapping || growable_bytes(best) == best->size) return best;
  Block* next = index.find(size, best);
  return next != nullptr && growable_bytes(next) < growable_bytes(best) ? next : best;
}

std::uint64_t Arena::growable_bytes(const Block* b) {
  const bool hole_after = b->next != nullptr && b->next->state == BlockState::kHole;
  return std::uint64_t{b->size} + (hole_after ? b->next->size : 0);
}

Block* Arena::take_cached(std::size_t size, std::uint8_t stream) {
  FreeIndex& own = free_of(stream);
  Block* b = fit(own, size);
  if (b == nullptr) {
    // Another stream's cache: reusable after a device-side wait on that stream's queued work.
    for (std::size_t s = 0; s < free_.size() && b == nullptr; ++s) {
      if (s != stream) b = fit(*free_[s], size);
    }
    if (b == nullptr) return nullptr;
  }
  remove_free(b);
  return take(b, size, stream);
}

Block* Arena::take_cached_without_waits(std::size_t size, std::uint8_t stream) {
  if (stream >= free_.size()) return nullptr;
  Block* b = fit(*free_[stream], size);
  if (b == nullptr || (b->wait_mask & ~(1ULL << stream)) != 0) return nullptr;
  remove_free(b);
  return take(b, size, stream);
}

Result<std::uint32_t> Arena::new_mapping_segment(std::size_t min_bytes) {
  const std::size_t size = std::max<std::size_t>(config_.range_bytes, chunk_ceil(min_bytes));
  MEMCOORD_ASSIGN_OR_RETURN(std::uintptr_t base, backend_.reserve_address(size));
  std::uint32_t index = 0;
  while (index < segments_.size() && segments_[index].live) ++index;
  if (index == segments_.size()) segments_.emplace_back();
  Block* hole = slab_.make();
  hole->address = base;
  hole->size = size;
  hole->segment = index;
  add_hole(hole);
  segments_[index] = Segment{base, size, hole, true};
  return index;
}

Result<Placement> Arena::plan(std::size_t size, std::uint8_t stream) {
  auto usable = [stream](const Block* n) {
    return n != nullptr && n->state == BlockState::kFree && n->stream == stream ? n->size : 0;
  };
  Placement best;
  std::size_t best_need = std::numeric_limits<std::size_t>::max();
  for (Block* h = holes_; h != nullptr; h = h->bin_next) {
    const std::size_t l = usable(h->prev);
    const std::size_t r = usable(h->next);
    Placement p;
    p.hole = h;
    const std::size_t side = std::max(l, r);
    if (size <= side + h->size) {
      p.map_bytes = size > side ? chunk_ceil(size - side) : 0;
      if (l >= r) {
        p.left = l > 0 ? h->prev : nullptr;
        p.map_address = h->address;
      } else {
        p.right = h->next;
        p.map_address = h->end() - p.map_bytes;
      }
    } else if (size <= l + h->size + r) {
      p.map_bytes = h->size;
      p.map_address = h->address;
      p.left = h->prev;
      p.right = h->next;
    } else {
      continue;
    }
    if (p.map_bytes < best_need || (p.map_bytes == best_need && h->address < best.hole->address)) {
      best = p;
      best_need = p.map_bytes;
    }
  }
  if (best.hole != nullptr) return best;
  MEMCOORD_ASSIGN_OR_RETURN(std::uint32_t index, new_mapping_segment(size));
  best.hole = segments_[index].first;
  best.map_address = best.hole->address;
  best.map_bytes = chunk_ceil(size);
  return best;
}

void Arena::extend_to_unit_end(Placement& p) const {
  const std::size_t unit = config_.grow_step_bytes != 0 ? config_.grow_step_bytes : config_.map_unit_bytes;
  if (!config_.grow_to_unit_end || unit == 0 || p.map_bytes == 0 || p.right != nullptr ||
      p.map_address != p.hole->address) {
    return;
  }
  const std::uintptr_t base = segments_[p.hole->segment].base;
  const std::uintptr_t end = p.map_address + p.map_bytes;
  const std::uintptr_t unit_end = base + (end - base + unit - 1) / unit * unit;
  p.map_bytes = std::min<std::uintptr_t>(unit_end, p.hole->end()) - p.map_address;
}

Result<Block*> Arena::map_and_take(const Placement& p, std::size_t size, std::uint8_t stream) {
  if (p.map_bytes == 0) {
    Block* b = (p.left != nullptr && p.left->size >= size) ? p.left : p.right;
    remove_free(b);
    return take(b, size, stream);
  }
  MEMCOORD_RETURN_IF_ERROR(map_units(segments_[p.hole->segment].base, p.map_address, p.map_bytes));
  reserved_bytes_ += p.map_bytes;
  backend_allocated_bytes_ += p.map_bytes;
  Block* cur = p.hole;
  remove_hole(cur);
  if (p.map_address > cur->address) {
    Block* front = cur;
    cur = split_front(front, p.map_address - front->address);
    add_hole(front);
  }
  if (cur->size > p.map_bytes) {
    Block* back = split_front(cur, p.map_bytes);
    add_hole(back);
  }
  cur->state = BlockState::kFree;
  cur->stream = stream;
  cur->wait_mask = 0;
  Block* merged = merge_free_neighbours(cur);
  return take(merged, size, stream);
}

Result<Block*> Arena::grow_segment(std::size_t size, std::uint8_t stream) {
  std::size_t segment_bytes = 0;
  if (config_.small) {
    segment_bytes = std::max(kSmallSegmentBytes, RoundUp(size, kSegmentRound));
  } else {
    segment_bytes = size < kLargeRoundThreshold ? kLargeSegmentBytes : RoundUp(size, kSegmentRound);
  }
  MEMCOORD_ASSIGN_OR_RETURN(void* base, backend_.allocate(segment_bytes));
  ++backend_allocations_;
  backend_allocated_bytes_ += segment_bytes;
  reserved_bytes_ += segment_bytes;
  std::uint32_t index = 0;
  while (index < segments_.size() && segments_[index].live) ++index;
  if (index == segments_.size()) segments_.emplace_back();
  Block* b = slab_.make();
  b->address = reinterpret_cast<std::uintptr_t>(base);
  b->size = segment_bytes;
  b->segment = index;
  b->stream = stream;
  b->state = BlockState::kFree;
  segments_[index] = Segment{b->address, segment_bytes, b, true};
  return take(b, size, stream);
}

void Arena::release(Block* b) {
  b->state = BlockState::kFree;
  b->requested = 0;
  b->free_stamp = marks_ != nullptr ? marks_->stamp(b->stream) : 1;
  insert_free(merge_free_neighbours(b));
}

bool Arena::may_wait_for(const Block* b, ReleaseWait wait, std::uint8_t wait_stream) const {
  const bool own_stream_only = b->stream == wait_stream && (b->wait_mask & ~(1ULL << wait_stream)) == 0;
  switch (wait) {
    case ReleaseWait::kIdleOnly:
      return false;
    case ReleaseWait::kWaitForStream:
      return own_stream_only;
    case ReleaseWait::kWaitForOlderMarker:
      return own_stream_only && marks_ != nullptr && marks_->covered_before_newest(b->stream, b->free_stamp);
    case ReleaseWait::kSettle:
      return true;
  }
  return false;
}

// Packing releases idle blocks first: a wait (even up to a marker) stops the host, and a drain stops the GPU.
std::uint64_t Arena::release_free_memory(std::uint64_t want_bytes, ReleaseWait wait, const Block* keep_a,
                                         const Block* keep_b, std::uint8_t wait_stream) {
  if (wait == ReleaseWait::kSettle) settle_streams(keep_a, keep_b);
  const bool packing = IsPacking(wait);
  std::uint64_t released =
      release_pass(want_bytes, packing ? ReleaseWait::kIdleOnly : wait, keep_a, keep_b, wait_stream);
  if (packing && released < want_bytes) {
    released += release_pass(want_bytes - released, wait, keep_a, keep_b, wait_stream);
  }
  return released;
}

std::uint64_t Arena::release_pass(std::uint64_t want_bytes, ReleaseWait wait, const Block* keep_a,
                                  const Block* keep_b, std::uint8_t wait_stream) {
  const bool packing = IsPacking(wait);
  std::uint64_t released = 0;
  for (auto& index : free_) {
    if (released >= want_bytes) break;
    index->for_each_largest_first([&](Block* b) {
      if (b == keep_a || b == keep_b) return true;
      if (config_.mapping && b->size < config_.chunk_bytes) return false;  // the rest are smaller
      if (!config_.mapping && (b->prev != nullptr || b->next != nullptr)) return true;
      if (!block_idle(b)) {
        if (!may_wait_for(b, wait, wait_stream)) return true;
        // A block whose units all reach into live neighbours has nothing to unmap: never wait for it (an
        // idle one costs no wait, and release_block finds its units, or none, itself).
        if (config_.mapping && !holds_whole_unit(b)) return true;
        const auto started = std::chrono::steady_clock::now();
        const bool idle = wait_until_idle(b, packing).ok();
        if (packing) {
          pack_waits_ += idle ? 1 : 0;
          pack_wait_ns_ += static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started)
                  .count());
        }
        if (!idle) return true;
      }
      released += release_block(b, want_bytes - released);
      return released < want_bytes;
    });
  }
  return released;
}

std::uint64_t Arena::own_stream_free_units(std::uint8_t stream, const Block* keep_a,
                                           const Block* keep_b) const {
  if (!config_.mapping || stream >= free_.size()) return 0;
  std::uint64_t bytes = 0;
  free_[stream]->for_each_largest_first([&](Block* b) {
    if (b->size < config_.chunk_bytes) return false;  // the rest are smaller
    if (b == keep_a || b == keep_b || (b->wait_mask & ~(1ULL << stream)) != 0) return true;
    std::uintptr_t lo = 0;
    std::uintptr_t hi = 0;
    whole_units_in(b, lo, hi);
    if (hi > lo) bytes += hi - lo;
    return true;
  });
  return bytes;
}

std::uint64_t Arena::release_block(Block* b, std::uint64_t want_bytes) {
  if (!config_.mapping) {
    Segment& seg = segments_[b->segment];
    remove_free(b);
    backend_.release(reinterpret_cast<void*>(seg.base), seg.size);
    ++backend_frees_;
    backend_released_bytes_ += seg.size;
    reserved_bytes_ -= seg.size;
    seg.live = false;
    seg.first = nullptr;
    slab_.recycle(b);
    return seg.size;
  }
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  whole_units_in(b, lo, hi);
  if (hi <= lo) return 0;
  // Whole units from the top, at least what is still wanted ("everything" is asked as UINT64_MAX bytes).
  const std::uintptr_t cut = unit_cut(lo, hi, want_bytes);
  const std::size_t take_bytes = hi - cut;
  remove_free(b);
  unmap_units(cut, hi);
  backend_released_bytes_ += take_bytes;
  reserved_bytes_ -= take_bytes;
  Block* hole = b;
  if (cut > b->address) {
    hole = split_front(b, cut - b->address);
    insert_free(b);
  }
  if (hole->size > take_bytes) {
    Block* back = split_front(hole, take_bytes);
    insert_free(back);
  }
  add_hole(hole);
  merge_hole_neighbours(hole);
  return take_bytes;
}

Status Arena::map_units(std::uintptr_t base, std::uintptr_t address, std::size_t bytes) {
  const std::vector<std::size_t> pieces =
      coarse_units() ? UnitPieces(address - base, bytes, config_.map_unit_bytes, config_.chunk_bytes,
                                  config_.merge_unit_ends)
                     : std::vector<std::size_t>(bytes / config_.chunk_bytes, config_.chunk_bytes);
  MEMCOORD_RETURN_IF_ERROR(backend_.map_pieces(address, pieces));  // one call: the driver sets access once
  backend_allocations_ += pieces.size();
  if (!coarse_units()) return Status::Ok();
  std::uintptr_t a = address;
  for (const std::size_t piece : pieces) {
    unit_starts_.insert(a);
    a += piece;
  }
  return Status::Ok();
}

void Arena::unmap_units(std::uintptr_t lo, std::uintptr_t hi) {
  backend_.unmap(lo, hi - lo);
  if (!coarse_units()) {
    backend_frees_ += (hi - lo) / config_.chunk_bytes;
    return;
  }
  const auto first = unit_starts_.lower_bound(lo);
  const auto last = unit_starts_.lower_bound(hi);
  backend_frees_ += static_cast<std::uint64_t>(std::distance(first, last));
  unit_starts_.erase(first, last);
}

bool Arena::holds_whole_unit(const Block* b) const {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  whole_units_in(b, lo, hi);
  return hi > lo;
}

// A boundary is where a unit starts or where mapped memory ends (a hole or the segment's end follows).
void Arena::whole_units_in(const Block* b, std::uintptr_t& lo, std::uintptr_t& hi) const {
  lo = chunk_ceil(b->address);
  hi = chunk_floor(b->end());
  if (hi <= lo || !coarse_units()) return;
  const auto first = unit_starts_.lower_bound(lo);
  if (first == unit_starts_.end() || *first >= hi) {
    hi = lo;
    return;
  }
  lo = *first;
  const bool mapped_after = b->next != nullptr && b->next->state != BlockState::kHole;
  if (hi == b->end() && !mapped_after) return;
  hi = *std::prev(unit_starts_.upper_bound(hi));  // at least *first, which is below hi
}

std::uintptr_t Arena::unit_cut(std::uintptr_t lo, std::uintptr_t hi, std::uint64_t bytes) const {
  if (hi - lo <= bytes) return lo;
  const std::uintptr_t limit = hi - bytes;
  if (!coarse_units()) return chunk_floor(limit);
  return *std::prev(unit_starts_.upper_bound(limit));  // lo is a start at or below limit
}

Status Arena::check_units() const {
  if (!coarse_units()) {
    return unit_starts_.empty() ? Status::Ok() : Internal("unit starts recorded for chunk-sized units");
  }
  const std::size_t unit = config_.map_unit_bytes;
  std::size_t seen = 0;
  for (const Segment& seg : segments_) {
    if (!seg.live) continue;
    for (const Block* b = seg.first; b != nullptr; b = b->next) {
      const bool run_start =
          b->state != BlockState::kHole && (b->prev == nullptr || b->prev->state == BlockState::kHole);
      if (!run_start) continue;
      const Block* last = b;
      while (last->next != nullptr && last->next->state != BlockState::kHole) last = last->next;
      const std::uintptr_t end = last->end();
      auto it = unit_starts_.lower_bound(b->address);
      if (it == unit_starts_.end() || *it != b->address) {
        return Internal(fmt::format("mapped run at {:#x} does not begin with a unit", b->address));
      }
      // Units below the unit come from the grid and never cross it; a unit of a miss of more than
      // kMaxUnitsPerMiss units, or one an end piece merged into (merge_unit_ends), is at least the unit and
      // may start anywhere.
      for (; it != unit_starts_.end() && *it < end; ++it) {
        const auto next = std::next(it);
        const std::uintptr_t unit_end = (next != unit_starts_.end() && *next < end) ? *next : end;
        if (unit_end - *it < unit && (*it - seg.base) / unit != (unit_end - 1 - seg.base) / unit) {
          return Internal(fmt::format("unit [{:#x}, {:#x}) crosses a multiple of {}", *it, unit_end, unit));
        }
        ++seen;
      }
      b = last;
    }
  }
  if (seen != unit_starts_.size()) {
    return Internal(
        fmt::format("{} unit starts recorded but {} inside mapped memory", unit_starts_.size(), seen));
  }
  return Status::Ok();
}

void Arena::settle_streams(const Block* keep_a, const Block* keep_b) {
  std::uint64_t owners = 0;
  for (std::size_t i = 0; i < free_.size(); ++i) {
    if (!free_[i]->empty()) owners |= 1ULL << i;
  }
  if (std::popcount(owners) < 2) return;  // one stream: nothing to merge across
  for (std::uint64_t mask = owners; mask != 0; mask &= mask - 1) {
    if (!backend_.synchronize(stream_ids_[static_cast<std::size_t>(std::countr_zero(mask))]).ok()) return;
  }
  for (Segment& seg : segments_) {
    if (!seg.live) continue;
    for (Block* b = seg.first; b != nullptr; b = b->next) {
      if (b->state != BlockState::kFree || b == keep_a || b == keep_b) continue;
      while (b->next != nullptr && b->next->state == BlockState::kFree) {
        Block* next = b->next;
        if (next == keep_a || next == keep_b) break;  // merging would recycle a block the caller holds
        if (!streams_idle(next) && !synchronize_streams(next).ok()) break;
        remove_free(b);
        remove_free(next);
        b->size += next->size;
        b->wait_mask |= next->wait_mask;
        b->free_stamp = std::max(b->free_stamp, next->free_stamp);
        unlink(next);
        insert_free(b);
      }
    }
  }
}

void Arena::release_empty_segments() {
  if (!config_.mapping) return;
  for (Segment& seg : segments_) {
    if (!seg.live) continue;
    Block* first = seg.first;
    if (first->state != BlockState::kHole || first->next != nullptr) continue;
    remove_hole(first);
    slab_.recycle(first);
    backend_.free_address(seg.base, seg.size);
    seg.live = false;
    seg.first = nullptr;
  }
}

std::uint64_t Arena::free_bytes() const {
  std::uint64_t total = 0;
  for (const auto& index : free_) total += index->bytes();
  return total;
}

std::size_t Arena::largest_free() const {
  std::size_t largest = 0;
  for (const auto& index : free_) largest = std::max(largest, index->largest());
  return largest;
}

void Arena::snapshot(std::vector<SegmentSnapshot>& out) const {
  for (const Segment& seg : segments_) {
    if (!seg.live) continue;
    SegmentSnapshot& s = out.emplace_back();
    s.address = seg.base;
    s.size = seg.size;
    s.small = config_.small;
    for (const Block* b = seg.first; b != nullptr; b = b->next) {
      BlockSnapshot& block = s.blocks.emplace_back();
      block.address = b->address;
      block.size = b->size;
      switch (b->state) {
        case BlockState::kAllocated:
          block.state = BlockSnapshot::State::kAllocated;
          block.requested = b->requested;
          block.tag = b->tag;
          break;
        case BlockState::kFree:
          block.state = BlockSnapshot::State::kFree;
          break;
        case BlockState::kHole:
          block.state = BlockSnapshot::State::kUnmapped;
          break;
      }
      if (b->state != BlockState::kHole) {
        block.stream = stream_ids_[b->stream];
        s.mapped_bytes += b->size;
      }
    }
  }
}

Status Arena::check_invariants() const {
  std::uint64_t reserved = 0;
  std::size_t free_blocks = 0;
  std::uint64_t free_total = 0;
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    if (!seg.live) continue;
    std::uintptr_t expect = seg.base;
    const Block* prev = nullptr;
    for (const Block* b = seg.first; b != nullptr; prev = b, b = b->next) {
      if (b->address != expect) return Internal(fmt::format("gap or overlap at {:#x}", b->address));
      if (b->prev != prev) return Internal(fmt::format("broken prev link at {:#x}", b->address));
      if (b->segment != s) return Internal(fmt::format("wrong segment at {:#x}", b->address));
      if (b->size == 0) return Internal(fmt::format("empty block at {:#x}", b->address));
      if (prev != nullptr && prev->state == BlockState::kHole && b->state == BlockState::kHole) {
        return Internal(fmt::format("adjacent holes at {:#x}", b->address));
      }
      if (prev != nullptr && prev->state == BlockState::kFree && b->state == BlockState::kFree &&
          prev->stream == b->stream) {
        return Internal(fmt::format("unmerged free blocks at {:#x}", b->address));
      }
      if (b->state == BlockState::kHole) {
        if (!config_.mapping) return Internal("hole in a segment arena");
        if (b->address % config_.chunk_bytes != 0 || b->size % config_.chunk_bytes != 0) {
          return Internal(fmt::format("unaligned hole at {:#x}", b->address));
        }
      } else {
        reserved += b->size;
      }
      if (b->state == BlockState::kFree) {
        ++free_blocks;
        free_total += b->size;
      }
      expect = b->end();
    }
    if (expect != seg.base + seg.size) return Internal("segment not covered by its blocks");
  }
  std::size_t indexed = 0;
  for (const auto& index : free_) indexed += index->count();
  if (indexed != free_blocks) {
    return Internal(fmt::format("{} free blocks but {} indexed", free_blocks, indexed));
  }
  if (free_total != free_bytes()) return Internal("free index bytes disagree with the blocks");
  MEMCOORD_RETURN_IF_ERROR(check_units());
  if (reserved != reserved_bytes_) {
    return Internal(fmt::format("reserved {} but blocks cover {} mapped bytes", reserved_bytes_, reserved));
  }
  return Status::Ok();
}

}  // namespace memcoord::detail
