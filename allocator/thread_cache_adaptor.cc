#include "allocator/thread_cache_adaptor.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "allocator/detail/small_growth_fence.h"
#include "common/thread_exit_key.h"

namespace memcoord {
namespace {

std::atomic<std::uint64_t> g_next_id{1};

std::uint64_t SubClamped(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// How many blocks at least hold `bytes` when no block is larger than `largest_block`.
std::int64_t BlocksAtLeast(std::int64_t bytes, std::size_t largest_block) {
  if (bytes <= 0 || largest_block == 0) return 0;
  const auto largest = static_cast<std::int64_t>(largest_block);
  return (bytes + largest - 1) / largest;
}

void RaiseTo(std::atomic<std::uint64_t>& peak, std::int64_t value) {
  if (value <= 0) return;
  const auto v = static_cast<std::uint64_t>(value);
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (v > seen && !peak.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

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
// Set once this thread's bindings were released (it is exiting), or could not be registered for release (no
// pthread key left): from then on the thread binds the shared slot. A call after the release (from a pthread
// key destructor that runs after the bindings' own) may still allocate and free: it must not touch the
// released bindings nor the slots they gave back, which another thread may own by then. Trivially
// destructible, so it stays readable until the thread is gone.
__attribute__((tls_model("initial-exec"))) thread_local bool t_bindings_gone = false;
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
// This thread's bindings, made by its first bind_slot and released at its exit by a pthread key rather than
// a thread_local's destructor: a thread whose first pool call comes from a pthread key destructor (a C
// program freeing a per-thread block at exit) made its bindings after the thread_local destructors had run,
// so the destructor it registered then never ran: its slot stayed claimed for good and the cached blocks in
// it were stranded until a flush, and past kMaxSlots such threads every thread shared the slot that caches
// nothing (LeakSanitizer found the bindings leaked, 2026-12-07). A value set while the key destructors run is
// destroyed in a further pass.
thread_local ThreadCacheBindings* t_bindings = nullptr;

void ReleaseBindings(void* bindings) {
  t_last = {};  // the slots go back below: later calls on this thread bind the shared slot instead
  t_bindings_gone = true;
  t_bindings = nullptr;
  delete static_cast<ThreadCacheBindings*>(bindings);
}

// A function's static, so that it exists before any pool's first call whatever the order of static
// initialization; the key is deleted at exit or unload (ThreadExitKey), after which no thread's release runs:
// the adaptors' destructors take every slot's cache back.
ThreadExitKey& BindingsKey() {
  static ThreadExitKey key(&ReleaseBindings);
  return key;
}

// This thread's bindings, made (and registered for release at its exit) on first use; nullptr when no
// release could be registered (the process had no pthread key left): the caller then takes the shared slot,
// which holds nothing that would need giving back, and so does every later call of this thread (without a
// new allocation and a failed registration each time).
ThreadCacheBindings* MyBindings() {
  if (t_bindings != nullptr) return t_bindings;
  auto bindings = std::make_unique<ThreadCacheBindings>();
  if (!BindingsKey().set(bindings.get())) {
    t_bindings_gone = true;
    return nullptr;
  }
  t_bindings = bindings.release();
  return t_bindings;
}
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
    slot.gate.exclude();   // no caller may be inside this adaptor now; the gate is closed for good
    slot.layer = nullptr;  // threads that still hold the slot leave it alone from now on
    return_to_pool_locked(slot, blocks.data(), take_all_locked(slot, blocks.data()));
  }
}

ThreadCacheAdaptor::Slot& ThreadCacheAdaptor::my_slot() {
  LastSlot& last = t_last;
  if (last.id == id_) return *last.slot;
  return bind_slot();
}

// First call of this thread on this adaptor (or alternating between adaptors): find or claim a slot.
ThreadCacheAdaptor::Slot& ThreadCacheAdaptor::bind_slot() {
  ThreadCacheBindings* bindings = t_bindings_gone ? nullptr : MyBindings();
  if (bindings == nullptr) {  // an exiting thread's late call, or no way to give a slot back: the shared slot
    t_last = {id_, slots_[0].get()};
    return *slots_[0];
  }
  auto& list = bindings->list;
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
      if (!slots_[i]->owned.load(std::memory_order_acquire)) chosen = slots_[i];
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

// REQUIRES: slot.mu held by the slot's exiting owner (the lock keeps this adaptor alive: its destructor takes
// every slot's lock). Live blocks keep their entries, for the threads that will free them.
void ThreadCacheAdaptor::release_slot(Slot& slot) {
  if (slot.shared) return;
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> blocks;
  return_to_pool_locked(slot, blocks.data(), take_all_locked(slot, blocks.data()));
  restart_floor_window(slot);
  drop_freed_elsewhere(slot);
  slot.pending_flush = nullptr;  // the next owner looks for itself
  slot.looked = false;
  slot.owned.store(false, std::memory_order_release);
}

bool ThreadCacheAdaptor::try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out,
                                      Status& error) {
  Slot& slot = my_slot();
  if (!take_cached(slot, bytes, stream, tag, out)) {
    flush_idle(slot);
    if (!allocate_upstream(bytes, stream, tag, out, error)) return false;
    track(slot, out);
  }
  check_peaks(slot);
  return true;
}

bool ThreadCacheAdaptor::allocate_upstream(std::size_t bytes, StreamId stream, TagId tag, Allocation& out,
                                           Status& error) {
  bool refused = false;
  {
    detail::SmallGrowthFence fence(limits_.fence_small_growth && bytes <= limits_.max_block_bytes);
    if (upstream().try_allocate(bytes, stream, tag, out, error)) return true;
    refused = fence.refused();
  }
  if (refused) {
    // Only the pool's small-arena growth was refused: the caches go back first (when they hold anything),
    // then the request is asked again with no fence.
    if (cached_bytes() != 0) flush();
    error = Status::Ok();
    if (upstream().try_allocate(bytes, stream, tag, out, error)) return true;
  }
  if (error.code() != StatusCode::kResourceExhausted || cached_bytes() == 0) return false;
  flush();  // an out-of-memory never leaves memory in a cache
  error = Status::Ok();
  return upstream().try_allocate(bytes, stream, tag, out, error);
}

bool ThreadCacheAdaptor::try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
  Slot& slot = my_slot();
  if (!take_cached(slot, bytes, stream, tag, out)) {
    if (sweeps(slot)) {
      // This request's look; a flush may reach the driver (a marker a free owes), which this path never does,
      // so the slot found idle waits for the full path, which then makes no look of its own.
      if (slot.pending_flush == nullptr) slot.pending_flush = find_idle(slot);
      slot.looked = true;
      if (slot.pending_flush != nullptr) return false;
    }
    if (!upstream().try_allocate_cached(bytes, stream, tag, out)) return false;  // the full path follows
    slot.looked = false;
    track(slot, out);
  }
  check_peaks(slot);
  return true;
}

bool ThreadCacheAdaptor::take_cached(Slot& slot, std::size_t bytes, StreamId stream, TagId tag,
                                     Allocation& out) {
  // Nothing that size can be cached, or nothing is (only the owner adds to its slot): no guard at all.
  if (bytes > limits_.max_block_bytes || slot.cached_blocks.load() == 0) return false;
  if (slot.gate.try_enter()) {  // the shared slot caches nothing, so only an owner gets here
    const bool hit = take_cached_owned(slot, bytes, stream, tag, out);
    slot.gate.leave();
    return hit;
  }
  std::lock_guard lock(slot.mu);  // an intruder held the gate: after it, under the lock
  return take_cached_owned(slot, bytes, stream, tag, out);
}

// REQUIRES: the caller owns `slot`, inside its gate or holding its lock.
bool ThreadCacheAdaptor::take_cached_owned(Slot& slot, std::size_t bytes, StreamId stream, TagId tag,
                                           Allocation& out) {
  for (std::size_t i = slot.cached_count; i-- > 0;) {  // the last cached first, unless a hit moved it
    const detail::CachedBlock& entry = slot.cached[i];
    if (entry.requested != bytes || entry.stream != stream || entry.tag != tag) continue;
    const detail::CachedBlock b = entry;
    slot.cached[i] = slot.cached[--slot.cached_count];
    slot.entry_bytes -= b.size;
    count_cached(slot, b, /*in=*/false);
    slot.hits.add(1);
    slot.hit_bytes.add(b.size);
    slot.table.find(b.address)->state.store(detail::EntryState::kLive);  // a cached block has its entry
    out = Allocation{reinterpret_cast<void*>(b.address), b.size, b.requested, stream, tag};
    return true;
  }
  return false;
}

void ThreadCacheAdaptor::track(Slot& slot, const Allocation& a) {
  std::lock_guard lock(slot.mu);
  slot.from_pool.add(1);
  drop_freed_elsewhere(slot);  // the pool may hand back an address whose old entry still waits here
  const auto key = reinterpret_cast<std::uintptr_t>(a.ptr);
  const detail::BlockEntry entry{a.size, a.requested, a.stream, a.tag, detail::EntryState::kLive, false};
  if (detail::BlockEntry* stale = slot.table.find(key)) {
    *stale = entry;  // not reachable while the invariants hold (every such entry was just dropped)
  } else {
    slot.table.insert(key, entry);
  }
  // After the pool counted it: a peak check in between reads one block low, never high.
  upstream_blocks_.fetch_add(1, std::memory_order_relaxed);
}

// REQUIRES: slot.mu held. Erases the entries other threads marked freed (skipping any the pool has since
// handed back to this slot, which track() made live again).
void ThreadCacheAdaptor::drop_freed_elsewhere(Slot& slot) {
  for (std::uintptr_t key : slot.freed_elsewhere) {
    const detail::BlockEntry* e = slot.table.find(key);
    detail::BlockEntry dropped;
    if (e != nullptr && e->state.load() == detail::EntryState::kFreedElsewhere)
      slot.table.erase(key, dropped);
  }
  slot.freed_elsewhere.clear();
}

bool ThreadCacheAdaptor::keeps(const Slot& slot, const detail::BlockEntry& block) const {
  return !slot.shared && !block.recorded.load() && block.size <= limits_.max_block_bytes &&
         block.size <= limits_.max_bytes && caching_.load(std::memory_order_relaxed);
}

bool ThreadCacheAdaptor::has_room(const Slot& slot, std::size_t size) const {
  return slot.cached_count < detail::kMaxCachedBlocks && slot.entry_bytes + size <= limits_.max_bytes;
}

bool ThreadCacheAdaptor::try_deallocate(void* ptr, Allocation& freed, Status& error) {
  if (ptr == nullptr) {  // never a key of the tables
    error = InvalidArgument(fmt::format("{}: free of a null pointer", owner_));
    return false;
  }
  const auto key = reinterpret_cast<std::uintptr_t>(ptr);
  Slot& own = my_slot();
  if (free_into_own_cache(own, key, kDefaultStream, freed)) return true;
  return deallocate_locked(own, key, freed, error);
}

bool ThreadCacheAdaptor::try_free_cached(void* ptr, StreamId stream) {
  Allocation freed;
  return free_into_own_cache(my_slot(), reinterpret_cast<std::uintptr_t>(ptr), stream, freed);
}

// The common free, inside the slot's gate: a live block of this thread's own slot goes into its cache when
// the slot keeps it and has room, and `stream` is kDefaultStream or the block's own. False (nothing changed)
// otherwise, or when the gate is closed or the slot is the shared one.
bool ThreadCacheAdaptor::free_into_own_cache(Slot& own, std::uintptr_t key, StreamId stream,
                                             Allocation& freed) {
  if (own.shared || !own.gate.try_enter()) return false;
  detail::BlockEntry* e = own.table.find(key);
  const bool kept = e != nullptr && e->state.load() == detail::EntryState::kLive && keeps(own, *e) &&
                    has_room(own, e->size) && (stream == kDefaultStream || stream == e->stream);
  if (kept) {
    e->state.store(detail::EntryState::kCached);
    push_cached(own, detail::CachedBlock{key, e->size, e->requested, e->stream, e->tag});
    freed = Allocation{reinterpret_cast<void*>(key), e->size, e->requested, e->stream, e->tag};
  }
  own.gate.leave();
  return kept;
}

// Every free the gate did not finish: a block this slot does not keep, a full cache, another thread's block,
// a pointer nobody handed out, or a free while an intruder held the gate.
bool ThreadCacheAdaptor::deallocate_locked(Slot& own, std::uintptr_t key, Allocation& freed, Status& error) {
  void* const ptr = reinterpret_cast<void*>(key);
  detail::BlockEntry block;
  bool found = false;
  {
    std::lock_guard lock(own.mu);
    drop_freed_elsewhere(own);
    detail::BlockEntry* e = own.table.find(key);
    found = e != nullptr && e->state.load() == detail::EntryState::kLive;
    if (found) block = *e;
    if (found && keeps(own, block)) {
      make_room_locked(own, block.size);
      own.table.find(key)->state.store(detail::EntryState::kCached);  // found again: evictions move entries
      push_cached(own, detail::CachedBlock{key, block.size, block.requested, block.stream, block.tag});
      freed = Allocation{ptr, block.size, block.requested, block.stream, block.tag};
      return true;
    }
    if (found) own.table.erase(key, block);
  }
  if (!found) {
    if (!take_live(own, key, block)) {
      error = NotFound(fmt::format(
          "{}: free of {} which is not a live block of this pool (never allocated here, or already freed)",
          owner_, ptr));
      return false;
    }
    own.other_thread_frees.value.fetch_add(1, std::memory_order_relaxed);
  }
  // Another thread's block, or one this layer does not keep: the pool takes it back. (A block of another
  // thread is not cached here: keeping frees into one's own cache to the gate matters more than caching
  // cross-thread frees.) Uncounted first, so that no peak check sees it live once the pool has it.
  upstream_blocks_.fetch_sub(1, std::memory_order_relaxed);
  if (upstream().try_deallocate(ptr, freed, error)) return true;
  upstream_blocks_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

// REQUIRES: room for `b`, and the caller owns `slot` inside its gate or holds its lock.
void ThreadCacheAdaptor::push_cached(Slot& slot, const detail::CachedBlock& b) {
  detail::CachedBlock& entry = slot.cached[slot.cached_count++];
  entry = b;
  entry.seq = slot.next_seq++;
  slot.entry_bytes += b.size;
  count_cached(slot, b, /*in=*/true);
}

// REQUIRES: slot.mu held by its owner (or by a thread that excluded it). A full cache (rare, so off the
// gate's path): the oldest blocks go back to the pool until `size` more bytes fit.
void ThreadCacheAdaptor::make_room_locked(Slot& slot, std::size_t size) {
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> evicted;
  std::size_t evicted_count = 0;
  while (!has_room(slot, size)) {
    std::size_t at = 0;
    for (std::size_t k = 1; k < slot.cached_count; ++k) {
      if (slot.next_seq - slot.cached[k].seq > slot.next_seq - slot.cached[at].seq) at = k;
    }
    const detail::CachedBlock oldest = slot.cached[at];
    slot.cached[at] = slot.cached[--slot.cached_count];
    slot.entry_bytes -= oldest.size;
    detail::BlockEntry dropped;
    slot.table.erase(oldest.address, dropped);
    evicted[evicted_count++] = oldest;
  }
  return_to_pool_locked(slot, evicted.data(), evicted_count);
}

// Another thread's live block: marked freed in that thread's table, which its owner drops later (only the
// owner changes a table's shape while it may be inside its gate).
bool ThreadCacheAdaptor::take_live(Slot& own, std::uintptr_t key, detail::BlockEntry& block) {
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    if (&slot == &own) continue;
    std::lock_guard lock(slot.mu);
    detail::BlockEntry* e = slot.table.find(key);
    // The exchange fails only if the owner cached the block meanwhile: a double free racing itself.
    if (e == nullptr ||
        !e->state.exchange_if(detail::EntryState::kLive, detail::EntryState::kFreedElsewhere)) {
      continue;
    }
    block = *e;
    slot.freed_elsewhere.push_back(key);
    return true;
  }
  return false;
}

// REQUIRES: slot.mu held, and the owner excluded or the caller its owner. Returns `count` blocks already
// taken out of the slot's cache to upstream, then drops them from its counters: in between the users'
// figures read low (never high, so no reader and no peak check sees memory that was never allocated).
void ThreadCacheAdaptor::return_to_pool_locked(Slot& slot, const detail::CachedBlock* blocks,
                                               std::size_t count) {
  upstream_blocks_.fetch_sub(count, std::memory_order_relaxed);
  for (std::size_t k = 0; k < count; ++k) {
    Allocation freed;
    Status error;
    (void)upstream().try_deallocate(reinterpret_cast<void*>(blocks[k].address), freed, error);
  }
  for (std::size_t k = 0; k < count; ++k) count_cached(slot, blocks[k], /*in=*/false);
}

std::size_t ThreadCacheAdaptor::take_all_locked(Slot& slot, detail::CachedBlock* out) {
  const std::size_t n = slot.cached_count;
  std::copy(slot.cached.begin(), slot.cached.begin() + static_cast<std::ptrdiff_t>(n), out);
  for (std::size_t k = 0; k < n; ++k) {
    detail::BlockEntry dropped;
    slot.table.erase(out[k].address, dropped);
  }
  slot.cached_count = 0;
  slot.entry_bytes = 0;
  return n;
}

void ThreadCacheAdaptor::flush() { flush_slots(/*skip_empty=*/true); }

// skip_empty: a slot that caches nothing when looked at costs no membarrier (most slots, most of the time);
// an owner caching at that instant keeps its block, as with any call that runs concurrently. Turning caching
// off must not leave such a block behind, so set_caching(false) excludes every owner.
void ThreadCacheAdaptor::flush_slots(bool skip_empty) {
  const Slot* own = own_slot();
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    if (skip_empty && slot.cached_blocks.load() == 0) continue;
    flush_slot(slot, /*by_owner=*/&slot == own);
  }
}

// by_owner: the calling thread owns `slot`, so it is not inside the slot's gate, and the lock keeps intruders
// out: no exclusion is needed, nor its membarrier(), which stops every running thread of the process (the
// flush at a refused small-arena growth comes from the thread that missed, whose own cache is often one of
// those it returns).
void ThreadCacheAdaptor::flush_slot(Slot& slot, bool by_owner) {
  std::array<detail::CachedBlock, detail::kMaxCachedBlocks> blocks;
  std::lock_guard lock(slot.mu);
  if (!by_owner) slot.gate.exclude();
  const std::size_t n = take_all_locked(slot, blocks.data());
  return_to_pool_locked(slot, blocks.data(), n);
  restart_floor_window(slot);
  drop_freed_elsewhere(slot);
  if (!by_owner) slot.gate.admit();
}

// The slot this thread owns in this adaptor when its last call here bound one, else nullptr (never the
// shared slot, whose threads own nothing). Binds nothing: a thread that only trims claims no slot.
const ThreadCacheAdaptor::Slot* ThreadCacheAdaptor::own_slot() const {
  const LastSlot& last = t_last;
  return last.id == id_ && last.slot != nullptr && !last.slot->shared ? last.slot : nullptr;
}

// A slot's activity is its allocations (hits and blocks from the pool: a thread that only frees caches
// nothing new beyond its limits, so it may as well be idle). A slot that caches nothing is skipped without a
// look: its watch keeps the activity it last saw, so a thread that caches again after a long idle spell is
// not flushed at once unless it made no allocation since.
ThreadCacheAdaptor::Slot* ThreadCacheAdaptor::find_idle(Slot& own) {
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  const std::size_t looks = std::min(count, kSweepLooks);
  for (std::size_t k = 0; k < looks; ++k) {
    own.sweep_cursor = own.sweep_cursor + 1 < count ? own.sweep_cursor + 1 : 0;
    Slot& slot = *slot_at(own.sweep_cursor);
    if (&slot == &own || slot.cached_blocks.load() == 0) continue;
    if (slot.idle.idle_after(slot.hits.load() + slot.from_pool.load(), limits_.idle_misses)) return &slot;
  }
  return nullptr;
}

// Called with no lock held: it takes another slot's lock, and holding this thread's own could deadlock with
// a thread flushing this one. One look per request whichever path serves it, so that what is flushed when
// does not depend on why the driver-free path declined (a marker falling due, which is a matter of time).
void ThreadCacheAdaptor::flush_idle(Slot& own) {
  if (!sweeps(own)) return;
  Slot* idle = own.looked ? std::exchange(own.pending_flush, nullptr) : find_idle(own);
  own.looked = false;
  if (idle == nullptr) return;
  flush_slot(*idle, /*by_owner=*/false);  // find_idle never returns the caller's own slot
  idle_flushes_.fetch_add(1, std::memory_order_relaxed);
}

void ThreadCacheAdaptor::set_caching(bool on) {
  caching_.store(on, std::memory_order_relaxed);
  if (!on) flush_slots(/*skip_empty=*/false);
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
    detail::BlockEntry* b = slot.table.find(key);
    if (b != nullptr && b->state.load() == detail::EntryState::kLive) {
      found = true;
      same_stream = b->stream == stream;
      if (!same_stream) b->recorded.store(true);  // its reuse will need a device-side wait: not cached
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
    const detail::BlockEntry* b = slot.table.find(key);
    if (b != nullptr && b->state.load() == detail::EntryState::kLive) return b->size;
  }
  return NotFound(fmt::format("{} is not a live block of {}", ptr, owner_));
}

ThreadCacheAdaptor::VisibleBytes ThreadCacheAdaptor::visible_bytes() const {
  VisibleBytes v{static_cast<std::int64_t>(below_.allocated_bytes->load()),
                 static_cast<std::int64_t>(below_.requested_bytes->load())};
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    const Slot& slot = *slot_at(i);
    v.allocated -= static_cast<std::int64_t>(slot.cached_bytes.load());
    v.requested -= static_cast<std::int64_t>(slot.cached_requested.load());
  }
  return v;
}

