// What the CUDA backends read about a device: once, when they are created, that it exists, its name, UUID and
// total memory (ReadCudaDeviceFacts checks the ordinal against the device count, so a backend for a missing
// GPU fails at creation: UNAVAILABLE without any GPU, INVALID_ARGUMENT for an ordinal out of range); and on
// every device_info() call, the free bytes now (ReadCudaDeviceInfo, one cudaMemGetInfo, about 4.4 us).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

struct CudaDeviceFacts {
  std::string name;  // "NVIDIA H200"
  // cudaDeviceProp::uuid (cuDeviceGetUuid) as nvidia-smi prints it (gpu_uuid.h). On a MIG instance CUDA gives
  // the instance's UUID, which nvidia-smi prints as "MIG-..." and dcgm-exporter does not put in `UUID` (it
  // labels MIG series with the parent GPU's UUID): this value then matches neither. Not handled: the CUDA
  // runtime cannot tell a MIG instance from a whole GPU (NVML could).
  std::string uuid;
  std::uint64_t total_bytes = 0;
};

Result<CudaDeviceFacts> ReadCudaDeviceFacts(int device);

// A DeviceInfo for a device-memory backend of `kind` on `device` with `facts`, with free_bytes from
// cudaMemGetInfo. Never fails: a driver error is logged and leaves free_bytes 0.
DeviceInfo ReadCudaDeviceInfo(std::string_view kind, int device, const CudaDeviceFacts& facts);

}  // namespace memcoord
