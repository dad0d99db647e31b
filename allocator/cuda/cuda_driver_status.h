// CudaDriverStatus: a CUDA driver API return code (CUresult) as a Status, for the driver calls the
// virtual-memory backend makes through the entry points cuda_driver_api.h loads. Like CudaRuntimeStatus
// (common/cuda_status.h, for runtime calls): OK for 0, else "<call>: <ErrorName> (<n>): <sentence>", the
// name and sentence from the loaded driver (when it is not loaded: CUDA_ERROR_UNKNOWN, "unknown driver
// error"), and a code by what the caller should do next: out of memory RESOURCE_EXHAUSTED, no driver or
// device (or not supported) UNAVAILABLE, a bad argument INVALID_ARGUMENT, anything else INTERNAL.
// Thread safety: a free function, safe from any thread.
#pragma once

#include <string_view>

#include "common/status.h"

namespace memcoord {

// CUresult as a plain int, so this header needs no CUDA include.
Status CudaDriverStatus(int cu_result, std::string_view call);

}  // namespace memcoord
