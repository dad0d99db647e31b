// CudaVmmBackend ("cuda-vmm"): device memory through CUDA virtual memory management, the mapping half of
// DeviceBackend. reserve_address takes address space only (cuMemAddressReserve); map backs a range with one
// physical allocation (cuMemCreate of the range's size, cuMemMap, cuMemSetAccess), map_pieces backs a run
// with one per piece and sets the run's access in one cuMemSetAccess, and unmap takes back whole such
// allocations (cuMemUnmap + cuMemRelease): the driver cannot unmap part of an allocation, so unmap's range
// must consist of whole earlier map ranges (the pool's arenas map in units and unmap whole units).
// chunk_bytes() is the device's allocation granularity (the larger of the minimum and the recommended; 2 MiB
// on an H200), the alignment of every range. A physical allocation costs about 40 us to map and 33 us to
// unmap on an H200 whatever its size (bench/gpu/vmm_handle_cost.py).
//
// Segments are offered too (allocate = reserve + map of the size rounded up to chunks; release undoes both),
// for pools forced to grow by segments.
//
// The driver API comes from cudaGetDriverEntryPointByVersion (CudaDriverApi); libcuda is never linked.
// Streams: CudaStreamOps. Facts: device_info() from cudaMemGetInfo, the name and UUID read once at creation.
// held_bytes(): bytes mapped now.
//
// Thread safety: all methods are thread-safe; mu_ guards the bookkeeping, driver calls run outside it.
// Ownership: the backend must outlive its pools. Destroying it unmaps and frees whatever is still mapped or
// reserved (with a warning), so a leaking pool cannot keep device memory past its backend.
// Failure: map() either maps the whole range or nothing (chunks mapped before a failure are undone); driver
// out-of-memory is RESOURCE_EXHAUSTED; a range that was not reserved, is misaligned or already mapped is
// INVALID_ARGUMENT and never reaches the driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "allocator/cuda/cuda_device_facts.h"
#include "allocator/cuda/cuda_stream_ops.h"
#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

struct CudaDriverApi;

class CudaVmmBackend final : public DeviceBackend {
 public:
  // Errors: UNAVAILABLE without a usable GPU or without the driver's virtual memory entry points,
  // INVALID_ARGUMENT for an ordinal that does not exist.
  static Result<std::unique_ptr<CudaVmmBackend>> Create(int device = 0);
  ~CudaVmmBackend() override;

  std::size_t chunk_bytes() const override { return chunk_bytes_; }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override;
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override;
  Status map(std::uintptr_t address, std::size_t bytes) override;
  // Each piece its own physical allocation (cuMemCreate + cuMemMap), then one cuMemSetAccess for the run.
  Status map_pieces(std::uintptr_t address, std::span<const std::size_t> pieces) override;
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override;

  Status wait_for(StreamId waiter, StreamId producer) override { return streams_.wait_for(waiter, producer); }
  bool stream_idle(StreamId stream) override { return streams_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return streams_.synchronize(stream); }
  MarkerId record_marker(StreamId stream) override { return streams_.record_marker(stream); }
  bool marker_reached(MarkerId marker) override { return streams_.marker_reached(marker); }
  Status wait_marker(MarkerId marker) override { return streams_.wait_marker(marker); }
  void release_marker(MarkerId marker) noexcept override { streams_.release_marker(marker); }

  DeviceInfo device_info() override;
  std::string_view kind() const override { return "cuda-vmm"; }

  int device() const { return device_; }
  std::uint64_t held_bytes() const { return mapped_bytes_.load(std::memory_order_relaxed); }
  // Physical allocations mapped now (one per map call still mapped).
  std::size_t mapping_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return mappings_.size();
  }

 private:
  CudaVmmBackend(int device, CudaDeviceFacts facts, const CudaDriverApi& api, std::size_t chunk_bytes);
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;

  // REQUIRES: mu_ held. OK when [address, address+bytes) is chunk-aligned, inside one reserved range and
  // (when `must_be_unmapped`) overlaps no mapping.
  Status check_range_locked(std::uintptr_t address, std::size_t bytes, bool must_be_unmapped) const;
  struct Mapping {
    unsigned long long handle = 0;  // CUmemGenericAllocationHandle
    std::size_t bytes = 0;
  };
  // cuMemCreate + cuMemMap of each piece in turn from `address`, appending each to `made`; stops at the first
  // failure (what is in `made` stays mapped, for the caller to undo), with no access set.
  Status create_and_map(std::uintptr_t address, std::span<const std::size_t> pieces,
                        std::vector<std::pair<std::uintptr_t, Mapping>>& made);
  // Unmaps and releases one mapping's handle; logs driver errors.
  void unmap_one(std::uintptr_t address, const Mapping& mapping) noexcept;

  const int device_;
  const CudaDeviceFacts facts_;
  const CudaDriverApi& api_;
  const std::size_t chunk_bytes_;
  CudaStreamOps streams_;
  std::atomic<std::uint64_t> mapped_bytes_{0};

  mutable std::mutex mu_;                                     // guards the three maps below
  std::map<std::uintptr_t, std::size_t> reserved_;            // base -> bytes, from reserve_address
  std::map<std::uintptr_t, Mapping> mappings_;                // start -> its physical allocation
  std::unordered_map<std::uintptr_t, std::size_t> segments_;  // segment base -> bytes reserved and mapped
};

}  // namespace memcoord
