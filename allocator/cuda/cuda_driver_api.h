// CudaDriverApi: the few CUDA driver functions memcoord needs (virtual memory management and error text),
// obtained at run time through cudaGetDriverEntryPointByVersion. memcoord never links libcuda: a binary that
// did would not even start on a machine without the driver, and one binary must serve both kinds of machine.
// Only types come from <cuda.h>; the function pointer types are declared here.
//
// LoadCudaDriverApi() resolves every entry point once per process (thread-safe, later calls are a load of a
// pointer) and fails with UNAVAILABLE, naming the missing symbol, where the driver is absent or too old.
// The returned table lives until the process exits.
#pragma once

#include <cuda.h>

#include "common/result.h"

namespace memcoord {

struct CudaDriverApi {
  using MemAddressReserveFn = CUresult (*)(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                           unsigned long long flags);
  using MemAddressFreeFn = CUresult (*)(CUdeviceptr ptr, size_t size);
  using MemCreateFn = CUresult (*)(CUmemGenericAllocationHandle* handle, size_t size,
                                   const CUmemAllocationProp* prop, unsigned long long flags);
  using MemReleaseFn = CUresult (*)(CUmemGenericAllocationHandle handle);
  using MemMapFn = CUresult (*)(CUdeviceptr ptr, size_t size, size_t offset,
                                CUmemGenericAllocationHandle handle, unsigned long long flags);
  using MemUnmapFn = CUresult (*)(CUdeviceptr ptr, size_t size);
  using MemSetAccessFn = CUresult (*)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                      size_t count);
  using MemGetAllocationGranularityFn = CUresult (*)(size_t* granularity, const CUmemAllocationProp* prop,
                                                     CUmemAllocationGranularity_flags option);
  using GetErrorTextFn = CUresult (*)(CUresult error, const char** text);

  MemAddressReserveFn cuMemAddressReserve = nullptr;
  MemAddressFreeFn cuMemAddressFree = nullptr;
  MemCreateFn cuMemCreate = nullptr;
  MemReleaseFn cuMemRelease = nullptr;
  MemMapFn cuMemMap = nullptr;
  MemUnmapFn cuMemUnmap = nullptr;
  MemSetAccessFn cuMemSetAccess = nullptr;
  MemGetAllocationGranularityFn cuMemGetAllocationGranularity = nullptr;
  GetErrorTextFn cuGetErrorName = nullptr;
  GetErrorTextFn cuGetErrorString = nullptr;
};

// The process-wide table, or UNAVAILABLE naming the entry point that could not be resolved.
Result<const CudaDriverApi*> LoadCudaDriverApi();
// The table if LoadCudaDriverApi() has already succeeded, else nullptr. Never loads anything.
const CudaDriverApi* CudaDriverApiIfLoaded();

}  // namespace memcoord
