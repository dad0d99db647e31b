#include "allocator/cuda/cuda_device.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>

#include "common/cuda_status.h"

namespace memcoord {

Result<int> CudaDeviceCount() {
  static std::once_flag once;
  static Status probe_status;
  static int count = 0;
  std::call_once(once, [] {
    int n = 0;
    const cudaError_t error = cudaGetDeviceCount(&n);
    if (error != cudaSuccess) {
      probe_status = Unavailable(CudaRuntimeStatus(error, "cudaGetDeviceCount").message() +
                                 " (treated as: no GPU on this machine)");
      return;
    }
    count = n;
  });
  if (!probe_status.ok()) return probe_status;
  return count;
}

bool CudaGpuAvailable() {
  Result<int> count = CudaDeviceCount();
  return count.ok() && *count > 0;
}

Result<std::uint64_t> DeviceBytesUsedOutside(int device, std::uint64_t held_bytes) {
  MEMCOORD_ASSIGN_OR_RETURN(int count, CudaDeviceCount());
  if (device < 0 || device >= count) {
    return InvalidArgument(
        fmt::format("DeviceBytesUsedOutside: device {} out of range, {} device(s) present", device, count));
  }
  ScopedCudaDevice on_device(device);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  const std::uint64_t used = total_bytes - free_bytes;
  return used > held_bytes ? used - held_bytes : 0;
}

ScopedCudaDevice::ScopedCudaDevice(int device) : device_(device) {
  status_ = CudaRuntimeStatus(cudaGetDevice(&previous_), "cudaGetDevice");
  if (!status_.ok()) return;
  // Always set, even when already current: cudaSetDevice binds the primary context to this thread, which a
  // thread that has made no runtime call yet lacks and the driver API (cuMemCreate, cuMemMap) needs.
  status_ = CudaRuntimeStatus(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (!status_.ok() || previous_ < 0 || previous_ == device_) return;
  const Status restored = CudaRuntimeStatus(cudaSetDevice(previous_), "cudaSetDevice (restore)");
  if (!restored.ok()) spdlog::warn("{}", restored.ToString());
}

}  // namespace memcoord
