#include "allocator/backend_factory.h"

#include <fmt/format.h>

#include "allocator/host_backend.h"
#include "allocator/virtual_backend.h"
#ifdef MEMCOORD_HAVE_CUDA
#include "allocator/cuda/cuda_backends.h"  // also defines GpuAvailable()
#endif

namespace memcoord {

#ifndef MEMCOORD_HAVE_CUDA
bool GpuAvailable() { return false; }
#endif

namespace {

Result<std::unique_ptr<DeviceBackend>> MakeCudaKind(std::string_view kind, const BackendOptions& options);

}  // namespace

Result<std::unique_ptr<DeviceBackend>> MakeBackend(std::string_view kind, const BackendOptions& options) {
  if (kind == "virtual") {
    return std::unique_ptr<DeviceBackend>(std::make_unique<VirtualBackend>(
        options.capacity_bytes != 0 ? options.capacity_bytes : VirtualBackend::kDefaultCapacityBytes));
  }
  if (kind == "host")
    return std::unique_ptr<DeviceBackend>(std::make_unique<HostBackend>(options.capacity_bytes));
  if (kind == "auto") {
    if (GpuAvailable()) return MakeCudaKind("cuda-vmm", options);
    return std::unique_ptr<DeviceBackend>(std::make_unique<HostBackend>(options.capacity_bytes));
  }
  if (kind == "cuda" || kind == "cuda-vmm" || kind == "pinned-host") return MakeCudaKind(kind, options);
  return InvalidArgument(
      fmt::format("unknown backend '{}'; accepted: virtual, host, cuda, cuda-vmm, pinned-host, auto", kind));
}

namespace {

Result<std::unique_ptr<DeviceBackend>> MakeCudaKind(std::string_view kind, const BackendOptions& options) {
#ifdef MEMCOORD_HAVE_CUDA
  auto made = MakeCudaBackend(kind, options.device);
  if (made.ok() || made.status().code() != StatusCode::kUnavailable) return made;
  // The probe's error says what the driver said, not which backend asked for a GPU nor what runs without one.
  return Unavailable(
      fmt::format("backend '{}' found no CUDA GPU to use: {}; backends that need none: host, virtual", kind,
                  made.status().message()));
#else
  (void)options;
  return Unavailable(fmt::format(
      "backend '{}' found no CUDA GPU to use: this build has no CUDA toolkit; backends that need none: host, "
      "virtual",
      kind));
#endif
}

}  // namespace
}  // namespace memcoord
