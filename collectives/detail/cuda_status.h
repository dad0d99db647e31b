// CudaStatus: a CUDA runtime return code as a Status, for the NCCL communicator (which must not depend on the
// allocator's helpers): OK for cudaSuccess, else "<call>: <ErrorName> (<n>): <sentence>" with a code that
// says what to do next (out of memory RESOURCE_EXHAUSTED, no driver or device UNAVAILABLE, a bad argument
// INVALID_ARGUMENT, else INTERNAL). Clears the non-sticky last error the failed call left behind.
// Built only with CUDA (MEMCOORD_HAVE_NCCL). Thread safety: safe from any thread.
#pragma once

#include <string_view>

#include "common/status.h"

namespace memcoord::detail {

Status CudaStatus(int cuda_error, std::string_view call);

}  // namespace memcoord::detail
