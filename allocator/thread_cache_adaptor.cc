#include "allocator/thread_cache_adaptor.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace memcoord {
namespace {

std::atomic<std::uint64_t> g_next_id{1};

std::uint64_t SubClamped(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

void RaiseTo(std::atomic<std::uint64_t>& peak, std::int64_t value) {
  if (value <= 0) return;
  const auto v = static_cast<std::uint64_t>(value);
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (v > seen && !peak.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

// The slots this thread has claimed, one per adaptor it used; released when the thread exits. A one-entry
// cache in front (trivially destructible thread_locals, so no guard on the hot path).
struct ThreadCacheBindings {
  struct Binding {
    std::uint64_t id = 0;
    std::shared_ptr<detail::ThreadCacheSlot> slot;
  };
  std::vector<Binding> list;

  ~ThreadCacheBindings() {
    for (Binding& b : list) {
      detail::ThreadCacheSlot& slot = *b.slot;
      std::lock_guard lock(slot.mu);
      if (slot.layer != nullptr) slot.layer->release_slot(slot);  // the lock keeps the adaptor alive
    }
  }
};

namespace {
// The slot of the adaptor this thread used last (one thread-local lookup on the hot path).
struct LastSlot {
  std::uint64_t id = 0;
  detail::ThreadCacheSlot* slot = nullptr;
};
// initial-exec: one %fs-relative load instead of a __tls_get_addr call per use (this library is dlopen'ed by
// Python; the slot is 16 bytes of the static TLS surplus glibc keeps for such libraries, as the C ABI's own
// call guard uses).
__attribute__((tls_model("initial-exec"))) thread_local LastSlot t_last;
thread_local ThreadCacheBindings t_bindings;
}  // namespace

ThreadCacheAdaptor::ThreadCacheAdaptor(MemoryResource& upstream, LiveFigures below, ThreadCacheLimits limits,
                                       std::string owner)
    : DirectHooks(upstream),
      id_(g_next_id.fetch_add(1)),
      below_(below),
      limits_(limits),
      owner_(std::move(owner)) {
  slots_[0] = std::make_shared<Slot>();
  slots_[0]->layer = this;
  slots_[0]->shared = true;
  raw_[0].store(slots_[0].get(), std::memory_order_release);
  slot_count_.store(1, std::memory_order_release);
}

ThreadCacheAdaptor::~ThreadCacheAdaptor() {
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> blocks;
  for (std::size_t i = 0; i < slot_count_.load(std::memory_order_acquire); ++i) {
    Slot& slot = *slot_at(i);
    std::lock_guard lock(slot.mu);
    slot.layer = nullptr;  // threads that still hold the slot leave it alone from now on
    const std::size_t n = take_all_locked(slot, blocks.data());
    for (std::size_t k = 0; k < n; ++k) {
      Allocation freed;
      Status error;
      (void)upstream().try_deallocate(reinterpret_cast<void*>(blocks[k].address), freed, error);
    }
  }
}

ThreadCacheAdaptor::Slot& ThreadCacheAdaptor::my_slot() {
  LastSlot& last = t_last;
  if (last.id == id_) return *last.slot;
  return bind_slot();
}

// First call of this thread on this adaptor (or alternating between adaptors): find or claim a slot.
ThreadCacheAdaptor::Slot& ThreadCacheAdaptor::bind_slot() {
  auto& list = t_bindings.list;
  for (const auto& b : list) {
    if (b.id == id_) {
      t_last = {id_, b.slot.get()};
      return *b.slot;
    }
  }
  std::erase_if(list, [](const ThreadCacheBindings::Binding& b) {  // slots of destroyed adaptors
    std::lock_guard lock(b.slot->mu);
    return b.slot->layer == nullptr;
  });
  std::shared_ptr<Slot> chosen;
  {
    std::lock_guard lock(slots_mu_);
    const std::size_t count = slot_count_.load(std::memory_order_relaxed);
    for (std::size_t i = 1; i < count && chosen == nullptr; ++i) {
      if (!slots_[i]->owned.load(std::memory_order_relaxed)) chosen = slots_[i];
    }
    if (chosen == nullptr && count < kMaxSlots) {
      chosen = std::make_shared<Slot>();
      chosen->layer = this;
      slots_[count] = chosen;
      raw_[count].store(chosen.get(), std::memory_order_release);
      slot_count_.store(count + 1, std::memory_order_release);
    }
    if (chosen == nullptr) {
      chosen = slots_[0];
    } else {
      chosen->owned.store(true, std::memory_order_relaxed);
    }
  }
  list.push_back({id_, chosen});
  t_last = {id_, chosen.get()};
  return *chosen;
}

// REQUIRES: slot.mu held (which keeps this adaptor alive: its destructor takes every slot's lock).
void ThreadCacheAdaptor::release_slot(Slot& slot) {
  if (slot.shared) return;
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> blocks;
  const std::size_t n = take_all_locked(slot, blocks.data());
  for (std::size_t k = 0; k < n; ++k) {
    Allocation freed;
    Status error;
    (void)upstream().try_deallocate(reinterpret_cast<void*>(blocks[k].address), freed, error);
    count_cached(slot, blocks[k], /*in=*/false);
  }
  slot.owned.store(false, std::memory_order_relaxed);
}

bool ThreadCacheAdaptor::try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out,
                                      Status& error) {
  Slot& slot = my_slot();
  if (!take_cached(slot, bytes, stream, tag, out)) {
    if (!upstream().try_allocate(bytes, stream, tag, out, error)) {
      if (error.code() != StatusCode::kResourceExhausted || cached_bytes() == 0) return false;
      flush();  // an out-of-memory never leaves memory in a cache
      error = Status::Ok();
      if (!upstream().try_allocate(bytes, stream, tag, out, error)) return false;
    }
    track(slot, out);
  }
  check_peaks(slot);
  return true;
}

bool ThreadCacheAdaptor::try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
  Slot& slot = my_slot();
  if (!take_cached(slot, bytes, stream, tag, out)) {
    if (!upstream().try_allocate_cached(bytes, stream, tag, out)) return false;
    track(slot, out);
  }
  check_peaks(slot);
  return true;
}

bool ThreadCacheAdaptor::take_cached(Slot& slot, std::size_t bytes, StreamId stream, TagId tag,
                                     Allocation& out) {
  // Nothing that size can be cached, or nothing is (only this thread adds to its slot): no lock.
  if (bytes > limits_.max_block_bytes || slot.cached_blocks.load() == 0) return false;
  std::lock_guard lock(slot.mu);
  for (std::size_t i = slot.cached_count; i-- > 0;) {  // newest first
    const detail::CachedBlock b = slot.cached[i];
    if (b.requested != bytes || b.stream != stream || b.tag != tag) continue;
    // Close the gap, oldest-first order kept (a few 40-byte entries: a loop, not a memmove call).
    for (std::size_t k = i + 1; k < slot.cached_count; ++k) slot.cached[k - 1] = slot.cached[k];
    --slot.cached_count;
    slot.entry_bytes -= b.size;
    count_cached(slot, b, /*in=*/false);
    slot.hits.add(1);
    slot.live.insert(b.address, detail::LiveBlock{b.size, b.requested, stream, tag, false});
    out = Allocation{reinterpret_cast<void*>(b.address), b.size, b.requested, stream, tag};
    return true;
  }
  return false;
}

void ThreadCacheAdaptor::track(Slot& slot, const Allocation& a) {
  std::lock_guard lock(slot.mu);
  slot.live.insert(reinterpret_cast<std::uintptr_t>(a.ptr),
                   detail::LiveBlock{a.size, a.requested, a.stream, a.tag, false});
}

bool ThreadCacheAdaptor::keeps(const Slot& slot, const detail::LiveBlock& block) const {
  return !slot.shared && !block.recorded && block.size <= limits_.max_block_bytes &&
         block.size <= limits_.max_bytes && caching_.load(std::memory_order_relaxed);
}

bool ThreadCacheAdaptor::try_deallocate(void* ptr, Allocation& freed, Status& error) {
  if (ptr == nullptr) {  // never a key of the live tables
    error = InvalidArgument(fmt::format("{}: free of a null pointer", owner_));
    return false;
  }
  const auto key = reinterpret_cast<std::uintptr_t>(ptr);
  Slot& own = my_slot();
  detail::LiveBlock block;
  bool found = false;
  bool kept = false;
  {
    std::lock_guard lock(own.mu);
    found = own.live.erase(key, block);
    if (found && keeps(own, block) && own.cached_count < detail::kMaxCachedBlocks &&
        own.entry_bytes + block.size <= limits_.max_bytes) {
      push_cached(own, detail::CachedBlock{key, block.size, block.requested, block.stream, block.tag});
      kept = true;
    }
  }
  if (!kept && found && keeps(own, block)) {
    cache_making_room(own, detail::CachedBlock{key, block.size, block.requested, block.stream, block.tag});
    kept = true;
  }
  if (kept) {
    freed = Allocation{ptr, block.size, block.requested, block.stream, block.tag};
    return true;
  }
  if (!found && !take_live(own, key, block)) {
    error = NotFound(fmt::format(
        "{}: free of {} which is not a live block of this pool (never allocated here, or already freed)",
        owner_, ptr));
    return false;
  }
  // Another thread's block, or one this layer does not keep: the pool takes it back. (A block of another
  // thread is not cached here: it was found in that thread's table, and keeping the common path to one lock
  // matters more than caching cross-thread frees.)
  return upstream().try_deallocate(ptr, freed, error);
}

// REQUIRES: slot.mu held and room for `b`.
void ThreadCacheAdaptor::push_cached(Slot& slot, const detail::CachedBlock& b) {
  slot.cached[slot.cached_count++] = b;
  slot.entry_bytes += b.size;
  count_cached(slot, b, /*in=*/true);
}

// A full cache (rare, so out of the common path): the oldest blocks go back to the pool, after the lock.
void ThreadCacheAdaptor::cache_making_room(Slot& slot, const detail::CachedBlock& b) {
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> evicted;
  std::size_t evicted_count = 0;
  {
    std::lock_guard lock(slot.mu);
    while (slot.cached_count == detail::kMaxCachedBlocks || slot.entry_bytes + b.size > limits_.max_bytes) {
      evicted[evicted_count++] = slot.cached[0];
      slot.entry_bytes -= slot.cached[0].size;
      std::copy(slot.cached.begin() + 1, slot.cached.begin() + static_cast<std::ptrdiff_t>(slot.cached_count),
                slot.cached.begin());
      --slot.cached_count;
    }
    push_cached(slot, b);
  }
  if (evicted_count > 0) give_back(slot, evicted.data(), evicted_count);
}

bool ThreadCacheAdaptor::take_live(Slot& own, std::uintptr_t key, detail::LiveBlock& block) {
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    if (&slot == &own) continue;
    std::lock_guard lock(slot.mu);
    if (slot.live.erase(key, block)) return true;
  }
  return false;
}

void ThreadCacheAdaptor::give_back(Slot& slot, const detail::CachedBlock* blocks, std::size_t count) {
  for (std::size_t k = 0; k < count; ++k) {
    Allocation freed;
    Status error;
    (void)upstream().try_deallocate(reinterpret_cast<void*>(blocks[k].address), freed, error);
  }
  // Dropped from the counters only now: in between, the users' figures read low (never high, so no reader
  // and no peak check sees memory that was never allocated).
  std::lock_guard lock(slot.mu);
  for (std::size_t k = 0; k < count; ++k) count_cached(slot, blocks[k], /*in=*/false);
}

std::size_t ThreadCacheAdaptor::take_all_locked(Slot& slot, detail::CachedBlock* out) {
  const std::size_t n = slot.cached_count;
  std::copy(slot.cached.begin(), slot.cached.begin() + static_cast<std::ptrdiff_t>(n), out);
  slot.cached_count = 0;
  slot.entry_bytes = 0;
  return n;
}

void ThreadCacheAdaptor::flush() {
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> blocks;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    std::size_t n = 0;
    {
      std::lock_guard lock(slot.mu);
      n = take_all_locked(slot, blocks.data());
    }
    if (n > 0) give_back(slot, blocks.data(), n);
  }
}

