// The CUDA backends behind one include and without CUDA types, for the backend factory and the CLI:
//   MakeCudaBackend(kind, device) for kind "cuda" | "cuda-vmm" | "pinned-host";
//   CudaGpuAvailable() / CudaDeviceCount() / DeviceBytesUsedOutside() (allocator/cuda/cuda_device.h).
// It also defines GpuAvailable() of allocator/backend_factory.h (CudaGpuAvailable) in CUDA builds.
// Defined only where the build has the CUDA toolkit (MEMCOORD_HAVE_CUDA); callers guard with that macro.
// A GPU kind without a GPU at run time returns UNAVAILABLE (the probe's error named), never crashes.
#pragma once

#include <memory>
#include <string_view>

#include "allocator/cuda/cuda_device.h"
#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

// True for "cuda", "cuda-vmm" and "pinned-host".
bool IsCudaBackendKind(std::string_view kind);

// Errors: INVALID_ARGUMENT for another kind or a bad ordinal; UNAVAILABLE without a usable GPU.
Result<std::unique_ptr<DeviceBackend>> MakeCudaBackend(std::string_view kind, int device = 0);

}  // namespace memcoord
