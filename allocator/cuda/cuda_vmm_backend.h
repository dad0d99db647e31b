// CudaVmmBackend ("cuda-vmm"): device memory through CUDA virtual memory management, the mapping half of
// DeviceBackend. reserve_address takes address space only (cuMemAddressReserve); map backs a range with one
// physical allocation per chunk (cuMemCreate of chunk_bytes(), cuMemMap, then one cuMemSetAccess for the
// range); unmap undoes that chunk by chunk (cuMemUnmap + cuMemRelease), so any free chunk anywhere can go
// back to the driver and a pool on this backend never fragments across segments. chunk_bytes() is the
// device's allocation granularity (the larger of the minimum and the recommended; 2 MiB on an H200). Mapping
// costs about 37 us a chunk (18 ms a GiB) and unmapping about 14 ms a GiB on an H200.
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
#include <string>
#include <unordered_map>

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
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override;

  Status wait_for(StreamId waiter, StreamId producer) override { return streams_.wait_for(waiter, producer); }
  bool stream_idle(StreamId stream) override { return streams_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return streams_.synchronize(stream); }

  DeviceInfo device_info() override;
  std::string_view kind() const override { return "cuda-vmm"; }

  int device() const { return device_; }
  std::uint64_t held_bytes() const { return mapped_bytes_.load(std::memory_order_relaxed); }

 private:
  CudaVmmBackend(int device, CudaDeviceFacts facts, const CudaDriverApi& api, std::size_t chunk_bytes);
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;

  // REQUIRES: mu_ held. OK when [address, address+bytes) is chunk-aligned, inside one reserved range and
  // (when `must_be_unmapped`) has no chunk mapped.
  Status check_range_locked(std::uintptr_t address, std::size_t bytes, bool must_be_unmapped) const;
  // Unmaps and releases one chunk's handle; logs driver errors.
  void unmap_chunk(std::uintptr_t address, unsigned long long handle) noexcept;

  const int device_;
  const CudaDeviceFacts facts_;
  const CudaDriverApi& api_;
  const std::size_t chunk_bytes_;
  CudaStreamOps streams_;
  std::atomic<std::uint64_t> mapped_bytes_{0};

  mutable std::mutex mu_;                           // guards the three maps below
  std::map<std::uintptr_t, std::size_t> reserved_;  // base -> bytes, from reserve_address
  std::unordered_map<std::uintptr_t, unsigned long long>
      handles_;  // chunk address -> its CUmemGenericAllocationHandle
  std::unordered_map<std::uintptr_t, std::size_t> segments_;  // segment base -> bytes reserved and mapped
};

}  // namespace memcoord