void ThreadCacheAdaptor::set_caching(bool on) {
  caching_.store(on, std::memory_order_relaxed);
  if (!on) flush();
}

Status ThreadCacheAdaptor::do_record_stream(void* ptr, StreamId stream) {
  if (ptr == nullptr) return NotFound(fmt::format("{}: record_stream on a null pointer", owner_));
  const auto key = reinterpret_cast<std::uintptr_t>(ptr);
  Slot& own = my_slot();
  bool found = false;
  bool same_stream = false;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i <= count && !found; ++i) {  // own slot first, then every slot
    Slot& slot = i == 0 ? own : *slot_at(i - 1);
    if (i > 0 && &slot == &own) continue;
    std::lock_guard lock(slot.mu);
    if (detail::LiveBlock* b = slot.live.find(key)) {
      found = true;
      same_stream = b->stream == stream;
      if (!same_stream) b->recorded = true;  // its reuse will need a device-side wait: not cached
    }
  }
  if (!found) return NotFound(fmt::format("{}: record_stream on {} which is not a live block", owner_, ptr));
  if (same_stream) return Status::Ok();  // the block's own stream: nothing to record
  return upstream().record_stream(ptr, stream);
}

TrimResult ThreadCacheAdaptor::do_trim(std::uint64_t target_bytes) {
  flush();
  return upstream().trim(target_bytes);
}

