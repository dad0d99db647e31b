#include "allocator/cuda/cuda_status.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "allocator/cuda/cuda_driver_api.h"

namespace memcoord {
namespace {

StatusCode RuntimeCode(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return StatusCode::kResourceExhausted;
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
      return StatusCode::kUnavailable;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return StatusCode::kInvalidArgument;
    default:
      return StatusCode::kInternal;
  }
}

StatusCode DriverCode(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return StatusCode::kResourceExhausted;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NOT_SUPPORTED:
      return StatusCode::kUnavailable;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      return StatusCode::kInvalidArgument;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

Status CudaRuntimeStatus(int cuda_error, std::string_view call) {
  if (cuda_error == 0) return Status::Ok();
  const auto error = static_cast<cudaError_t>(cuda_error);
  (void)cudaGetLastError();  // clear the non-sticky error this call left behind
  return Status(RuntimeCode(error), fmt::format("{}: {} ({}): {}", call, cudaGetErrorName(error), cuda_error,
                                                cudaGetErrorString(error)));
}

Status CudaDriverStatus(int cu_result, std::string_view call) {
  if (cu_result == 0) return Status::Ok();
  const auto result = static_cast<CUresult>(cu_result);
  const char* name = "CUDA_ERROR_UNKNOWN";
  const char* sentence = "unknown driver error";
  if (const CudaDriverApi* api = CudaDriverApiIfLoaded()) {
    if (api->cuGetErrorName) api->cuGetErrorName(result, &name);
    if (api->cuGetErrorString) api->cuGetErrorString(result, &sentence);
  }
  return Status(DriverCode(result), fmt::format("{}: {} ({}): {}", call, name, cu_result, sentence));
}

}  // namespace memcoord
