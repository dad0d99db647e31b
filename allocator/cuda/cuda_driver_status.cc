#include "allocator/cuda/cuda_driver_status.h"

#include <cuda.h>
#include <fmt/format.h>

#include "allocator/cuda/cuda_driver_api.h"

namespace memcoord {
namespace {

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