Result<std::size_t> ThreadCacheAdaptor::block_size(const void* ptr) {
  if (ptr == nullptr) return NotFound(fmt::format("a null pointer is not a live block of {}", owner_));
  const auto key = reinterpret_cast<std::uintptr_t>(ptr);
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    std::lock_guard lock(slot.mu);
    if (const detail::LiveBlock* b = slot.live.find(key)) return b->size;
  }
  return NotFound(fmt::format("{} is not a live block of {}", ptr, owner_));
}

std::int64_t ThreadCacheAdaptor::visible(const detail::Counter& below, detail::Counter Slot::*cached) const {
  auto v = static_cast<std::int64_t>(below.load());
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) v -= static_cast<std::int64_t>((slot_at(i)->*cached).load());
  return v;
}

namespace {

// Lowers `floor` to `value` (and the floors' sum with it) when `value` is below it.
void LowerFloor(detail::Counter& floor, std::uint64_t value, std::atomic<std::uint64_t>& total) {
  if (value < floor.load()) {
    total.fetch_sub(floor.load() - value, std::memory_order_relaxed);
    floor.store(value);
  }
}

void RaiseFloor(detail::Counter& floor, std::uint64_t value, std::atomic<std::uint64_t>& total) {
  if (value > floor.load()) {
    total.fetch_add(value - floor.load(), std::memory_order_relaxed);
    floor.store(value);
  }
}

}  // namespace

