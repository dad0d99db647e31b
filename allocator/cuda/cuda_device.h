// Facts about the CUDA devices of this machine, found at run time. One binary serves machines with and
// without a GPU: where the toolkit is present but no driver or device is (cudaGetDeviceCount returns error
// 35, cudaErrorInsufficientDriver, on such a machine), every probe here reports "no GPU" instead of failing.
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstdint>

#include "common/result.h"

namespace memcoord {

// Number of usable CUDA devices. Any CUDA error (no driver, no device, a stub library) is returned as
// UNAVAILABLE naming it; callers that only want a yes/no use CudaGpuAvailable(). Probed once per process
// (the answer cannot change while it runs), later calls are cheap.
Result<int> CudaDeviceCount();
// True when at least one CUDA device can be used by this process.
bool CudaGpuAvailable();

// Device memory in use on `device` by anything other than memcoord's pools: the CUDA context itself, NCCL's
// buffers, cuBLAS workspaces, other processes sharing the GPU. Computed as
//   (total - free, from cudaMemGetInfo) - held_bytes, clamped at 0,
// where held_bytes is what this process's memcoord pools on that device hold from the driver: the sum of
// their PoolStats::reserved_bytes, or of held_bytes() of the CUDA backends under them.
// The figure is approximate: cudaMalloc rounds every segment up (to 2 MiB above 1 MiB), which shows up here
// as outside use, and cudaMemGetInfo is a snapshot (4-5 us on an H200). Errors: UNAVAILABLE without a GPU,
// INVALID_ARGUMENT for a bad ordinal.
Result<std::uint64_t> DeviceBytesUsedOutside(int device, std::uint64_t held_bytes);

// Makes `device` current on this thread for its lifetime and restores the previous device after, so that a
// backend for GPU 1 can be called from a thread working on GPU 0. Also makes the device's primary context
// current, which the driver-API calls of cuda-vmm need. Check status() before relying on it.
class ScopedCudaDevice {
 public:
  explicit ScopedCudaDevice(int device);
  ~ScopedCudaDevice();
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;

  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  int device_ = -1;
  Status status_;
};

}  // namespace memcoord
