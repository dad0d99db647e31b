// Runtime helpers shared by the entry points: the per-device default pool table and abort delivery.
#include "worker/capi/runtime.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace memcoord::capi {
namespace {

// How long the exit backstop waits for its message to reach stderr before it ends the process anyway.
constexpr std::chrono::milliseconds kStderrWait{200};
thread_local bool t_in_abort_callback = false;

void LogTimerFailure(const Status& status) noexcept {
  try {
    spdlog::error("{}; the abort is delivered without it", status.ToString());
  } catch (...) {  // logging is best effort here
  }
}
}  // namespace

Result<CachingPool*> MakeDevicePool(Runtime& runtime, int device) {
  if (device == -1) device = runtime.primary_device;
  // First use on this device (or a bad index, which the worker names in its error).
  MEMCOORD_ASSIGN_OR_RETURN(CachingPool * pool, runtime.worker->device_pool(device));
  if (device < 0 || device >= kMaxDevices) {
    return InvalidArgument(
        fmt::format("device {} is out of range (at most {} devices)", device, kMaxDevices));
  }
  runtime.devices[device].default_pool.store(pool, std::memory_order_release);
  return pool;
}

bool InAbortCallback() noexcept { return t_in_abort_callback; }

void FillAbortInfo(const std::optional<AbortInfo>& info, memcoord_abort_info& out) noexcept {
  const std::size_t size = out.struct_size;
  memcoord_abort_info filled{};
  filled.struct_size = size;
  filled.dead_rank = -1;
  if (info) {
    filled.aborted = 1;
    filled.dead_rank = info->dead_rank;
    filled.time_unix_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(info->time.time_since_epoch()).count();
    std::strncpy(filled.reason, info->reason.c_str(), sizeof(filled.reason) - 1);
  }
  std::memcpy(&out, &filled, std::min(size, sizeof(filled)));
}

void RunAbortCallback(AbortState& state, memcoord_abort_callback callback, void* user,
                      const AbortInfo& info) noexcept {
  memcoord_abort_info c{};
  c.struct_size = sizeof(c);
  FillAbortInfo(info, c);
  // Restored, not cleared: a callback may set another, which runs at once inside it (abort.cc), and the
  // outer callback is still running when the inner returns.
  const bool outer = t_in_abort_callback;
  t_in_abort_callback = true;
  callback(&c, user);
  t_in_abort_callback = outer;
  {
    std::lock_guard lock(state.mu);
    --state.callbacks_running;
  }
  state.cv.notify_all();
}

Status StartAbortExitTimer(const AbortInfo& info, int rank, int exit_code, int grace_ms) noexcept {
  try {
    const std::string message = fmt::format(
        "memcoord: rank {}: the job was aborted by the coordinator: dead rank {}: {}; the process did not "
        "end within {} ms, so memcoord ends it with exit code {}\n",
        rank, info.dead_rank, info.reason, grace_ms, exit_code);
    std::thread([message, exit_code, grace_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(grace_ms));
      // write(2) and _exit only: the process's own locks (stdio's, the interpreter's) may be held for good.
      // The write runs on a thread of its own and gets kStderrWait: stderr may be a pipe nobody reads (a
      // full pipe blocks write(2) for good), and the process must end regardless.
      auto written = std::make_shared<std::atomic<bool>>(false);
      try {
        std::thread([message, written] {
          std::size_t done = 0;
          while (done < message.size()) {
            const ssize_t n = ::write(2, message.data() + done, message.size() - done);
            if (n <= 0) break;
            done += static_cast<std::size_t>(n);
          }
          written->store(true, std::memory_order_release);
        }).detach();
        const auto give_up = std::chrono::steady_clock::now() + kStderrWait;
        while (!written->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      } catch (...) {  // no thread for the message: end without it
      }
      ::_exit(exit_code);
    }).detach();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal(std::string("memcoord_set_abort_exit: its timer could not start: ") + e.what());
  } catch (...) {
    return Internal("memcoord_set_abort_exit: its timer could not start");
  }
}

// Every step that can fail comes after the state is set: waiters are woken and the callback runs even when
// the exit timer cannot start (its failure is logged; the session thread must not see an exception).
void DeliverAbort(Runtime& runtime, const AbortInfo& info) {
  memcoord_abort_callback callback = nullptr;
  void* user = nullptr;
  {
    std::lock_guard lock(runtime.abort.mu);
    if (runtime.abort.info) return;
    runtime.abort.info = info;
    // Started under the lock, as memcoord_set_abort_exit does, so that at most one timer starts; before
    // the callback, so that a callback that never returns cannot keep the backstop from firing.
    if (runtime.abort.exit_code != 0 && !runtime.abort.exit_timer_started) {
      const Status timer = StartAbortExitTimer(info, runtime.worker->topology().rank, runtime.abort.exit_code,
                                               runtime.abort.exit_grace_ms);
      if (timer.ok()) {
        runtime.abort.exit_timer_started = true;
      } else {
        LogTimerFailure(timer);
      }
    }
    if (runtime.abort.callback != nullptr && !runtime.abort.callback_ran) {
      runtime.abort.callback_ran = true;
      callback = runtime.abort.callback;
      user = runtime.abort.user;
      ++runtime.abort.callbacks_running;
    }
  }
  runtime.abort.cv.notify_all();
  if (callback != nullptr) RunAbortCallback(runtime.abort, callback, user, info);
}

}  // namespace memcoord::capi
