#include "allocator/cuda/cuda_driver_api.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "common/cuda_status.h"

namespace memcoord {
namespace {

// The driver ABI version the function pointer types above were written against (CUDA 12.0).
constexpr unsigned int kDriverAbiVersion = 12000;

std::atomic<const CudaDriverApi*> g_loaded{nullptr};

template <typename Fn>
Status Resolve(const char* symbol, Fn& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(
      cudaGetDriverEntryPointByVersion(symbol, &address, kDriverAbiVersion, cudaEnableDefault, &found),
      fmt::format("cudaGetDriverEntryPointByVersion({})", symbol)));
  if (found != cudaDriverEntryPointSuccess || address == nullptr) {
    return Unavailable(
        fmt::format("CUDA driver entry point {} not found (query result {}): driver too old or absent",
                    symbol, static_cast<int>(found)));
  }
  fn = reinterpret_cast<Fn>(address);
  return Status::Ok();
}

Status ResolveAll(CudaDriverApi& api) {
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuGetErrorName", api.cuGetErrorName));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuGetErrorString", api.cuGetErrorString));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemAddressReserve", api.cuMemAddressReserve));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemAddressFree", api.cuMemAddressFree));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemCreate", api.cuMemCreate));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemRelease", api.cuMemRelease));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemMap", api.cuMemMap));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemUnmap", api.cuMemUnmap));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemSetAccess", api.cuMemSetAccess));
  MEMCOORD_RETURN_IF_ERROR(Resolve("cuMemGetAllocationGranularity", api.cuMemGetAllocationGranularity));
  return Status::Ok();
}

}  // namespace

Result<const CudaDriverApi*> LoadCudaDriverApi() {
  if (const CudaDriverApi* api = g_loaded.load(std::memory_order_acquire)) return api;
  static std::mutex mu;
  static CudaDriverApi table;  // written once under mu, published through g_loaded
  std::lock_guard<std::mutex> lock(mu);
  if (const CudaDriverApi* api = g_loaded.load(std::memory_order_acquire)) return api;
  CudaDriverApi candidate;
  MEMCOORD_RETURN_IF_ERROR(ResolveAll(candidate));
  table = candidate;
  g_loaded.store(&table, std::memory_order_release);
  return &table;
}

const CudaDriverApi* CudaDriverApiIfLoaded() { return g_loaded.load(std::memory_order_acquire); }

}  // namespace memcoord
