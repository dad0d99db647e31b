// A GPU's UUID as text, the way nvidia-smi (`nvidia-smi -L`, `--query-gpu=uuid`), NVML and dcgm-exporter's
// `UUID` label write it: "GPU-" and the 16 bytes of cudaDeviceProp::uuid / cuDeviceGetUuid as lowercase hex
// in the 8-4-4-4-12 grouping of RFC 4122, e.g. "GPU-5f4e5c1b-9a7d-2b3c-8e6f-0123456789ab" (40 characters).
// Pure formatting, no CUDA: tested on machines without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace memcoord {

constexpr std::size_t kGpuUuidBytes = 16;
constexpr std::size_t kGpuUuidTextLength = 40;  // "GPU-" + 32 hex digits + 4 dashes

std::string FormatGpuUuid(const std::array<std::uint8_t, kGpuUuidBytes>& bytes);

}  // namespace memcoord
