#include "common/cuda_status.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

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

}  // namespace

Status CudaRuntimeStatus(int cuda_error, std::string_view call) {
  if (cuda_error == 0) return Status::Ok();
  const auto error = static_cast<cudaError_t>(cuda_error);
  (void)cudaGetLastError();  // clear the non-sticky error this call left behind
  return Status(RuntimeCode(error), fmt::format("{}: {} ({}): {}", call, cudaGetErrorName(error), cuda_error,
                                                cudaGetErrorString(error)));
}

}  // namespace memcoord