std::int64_t ThreadCacheAdaptor::visible(std::uint64_t below, detail::Counter Slot::*cached) const {
  auto v = static_cast<std::int64_t>(below);
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
  if (++slot.window_changes < slot.window_length) return;
  RaiseFloor(slot.floor_bytes, slot.window_min_bytes, floor_bytes_total_);
  RaiseFloor(slot.floor_requested, slot.window_min_requested, floor_requested_total_);
  slot.window_min_bytes = new_bytes;
  slot.window_min_requested = new_requested;
  slot.window_changes = 0;
  slot.window_length = std::min(2 * slot.window_length, detail::kFloorWindow);
}

// REQUIRES: slot.mu held, the owner excluded or the caller its owner, and the slot's cache just emptied
// (its floors are then 0). Its next window is a first one: the cache refills from empty.
void ThreadCacheAdaptor::restart_floor_window(Slot& slot) {
  slot.window_min_bytes = slot.cached_bytes.load();
  slot.window_min_requested = slot.cached_requested.load();
  slot.window_changes = 0;
  slot.window_length = detail::kFirstFloorWindow;
}

// What users see as allocated is below - (every thread's cache) <= below - (this thread's cache) - (the other
// threads' floors). Only when that bound passes the peak is the exact figure summed over every slot (reading
// lines other threads write). Every figure read here is written rarely in a steady loop (the layers below
// change only on a miss, the floors' sum once a window at most, the peak on a new peak), so the check
// costs a few loads of shared, unmodified lines.
void ThreadCacheAdaptor::check_peaks(Slot& slot) {
  const auto others_bytes =
      static_cast<std::int64_t>(floor_bytes_total_.load(std::memory_order_relaxed) - slot.floor_bytes.load());
  const auto allocated_bound = static_cast<std::int64_t>(below_.allocated_bytes->load()) -
                               static_cast<std::int64_t>(slot.cached_bytes.load()) - others_bytes;
  const auto others_requested = static_cast<std::int64_t>(
      floor_requested_total_.load(std::memory_order_relaxed) - slot.floor_requested.load());
  const auto requested_bound = static_cast<std::int64_t>(below_.requested_bytes->load()) -
                               static_cast<std::int64_t>(slot.cached_requested.load()) - others_requested;
  if (allocated_bound > static_cast<std::int64_t>(peak_allocated_.load(std::memory_order_relaxed)) ||
      requested_bound > static_cast<std::int64_t>(peak_requested_.load(std::memory_order_relaxed))) {
    // One pass for both figures: they share each slot's line, which is the cost of a sum. Raising the figure
    // whose bound did not pass is harmless (the sum is exact; RaiseTo only raises).
    slot.peak_sums.value.fetch_add(1, std::memory_order_relaxed);
    const VisibleBytes now = visible_bytes();
    RaiseTo(peak_allocated_, now.allocated);
    RaiseTo(peak_requested_, now.requested);
  }
  // Live blocks: no floor counts the other threads' cached blocks, but their byte floors bound them from
  // below (no cached block is larger than the largest this layer keeps), so the bound is raised to as it
  // stands, never summed: reading every slot's counters at each allocation near the peak, lines their owners
  // write at every call, doubled the cost of a hit with two threads (capi_bench). Exact while one thread
  // caches; with more, high by the blocks they cache beyond what their floors show (see the header).
  const auto blocks_bound = static_cast<std::int64_t>(upstream_blocks_.load(std::memory_order_relaxed)) -
                            static_cast<std::int64_t>(slot.cached_blocks.load());
  const auto peak_blocks = static_cast<std::int64_t>(peak_blocks_.load(std::memory_order_relaxed));
  if (blocks_bound > peak_blocks) {  // tested first: the division is then rare
    RaiseTo(peak_blocks_,
            blocks_bound - BlocksAtLeast(others_bytes, std::min(limits_.max_block_bytes, limits_.max_bytes)));
  }
}

