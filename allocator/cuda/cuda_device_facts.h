// What the CUDA backends read about a device: once, when they are created, that it exists, its name and its
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
  std::uint64_t total_bytes = 0;
};

Result<CudaDeviceFacts> ReadCudaDeviceFacts(int device);

// A DeviceInfo for a device-memory backend of `kind`, with free_bytes from cudaMemGetInfo. Never fails: a
// driver error is logged and leaves free_bytes 0.
DeviceInfo ReadCudaDeviceInfo(std::string_view kind, int device, const std::string& name,
                              std::uint64_t total_bytes);

}  // namespace memcoord
