#include "collectives/detail/cuda_status.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace memcoord::detail {
namespace {

StatusCode Code(cudaError_t error) {
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

Status CudaStatus(int cuda_error, std::string_view call) {
  if (cuda_error == 0) return Status::Ok();
  const auto error = static_cast<cudaError_t>(cuda_error);
  (void)cudaGetLastError();
  return Status(Code(error), fmt::format("{}: {} ({}): {}", call, cudaGetErrorName(error), cuda_error,
                                         cudaGetErrorString(error)));
}

}  // namespace memcoord::detail
