#include "allocator/cuda/cuda_backends.h"

#include <fmt/format.h>

#include "allocator/backend_factory.h"
#include "allocator/cuda/cuda_backend.h"
#include "allocator/cuda/cuda_vmm_backend.h"
#include "allocator/cuda/pinned_host_backend.h"

namespace memcoord {
namespace {

template <typename Backend>
Result<std::unique_ptr<DeviceBackend>> Upcast(Result<std::unique_ptr<Backend>> made) {
  if (!made.ok()) return made.status();
  return std::unique_ptr<DeviceBackend>(std::move(made).value());
}

}  // namespace

// Declared in allocator/backend_factory.h; defined here where the build has CUDA (the factory defines it as
// false otherwise).
bool GpuAvailable() { return CudaGpuAvailable(); }

bool IsCudaBackendKind(std::string_view kind) {
  return kind == "cuda" || kind == "cuda-vmm" || kind == "pinned-host";
}

Result<std::unique_ptr<DeviceBackend>> MakeCudaBackend(std::string_view kind, int device) {
  if (kind == "cuda") return Upcast(CudaBackend::Create(device));
  if (kind == "cuda-vmm") return Upcast(CudaVmmBackend::Create(device));
  if (kind == "pinned-host") return Upcast(PinnedHostBackend::Create(device));
  return InvalidArgument(
      fmt::format("'{}' is not a CUDA backend kind; expected cuda, cuda-vmm or pinned-host", kind));
}

}  // namespace memcoord
