#include "allocator/cuda/cuda_device_facts.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstring>

#include "allocator/cuda/cuda_device.h"
#include "allocator/gpu_uuid.h"
#include "common/cuda_status.h"

namespace memcoord {

Result<CudaDeviceFacts> ReadCudaDeviceFacts(int device) {
  MEMCOORD_ASSIGN_OR_RETURN(int count, CudaDeviceCount());
  if (count == 0) return Unavailable("no CUDA device present");
  if (device < 0 || device >= count) {
    return InvalidArgument(
        fmt::format("CUDA device {} does not exist; {} device(s) present (0..{})", device, count, count - 1));
  }
  ScopedCudaDevice on_device(device);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  cudaDeviceProp props{};
  MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaGetDeviceProperties(&props, device),
                                             fmt::format("cudaGetDeviceProperties({})", device)));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  std::array<std::uint8_t, kGpuUuidBytes> uuid{};
  static_assert(sizeof(props.uuid.bytes) == kGpuUuidBytes);
  std::memcpy(uuid.data(), props.uuid.bytes, uuid.size());
  return CudaDeviceFacts{props.name, FormatGpuUuid(uuid), total_bytes};
}

DeviceInfo ReadCudaDeviceInfo(std::string_view kind, int device, const CudaDeviceFacts& facts) {
  DeviceInfo info;
  info.kind = std::string(kind);
  info.name = facts.name;
  info.uuid = facts.uuid;
  info.device = device;
  info.total_bytes = facts.total_bytes;
  info.device_memory = true;
  ScopedCudaDevice on_device(device);
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  Status status = on_device.status();
  if (status.ok()) status = CudaRuntimeStatus(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  if (status.ok()) {
    info.free_bytes = free_bytes;
  } else {
    spdlog::warn("{} backend (device {}): {}", kind, device, status.ToString());
  }
  return info;
}

}  // namespace memcoord
