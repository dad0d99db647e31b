// CudaBackend ("cuda"): device memory in whole segments from cudaMalloc / cudaFree on one GPU, the way
// PyTorch's native allocator grows. Segments only (no mapping). Every segment call is a driver round trip
// (61-91 us a pair on an H200 for up to 64 MiB, 439 us at 1 GiB), which is why a CachingPool sits on top.
//
// Streams: cudaEventRecord + cudaStreamWaitEvent, cudaStreamQuery, cudaStreamSynchronize (CudaStreamOps).
// Facts: device_info() from cudaMemGetInfo (free/total) and the name and UUID read once at creation.
// held_bytes(): the bytes of segments currently held, for DeviceBytesUsedOutside().
//
// Thread safety: all methods are thread-safe. Every call makes the backend's device current for its duration
// and restores the caller's device afterwards. Ownership: the backend must outlive its pools; destroying it
// with segments still held leaks them (they are reported).
// Failure: a request larger than the device (or 0) never reaches the driver; driver out-of-memory is
// RESOURCE_EXHAUSTED naming the request and the device's free bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "allocator/cuda/cuda_device_facts.h"
#include "allocator/cuda/cuda_stream_ops.h"
#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

class CudaBackend final : public DeviceBackend {
 public:
  // Errors: UNAVAILABLE without a usable GPU, INVALID_ARGUMENT for an ordinal that does not exist.
  static Result<std::unique_ptr<CudaBackend>> Create(int device = 0);
  ~CudaBackend() override;

  Status wait_for(StreamId waiter, StreamId producer) override { return streams_.wait_for(waiter, producer); }
  bool stream_idle(StreamId stream) override { return streams_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return streams_.synchronize(stream); }
  MarkerId record_marker(StreamId stream) override { return streams_.record_marker(stream); }
  bool marker_reached(MarkerId marker) override { return streams_.marker_reached(marker); }
  Status wait_marker(MarkerId marker) override { return streams_.wait_marker(marker); }
  void release_marker(MarkerId marker) noexcept override { streams_.release_marker(marker); }

  DeviceInfo device_info() override;
  std::string_view kind() const override { return "cuda"; }

  int device() const { return device_; }
  std::uint64_t held_bytes() const { return held_bytes_.load(std::memory_order_relaxed); }

 private:
  CudaBackend(int device, CudaDeviceFacts facts);
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;

  const int device_;
  const CudaDeviceFacts facts_;
  CudaStreamOps streams_;
  std::atomic<std::uint64_t> held_bytes_{0};
};

}  // namespace memcoord
