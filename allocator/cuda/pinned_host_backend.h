// PinnedHostBackend ("pinned-host"): page-locked host memory from cudaHostAlloc (portable: usable with every
// device's streams) in whole segments, so a CachingPool can cache staging buffers for data loading and
// host<->device copies run asynchronously at full speed. Segments only. Pinning is slow (the kernel locks
// every page) and takes RAM away from everything else, hence the pool in front.
//
// Streams: CudaStreamOps on `device`, the GPU whose streams copy from and to these buffers.
// Facts: device_info() reports host memory (kind "pinned-host", device -1, device_memory false), total from
// the physical pages, free from /proc/meminfo's MemAvailable. held_bytes(): bytes pinned now.
//
// Thread safety: all methods are thread-safe. Ownership: the backend must outlive its pools.
// Failure: a request larger than the machine's RAM never reaches the driver; a refused pin is
// RESOURCE_EXHAUSTED naming the request and the memory available.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "allocator/cuda/cuda_stream_ops.h"
#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

class PinnedHostBackend final : public DeviceBackend {
 public:
  // Errors: UNAVAILABLE without a usable GPU (pinning needs the driver), INVALID_ARGUMENT for a bad ordinal.
  static Result<std::unique_ptr<PinnedHostBackend>> Create(int device = 0);
  ~PinnedHostBackend() override;

  Status wait_for(StreamId waiter, StreamId producer) override { return streams_.wait_for(waiter, producer); }
  bool stream_idle(StreamId stream) override { return streams_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return streams_.synchronize(stream); }
  MarkerId record_marker(StreamId stream) override { return streams_.record_marker(stream); }
  bool marker_reached(MarkerId marker) override { return streams_.marker_reached(marker); }
  Status wait_marker(MarkerId marker) override { return streams_.wait_marker(marker); }
  void release_marker(MarkerId marker) noexcept override { streams_.release_marker(marker); }

  DeviceInfo device_info() override;
  std::string_view kind() const override { return "pinned-host"; }

  std::uint64_t held_bytes() const { return held_bytes_.load(std::memory_order_relaxed); }

 private:
  PinnedHostBackend(int device, std::uint64_t total_bytes);
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;

  const int device_;
  const std::uint64_t total_bytes_;  // physical RAM
  CudaStreamOps streams_;
  std::atomic<std::uint64_t> held_bytes_{0};
};

}  // namespace memcoord
