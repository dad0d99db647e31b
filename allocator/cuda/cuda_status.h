// Turning CUDA return codes into Status. Every CUDA runtime or driver call in memcoord goes through one of
// these, so a failure names the call, the CUDA error name and its sentence, and picks the code by what the
// caller should do next: out of memory is RESOURCE_EXHAUSTED, a missing driver or device UNAVAILABLE, a bad
// argument INVALID_ARGUMENT, anything else INTERNAL.
//
// A failed runtime call also leaves a non-sticky "last error" behind that a later cudaGetLastError (a test's
// kernel-launch check, say) would wrongly report; CudaStatus clears it.
// Thread safety: free functions, safe from any thread.
#pragma once

#include <string_view>

#include "common/status.h"

namespace memcoord {

// The CUDA runtime's cudaError_t and the driver's CUresult, as plain ints so this header needs no CUDA
// include. 0 is success for both.
// Returns OK for 0, else "<call>: <ErrorName> (<n>): <sentence>" with a code as described above.
Status CudaRuntimeStatus(int cuda_error, std::string_view call);
Status CudaDriverStatus(int cu_result, std::string_view call);

}  // namespace memcoord