void ThreadCacheAdaptor::reset_peaks() {
  const VisibleBytes now = visible_bytes();
  peak_allocated_.store(static_cast<std::uint64_t>(std::max<std::int64_t>(0, now.allocated)),
                        std::memory_order_relaxed);
  peak_requested_.store(static_cast<std::uint64_t>(std::max<std::int64_t>(0, now.requested)),
                        std::memory_order_relaxed);
  peak_blocks_.store(static_cast<std::uint64_t>(std::max<std::int64_t>(
                         0, visible(upstream_blocks_.load(std::memory_order_relaxed), &Slot::cached_blocks))),
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
  std::uint64_t bytes = 0, requested = 0, blocks = 0, hits = 0, hit_bytes = 0, peak_sums = 0,
                other_thread = 0;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    const Slot& slot = *slot_at(i);
    bytes += slot.cached_bytes.load();
    requested += slot.cached_requested.load();
    blocks += slot.cached_blocks.load();
    hits += slot.hits.load();
    hit_bytes += slot.hit_bytes.load();
    peak_sums += slot.peak_sums.load();
    other_thread += slot.other_thread_frees.load();
  }
  s.allocated_bytes = SubClamped(s.allocated_bytes, bytes);
  s.active_bytes = SubClamped(s.active_bytes, bytes);
  s.requested_bytes = SubClamped(s.requested_bytes, requested);
  s.live_blocks = SubClamped(s.live_blocks, blocks);
  s.allocations += hits;
  s.cache_hits += hits;
  // Below, a block counts as freed once it is back in the pool. Users freed every block that entered a
  // cache: those still cached, those served again (hits) and those returned to the pool (already counted
  // below); and allocated every hit.
  s.allocated_bytes_total += hit_bytes;
  s.freed_bytes_total += bytes + hit_bytes;
  s.idle_cache_flushes = idle_flushes_.load(std::memory_order_relaxed);
  s.peak_sums = peak_sums;
  s.other_thread_frees = other_thread;
  s.peak_allocated_bytes = std::max(peak_allocated_.load(std::memory_order_relaxed), s.allocated_bytes);
  s.peak_active_bytes = s.peak_allocated_bytes;
  s.peak_requested_bytes = std::max(peak_requested_.load(std::memory_order_relaxed), s.requested_bytes);
  s.peak_live_blocks = std::max(peak_blocks_.load(std::memory_order_relaxed), s.live_blocks);
}

