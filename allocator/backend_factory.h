// Builds a DeviceBackend by name, as the CLI and the worker take it: "virtual", "host", "cuda", "cuda-vmm",
// "pinned-host", or "auto" (cuda-vmm where a GPU is present at run time, host otherwise).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

struct BackendOptions {
  int device = 0;                    // CUDA ordinal for cuda kinds
  std::uint64_t capacity_bytes = 0;  // host/virtual: the simulated device's size; 0: the default (H200-like)
};

// Errors: INVALID_ARGUMENT naming the accepted kinds; UNAVAILABLE for a GPU kind without a GPU.
Result<std::unique_ptr<DeviceBackend>> MakeBackend(std::string_view kind, const BackendOptions& options = {});

// True when a CUDA device can be used by this process (any CUDA error at start-up means no GPU).
bool GpuAvailable();

}  // namespace memcoord