// REQUIRES: slot.mu held. Counts `b` into (in) or out of the slot's cached figures. A floor is lowered
// before its figure drops below it, so at every instant each floor is at most its figure and the floors' sum
// at most every cache's bytes.
void ThreadCacheAdaptor::count_cached(Slot& slot, const detail::CachedBlock& b, bool in) {
  const std::uint64_t new_bytes = in ? slot.cached_bytes.load() + b.size : slot.cached_bytes.load() - b.size;
  const std::uint64_t new_requested =
      in ? slot.cached_requested.load() + b.requested : slot.cached_requested.load() - b.requested;
  LowerFloor(slot.floor_bytes, new_bytes, floor_bytes_total_);
  LowerFloor(slot.floor_requested, new_requested, floor_requested_total_);
  slot.cached_bytes.store(new_bytes);
  slot.cached_requested.store(new_requested);
  if (in) {
    slot.cached_blocks.add(1);
  } else {
    slot.cached_blocks.sub(1);
  }
  if (b.tag != kUntagged) {
    if (in) {
      slot.cached_tag_bytes[b.tag].add(b.size);
      slot.cached_tag_blocks[b.tag].add(1);
    } else {
      slot.cached_tag_bytes[b.tag].sub(b.size);
      slot.cached_tag_blocks[b.tag].sub(1);
    }
  }
  slot.window_min_bytes = std::min(slot.window_min_bytes, new_bytes);
  slot.window_min_requested = std::min(slot.window_min_requested, new_requested);
  if (++slot.window_changes < detail::kFloorWindow) return;
  RaiseFloor(slot.floor_bytes, slot.window_min_bytes, floor_bytes_total_);
  RaiseFloor(slot.floor_requested, slot.window_min_requested, floor_requested_total_);
  slot.window_min_bytes = new_bytes;
  slot.window_min_requested = new_requested;
  slot.window_changes = 0;
}

