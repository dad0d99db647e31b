// Abort entry points (memcoord.h): what the coordinator's Abort told this process, a wait for it, and a
// callback. The Worker's session thread delivers the abort into Runtime::abort (runtime.cc DeliverAbort);
// memcoord_shutdown sets `closing` and wakes every waiter before it waits for calls in flight.
#include <fmt/format.h>

#include <chrono>

#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

namespace {

using memcoord::capi::Boundary;
using memcoord::capi::CallGuard;
using memcoord::capi::Fail;
using memcoord::capi::FailNotInitialized;

std::string AbortText(const memcoord::AbortInfo& info) {
  return fmt::format("the coordinator aborted this group: dead rank {}: {}", info.dead_rank, info.reason);
}

}  // namespace

extern "C" {

int memcoord_abort_info_get(memcoord_abort_info* out) {
  return Boundary("memcoord_abort_info_get", 13, [&] {
    if (out == nullptr) return Fail(memcoord::InvalidArgument("memcoord_abort_info_get: out is NULL"));
    if (out->struct_size < MEMCOORD_ABORT_INFO_V1_SIZE) {
      return Fail(memcoord::InvalidArgument(fmt::format(
          "memcoord_abort_info_get: struct_size {} is smaller than version 1 needs ({}); set it to "
          "sizeof(memcoord_abort_info)",
          out->struct_size, MEMCOORD_ABORT_INFO_V1_SIZE)));
    }
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_abort_info_get");
    std::optional<memcoord::AbortInfo> info;
    {
      std::lock_guard lock(guard.runtime()->abort.mu);
      info = guard.runtime()->abort.info;
    }
    memcoord::capi::FillAbortInfo(info, *out);
    return 0;
  });
}

int memcoord_wait_abort(int timeout_ms) {
  return Boundary("memcoord_wait_abort", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_wait_abort");
    memcoord::capi::AbortState& state = guard.runtime()->abort;
    std::unique_lock lock(state.mu);
    auto done = [&] { return state.info.has_value() || state.closing; };
    if (timeout_ms < 0) {
      state.cv.wait(lock, done);
    } else if (!state.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
      return Fail(
          memcoord::DeadlineExceeded(fmt::format("memcoord_wait_abort: no abort within {} ms", timeout_ms)));
    }
    if (state.info) return Fail(memcoord::Aborted(AbortText(*state.info)));
    return Fail(memcoord::FailedPrecondition("memcoord_wait_abort: memcoord_shutdown() began"));
  });
}

int memcoord_set_abort_callback(memcoord_abort_callback callback, void* user) {
  return Boundary("memcoord_set_abort_callback", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_set_abort_callback");
    memcoord::capi::AbortState& state = guard.runtime()->abort;
    std::optional<memcoord::AbortInfo> already;
    {
      std::unique_lock lock(state.mu);
      // callback_ran is per callback: a new one set after the abort runs at once, here.
      state.callback = callback;
      state.user = user;
      state.callback_ran = false;
      // The callback replaced may be running on memcoord's thread: once this returns, the caller may free
      // what it gave that one. Not from inside a callback, which would wait for itself.
      if (!memcoord::capi::InAbortCallback()) {
        state.cv.wait(lock, [&] { return state.callbacks_running == 0; });
      }
      if (callback != nullptr && state.info) {
        state.callback_ran = true;
        already = state.info;
        ++state.callbacks_running;
      }
    }
    if (already) memcoord::capi::RunAbortCallback(state, callback, user, *already);
    return 0;
  });
}

int memcoord_set_abort_exit(int exit_code, int grace_ms) {
  return Boundary("memcoord_set_abort_exit", 13, [&] {
    if (exit_code < 0 || exit_code > 255 || grace_ms < 0 || grace_ms > 600000) {
      return Fail(memcoord::InvalidArgument(fmt::format(
          "memcoord_set_abort_exit: exit_code {} and grace_ms {}; accepted: exit_code 1..255 (0: off) and "
          "grace_ms 0..600000",
          exit_code, grace_ms)));
    }
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_set_abort_exit");
    memcoord::capi::Runtime& runtime = *guard.runtime();
    std::lock_guard lock(runtime.abort.mu);
    runtime.abort.exit_code = exit_code;
    runtime.abort.exit_grace_ms = grace_ms;
    if (exit_code != 0 && runtime.abort.info && !runtime.abort.exit_timer_started) {
      // Marked only once it runs: after a failure, a later call may try again.
      const memcoord::Status timer = memcoord::capi::StartAbortExitTimer(
          *runtime.abort.info, runtime.worker->topology().rank, exit_code, grace_ms);
      if (!timer.ok()) return Fail(timer);
      runtime.abort.exit_timer_started = true;
    }
    return 0;
  });
}

}  // extern "C"
