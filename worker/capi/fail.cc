// memcoord_fail (memcoord.h): a process that is about to end because it failed says so, so the coordinator
// aborts its group at once instead of waiting for the session to break (or, worse, seeing a clean detach at
// exit and aborting nobody, which left the peers waiting in a collective for NCCL's timeout).
//
// Only the session ends here (Worker::fail, bounded like memcoord_shutdown's detach): the pools stay, so a
// PyTorch that still frees tensors during its teardown frees into live pools; memcoord_shutdown() (or the
// process's end) releases them later, as it would have.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

namespace {

using memcoord::capi::Boundary;
using memcoord::capi::CallGuard;
using memcoord::capi::Fail;
using memcoord::capi::FailNotInitialized;

// Longer reasons are cut (memcoord.h); the session then makes the cut valid UTF-8.
constexpr std::size_t kMaxReasonBytes = 1000;
constexpr const char* kNoReason = "failed (memcoord_fail was given no reason)";

}  // namespace

extern "C" {

int memcoord_fail(const char* reason) {
  return Boundary("memcoord_fail", 13, [&] {
    if (memcoord::capi::InAbortCallback()) {
      // The callback runs on the session's thread (or is waited for by it), which Worker::fail stops.
      return Fail(memcoord::FailedPrecondition(
          "memcoord_fail: called from inside the abort callback, on the session thread it would have to "
          "stop; call it from another thread, or after the callback returned"));
    }
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_fail");
    std::string text = kNoReason;
    if (reason != nullptr && *reason != '\0') {
      text.assign(reason, ::strnlen(reason, kMaxReasonBytes));
    }
    guard.runtime()->worker->fail(std::move(text));
    return 0;
  });
}

}  // extern "C"