Status ThreadCacheAdaptor::check_invariants(std::uint64_t below_live_blocks) {
  std::uint64_t tracked = 0;
  const std::size_t count = slot_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    Slot& slot = *slot_at(i);
    std::lock_guard lock(slot.mu);
    slot.gate.exclude();
    const Status status = check_slot_locked(slot, i, tracked);
    slot.gate.admit();
    MEMCOORD_RETURN_IF_ERROR(status);
  }
  if (tracked != below_live_blocks) {
    return Internal(fmt::format("{}: {} blocks live or cached in thread caches, {} live below", owner_,
                                tracked, below_live_blocks));
  }
  if (tracked != upstream_blocks_.load(std::memory_order_relaxed)) {
    return Internal(fmt::format("{}: {} blocks live or cached in thread caches, {} counted for peaks", owner_,
                                tracked, upstream_blocks_.load(std::memory_order_relaxed)));
  }
  return Status::Ok();
}

// REQUIRES: slot.mu held and the owner excluded. Adds the slot's live and cached blocks to `tracked`.
Status ThreadCacheAdaptor::check_slot_locked(const Slot& slot, std::size_t i, std::uint64_t& tracked) const {
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
  std::uint64_t live = 0, cached = 0;
  slot.table.for_each([&](std::uintptr_t, const detail::BlockEntry& e) {
    live += e.state.load() == detail::EntryState::kLive ? 1 : 0;
    cached += e.state.load() == detail::EntryState::kCached ? 1 : 0;
  });
  if (cached != slot.cached_count) {
    return Internal(fmt::format("{}: thread cache slot {} caches {} blocks and its table marks {} cached",
                                owner_, i, slot.cached_count, cached));
  }
  tracked += live + cached;
  return Status::Ok();
}

}  // namespace memcoord
