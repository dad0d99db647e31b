// StatsAdaptor: counts what passes through it: live bytes (rounded and as asked), live blocks, successful
// allocations, with peaks that reset_peaks() lowers to the current figures. Forwards every call to
// `upstream` unchanged; a failed call changes no figure.
// Cost: a few relaxed stores per call (no atomic read-modify-write), because its calls must be serialized
// (a ThreadSafeAdaptor above it, as in CachingPool). fill_stats() may be called from any thread at any time;
// its fields may then come from slightly different instants. Ownership: does not own `upstream`.
#pragma once

#include "allocator/detail/counter.h"
#include "allocator/memory_resource.h"
#include "allocator/pool_stats.h"

namespace memcoord {

class StatsAdaptor final : public ResourceAdaptor {
 public:
  explicit StatsAdaptor(MemoryResource& upstream) : ResourceAdaptor(upstream) {}

  // Fills allocated, requested, active (and their peaks), live_blocks and allocations.
  void fill_stats(PoolStats& s) const;
  std::uint64_t allocated_bytes() const { return allocated_.current.load(); }
  std::uint64_t live_blocks() const { return live_blocks_.load(); }
  // REQUIRES: serialized with allocate/deallocate.
  void reset_peaks();

 private:
  Result<Allocation> do_allocate(std::size_t bytes, StreamId stream, TagId tag) override;
  Result<Allocation> do_deallocate(void* ptr) override;

  detail::Gauge allocated_, requested_, active_;
  detail::Counter live_blocks_, allocations_;
};

}  // namespace memcoord