// What users see as allocated is below - (every thread's cache) <= below - (this thread's cache) - (the other
// threads' floors). Only when that bound passes the peak is the exact figure summed over every slot (reading
// lines other threads write). Every figure read here is written rarely in a steady loop (the layers below
// change only on a miss, the floors' sum once a window at most, the peak on a new peak), so the check
// costs a few loads of shared, unmodified lines.
void ThreadCacheAdaptor::check_peaks(const Slot& slot) {
  const auto others_bytes =
      static_cast<std::int64_t>(floor_bytes_total_.load(std::memory_order_relaxed) - slot.floor_bytes.load());
  const auto allocated_bound = static_cast<std::int64_t>(below_.allocated_bytes->load()) -
                               static_cast<std::int64_t>(slot.cached_bytes.load()) - others_bytes;
  if (allocated_bound > static_cast<std::int64_t>(peak_allocated_.load(std::memory_order_relaxed))) {
    RaiseTo(peak_allocated_, visible(*below_.allocated_bytes, &Slot::cached_bytes));
  }
  const auto others_requested = static_cast<std::int64_t>(
      floor_requested_total_.load(std::memory_order_relaxed) - slot.floor_requested.load());
  const auto requested_bound = static_cast<std::int64_t>(below_.requested_bytes->load()) -
                               static_cast<std::int64_t>(slot.cached_requested.load()) - others_requested;
  if (requested_bound > static_cast<std::int64_t>(peak_requested_.load(std::memory_order_relaxed))) {
    RaiseTo(peak_requested_, visible(*below_.requested_bytes, &Slot::cached_requested));
  }
}

void ThreadCacheAdaptor::reset_peaks() {
  peak_allocated_.store(static_cast<std::uint64_t>(
                            std::max<std::int64_t>(0, visible(*below_.allocated_bytes, &Slot::cached_bytes))),
                        std::memory_order_relaxed);
  peak_requested_.store(static_cast<std::uint64_t>(std::max<std::int64_t>(
                            0, visible(*below_.requested_bytes, &Slot::cached_requested))),
                        std::memory_order_relaxed);
}

std::uint64_t ThreadCacheAdaptor::cached_bytes() const {
  std::uint64_t total = 0;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) total += slot_at(i)->cached_bytes.load();
  return total;
}

std::uint64_t ThreadCacheAdaptor::cached_blocks() const {
  std::uint64_t total = 0;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) total += slot_at(i)->cached_blocks.load();
  return total;
}

void ThreadCacheAdaptor::cached_by_tag(TagFigures& out) const {
  out = TagFigures{};
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    const Slot& slot = *slot_at(i);
    for (std::size_t t = 1; t < kMaxTags; ++t) {
      out.bytes[t] += slot.cached_tag_bytes[t].load();
      out.blocks[t] += slot.cached_tag_blocks[t].load();
    }
  }
}

void ThreadCacheAdaptor::adjust_stats(PoolStats& s) const {
  std::uint64_t bytes = 0, requested = 0, blocks = 0, hits = 0;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    const Slot& slot = *slot_at(i);
    bytes += slot.cached_bytes.load();
    requested += slot.cached_requested.load();
    blocks += slot.cached_blocks.load();
    hits += slot.hits.load();
  }
  s.allocated_bytes = SubClamped(s.allocated_bytes, bytes);
  s.active_bytes = SubClamped(s.active_bytes, bytes);
  s.requested_bytes = SubClamped(s.requested_bytes, requested);
  s.live_blocks = SubClamped(s.live_blocks, blocks);
  s.allocations += hits;
  s.cache_hits += hits;
  s.peak_allocated_bytes = std::max(peak_allocated_.load(std::memory_order_relaxed), s.allocated_bytes);
  s.peak_active_bytes = s.peak_allocated_bytes;
  s.peak_requested_bytes = std::max(peak_requested_.load(std::memory_order_relaxed), s.requested_bytes);
}

Status ThreadCacheAdaptor::check_invariants(std::uint64_t below_live_blocks) {
  std::uint64_t tracked = 0;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    std::lock_guard lock(slot.mu);
    std::uint64_t bytes = 0, requested = 0;
    for (std::size_t k = 0; k < slot.cached_count; ++k) {
      bytes += slot.cached[k].size;
      requested += slot.cached[k].requested;
    }
    if (bytes != slot.entry_bytes || bytes != slot.cached_bytes.load() ||
        requested != slot.cached_requested.load() || slot.cached_count != slot.cached_blocks.load()) {
      return Internal(fmt::format("{}: thread cache slot {} disagrees with its counters", owner_, i));
    }
    if (bytes > limits_.max_bytes || (slot.shared && slot.cached_count != 0)) {
      return Internal(fmt::format("{}: thread cache slot {} holds more than its limits", owner_, i));
    }
    tracked += slot.live.size() + slot.cached_count;
  }
  if (tracked != below_live_blocks) {
    return Internal(fmt::format("{}: {} blocks live or cached in thread caches, {} live below", owner_,
                                tracked, below_live_blocks));
  }
  return Status::Ok();
}

}  // namespace memcoord
