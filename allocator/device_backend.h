// DeviceBackend: where a pool's memory comes from. Two ways to obtain memory, a backend offers one or both:
//   segments:  allocate(bytes) / release(ptr, bytes): whole allocations (cudaMalloc, host malloc).
//   mapping:   reserve_address / map / unmap / free_address: physical memory mapped into reserved address
//              ranges in multiples of chunk_bytes() (CUDA virtual memory, host mmap, or addresses only). Each
//              map call may be one physical allocation, which can only be unmapped whole. A pool on a
//              mapping backend never fragments across segments: free units can be unmapped anywhere and
//              mapped again where a request needs them.
// Streams are opaque ids (0 = the default stream; for CUDA the cudaStream_t value). A backend without
// streams treats every stream operation as already complete.
//
// Thread safety: every method may be called from several threads (pools serialize their own calls, but
// several pools may share one backend). Ownership: a backend must outlive every pool built on it.
// Failure: fallible calls return a Status naming the request; release/unmap/free_address never throw and
// never fail visibly (a driver error there is logged).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"

namespace memcoord {

// A point in a stream's queue (DeviceBackend::record_marker); kNoMarker: none.
using MarkerId = std::uintptr_t;
inline constexpr MarkerId kNoMarker = 0;

using StreamId = std::uintptr_t;
constexpr StreamId kDefaultStream = 0;

struct DeviceInfo {
  std::string kind;  // "virtual", "host", "cuda", "cuda-vmm", "pinned-host"
  std::string name;  // "NVIDIA H200", "host (simulated GPU)"
  int device = -1;   // CUDA ordinal, -1 for host-side backends
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;  // as the driver (or the capacity cap) sees it now
  bool device_memory = false;    // false: host-addressable memory a CPU may touch directly
  // The GPU's UUID as nvidia-smi prints it, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (gpu_uuid.h), read
  // once when a CUDA backend is created. Empty for backends without a GPU (host, virtual, pinned-host): the
  // worker sends it as the `gpu_uuid` label of its metrics, the label dcgm-exporter's series carry as
  // `UUID`, and Prometheus users join the two on it. An empty value is how Prometheus says "no such label"
  // (it joins nothing and groups as absent); a made-up "GPU-..." would look like a real GPU, could match no
  // dcgm series or the wrong one, and the same synthetic value on every host would merge simulated devices
  // of different machines in `by (gpu_uuid)` aggregations.
  std::string uuid;
};

class DeviceBackend {
 public:
  DeviceBackend() = default;
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;
  virtual ~DeviceBackend() = default;

  // --- segments -----------------------------------------------------------------------------------------
  // REQUIRES: bytes > 0. Returns memory aligned to at least 512 bytes, or RESOURCE_EXHAUSTED / UNAVAILABLE.
  Result<void*> allocate(std::size_t bytes);
  // REQUIRES: ptr came from allocate(bytes) with the same bytes and is not yet released.
  void release(void* ptr, std::size_t bytes) noexcept { do_release(ptr, bytes); }
  virtual bool supports_segments() const { return true; }

  // --- mapping (chunk_bytes() == 0 means unsupported) ---------------------------------------------------
  virtual std::size_t chunk_bytes() const { return 0; }
  // Reserves address space only (no memory). REQUIRES: bytes a multiple of chunk_bytes().
  virtual Result<std::uintptr_t> reserve_address(std::size_t bytes);
  // REQUIRES: [base, base+bytes) is exactly a range returned by reserve_address, with nothing mapped.
  virtual void free_address(std::uintptr_t base, std::size_t bytes) noexcept;
  // Backs [address, address+bytes) with new physical memory (one driver allocation where the backend has a
  // driver: the cost is per call, not per byte). REQUIRES: chunk-aligned, inside a reserved range,
  // currently unmapped. On failure nothing stays mapped.
  virtual Status map(std::uintptr_t address, std::size_t bytes);
  // Backs the range that `pieces` tile from `address` on with one physical allocation per piece, as map() of
  // each piece in order would (unmap() later takes whole pieces), all or nothing. The default does exactly
  // that; a backend may share the work the pieces have in common (CUDA VMM sets the access of the whole range
  // with one cuMemSetAccess instead of one per piece). REQUIRES: each piece as map() requires.
  virtual Status map_pieces(std::uintptr_t address, std::span<const std::size_t> pieces);
  // Unmaps and frees the physical memory of [address, address+bytes). REQUIRES: the range is made of whole
  // earlier map() ranges (one or several, adjacent); no work still in flight on that memory (the pool waits
  // for the block's last use first: its marker, or its streams).
  virtual void unmap(std::uintptr_t address, std::size_t bytes) noexcept;

  // --- streams ------------------------------------------------------------------------------------------
  // Makes `waiter` wait (on the device, never blocking the host) for all work queued so far on `producer`.
  virtual Status wait_for(StreamId waiter, StreamId producer);
  // True when all work queued on `stream` has completed. Never blocks.
  virtual bool stream_idle(StreamId stream);
  // Blocks the host until `stream` is idle. Used by trims, OOM recovery, and packing where no marker covers
  // a block; never on allocation hits.
  virtual Status synchronize(StreamId stream);

  // --- stream markers: points in a stream's queue, so a host wait can stop at one (CUDA events) ----------
  // Marks the work queued on `stream` so far; kNoMarker where the backend has none (the default) or the
  // marker could not be made (logged): the caller then falls back to stream_idle/synchronize.
  virtual MarkerId record_marker(StreamId stream);
  // True once all work queued before `marker` has completed. Never blocks. REQUIRES: a recorded marker.
  virtual bool marker_reached(MarkerId marker);
  // Blocks the host until `marker` is reached (not the rest of its stream's queue).
  virtual Status wait_marker(MarkerId marker);
  // Gives the marker back, reached or not; it is not used again.
  virtual void release_marker(MarkerId marker) noexcept;

  // --- budget -------------------------------------------------------------------------------------------
  // Bytes by which taking `more_bytes` more (allocate or map) would pass a budget this backend enforces; 0
  // when it fits or there is none (the default). A LimitAdaptor reports its limit here, and a pool packs its
  // cache under that pressure before it grows.
  virtual std::uint64_t bytes_over_budget(std::uint64_t /*more_bytes*/) const { return 0; }

  // --- facts --------------------------------------------------------------------------------------------
  virtual DeviceInfo device_info() = 0;
  virtual std::string_view kind() const = 0;

 protected:
  virtual Result<void*> do_allocate(std::size_t bytes) = 0;
  virtual void do_release(void* ptr, std::size_t bytes) noexcept = 0;
};

}  // namespace memcoord
