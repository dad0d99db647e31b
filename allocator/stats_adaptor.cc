#include "allocator/stats_adaptor.h"

namespace memcoord {

Result<Allocation> StatsAdaptor::do_allocate(std::size_t bytes, StreamId stream, TagId tag) {
  Result<Allocation> a = upstream().allocate(bytes, stream, tag);
  if (a.ok()) {
    allocated_.add(a->size);
    active_.add(a->size);
    requested_.add(a->requested);
    live_blocks_.add(1);
    allocations_.add(1);
  }
  return a;
}

Result<Allocation> StatsAdaptor::do_deallocate(void* ptr) {
  Result<Allocation> a = upstream().deallocate(ptr);
  if (a.ok()) {
    allocated_.sub(a->size);
    active_.sub(a->size);
    requested_.sub(a->requested);
    live_blocks_.sub(1);
  }
  return a;
}

void StatsAdaptor::fill_stats(PoolStats& s) const {
  s.allocated_bytes = allocated_.current.load();
  s.peak_allocated_bytes = allocated_.peak.load();
  s.requested_bytes = requested_.current.load();
  s.peak_requested_bytes = requested_.peak.load();
  s.active_bytes = active_.current.load();
  s.peak_active_bytes = active_.peak.load();
  s.live_blocks = live_blocks_.load();
  s.allocations = allocations_.load();
}

void StatsAdaptor::reset_peaks() {
  allocated_.reset_peak();
  requested_.reset_peak();
  active_.reset_peak();
}

}  // namespace memcoord
