// CudaRuntimeStatus: a CUDA runtime return code (cudaError_t) as a Status. Every CUDA runtime call in
// memcoord goes through it (the allocator's CUDA backends, the NCCL communicator, the GPU tests), so a
// failure names the call, the CUDA error name and its sentence, and picks the code by what the caller
// should do next: out of memory RESOURCE_EXHAUSTED, a missing driver or device UNAVAILABLE, a bad argument
// INVALID_ARGUMENT, anything else INTERNAL. A failed runtime call also leaves a non-sticky "last error"
// behind that a later cudaGetLastError (a kernel-launch check, say) would wrongly report; this clears it.
//
// CUDA-optional: the header needs no CUDA include (codes are plain ints), and the definition is built into
// memcoord_cuda_status only when CMake found the toolkit (MEMCOORD_HAVE_CUDA); code that calls it is
// itself CUDA-only. The driver API's CUresult has its own mapping next to the driver loader
// (allocator/cuda/cuda_driver_status.h). Thread safety: a free function, safe from any thread.
#pragma once

#include <string_view>

#include "common/status.h"

namespace memcoord {

// OK for 0 (cudaSuccess), else "<call>: <ErrorName> (<n>): <sentence>" with a code as described above.
Status CudaRuntimeStatus(int cuda_error, std::string_view call);

}  // namespace memcoord
