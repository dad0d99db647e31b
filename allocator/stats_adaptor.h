// StatsAdaptor: counts what passes through it: live bytes (rounded and as asked), live blocks, successful
// allocations, with peaks (bytes and blocks) that reset_peaks() lowers to the current figures. Forwards every
// call to `upstream` unchanged; a failed call changes no figure. Cost: a few relaxed stores per call (no
// atomic read-modify-write), because its calls must be serialized (a ThreadSafeAdaptor above it, as in
// CachingPool). fill_stats() may be called from any thread at any time; its fields may then come from
// slightly different instants. Ownership: does not own `upstream`. `Upstream`: see ResourceAdaptor
// (CachingPool names CorePool, so a hit calls the core directly).
#pragma once

#include "allocator/detail/counter.h"
#include "allocator/memory_resource.h"
#include "allocator/pool_stats.h"

namespace memcoord {

template <typename Upstream = MemoryResource>
class StatsAdaptor final : public DirectHooks<StatsAdaptor<Upstream>, ResourceAdaptor<Upstream>> {
 public:
  explicit StatsAdaptor(Upstream& upstream)
      : DirectHooks<StatsAdaptor, ResourceAdaptor<Upstream>>(upstream) {}

  bool try_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) {
    if (!this->upstream().try_allocate(bytes, stream, tag, out, error)) return false;
    count(out);
    return true;
  }
  bool try_allocate_cached(std::size_t bytes, StreamId stream, TagId tag, Allocation& out) {
    if (!this->upstream().try_allocate_cached(bytes, stream, tag, out)) return false;
    count(out);
    return true;
  }
  bool try_deallocate(void* ptr, Allocation& freed, Status& error) {
    if (!this->upstream().try_deallocate(ptr, freed, error)) return false;
    allocated_.sub(freed.size);
    freed_total_.add(freed.size);
    active_.sub(freed.size);
    requested_.sub(freed.requested);
    live_blocks_.sub(1);
    return true;
  }

  // Fills allocated, requested, active, live_blocks (and their peaks), allocations and the bytes allocated
  // and freed in all.
  void fill_stats(PoolStats& s) const {
    s.allocated_bytes = allocated_.current.load();
    s.peak_allocated_bytes = allocated_.peak.load();
    s.requested_bytes = requested_.current.load();
    s.peak_requested_bytes = requested_.peak.load();
    s.active_bytes = active_.current.load();
    s.peak_active_bytes = active_.peak.load();
    s.live_blocks = live_blocks_.current.load();
    s.peak_live_blocks = live_blocks_.peak.load();
    s.allocations = allocations_.load();
    s.allocated_bytes_total = allocated_total_.load();
    s.freed_bytes_total = freed_total_.load();
  }
  std::uint64_t allocated_bytes() const { return allocated_.current.load(); }
  // The current live figures, for a layer above that reads them without the lock (ThreadCacheAdaptor).
  const detail::Counter& allocated_counter() const { return allocated_.current; }
  const detail::Counter& requested_counter() const { return requested_.current; }
  std::uint64_t live_blocks() const { return live_blocks_.current.load(); }
  // REQUIRES: serialized with allocate/deallocate.
  void reset_peaks() {
    allocated_.reset_peak();
    requested_.reset_peak();
    active_.reset_peak();
    live_blocks_.reset_peak();
  }

 private:
  void count(const Allocation& a) {
    allocated_.add(a.size);
    active_.add(a.size);
    requested_.add(a.requested);
    live_blocks_.add(1);
    allocations_.add(1);
    allocated_total_.add(a.size);
  }

  detail::Gauge allocated_, requested_, active_, live_blocks_;
  detail::Counter allocations_, allocated_total_, freed_total_;
};

}  // namespace memcoord
