// Errors at the C boundary: the calling thread's last error text (memcoord_last_error) and Boundary(),
// which runs an entry point's body and turns any exception into a status code and a message naming the
// entry point, so that nothing thrown ever crosses into C.
#pragma once

#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace memcoord::capi {

// Records `status` as this thread's last error; returns its code.
int Fail(const Status& status) noexcept;
// FAILED_PRECONDITION: `function` was called before memcoord_init() or after memcoord_shutdown().
int FailNotInitialized(const char* function) noexcept;
// Records an exception caught in `function`; returns INTERNAL (or RESOURCE_EXHAUSTED for bad_alloc).
int FailException(const char* function, const char* what, bool out_of_memory) noexcept;
const char* LastError() noexcept;

template <typename R, typename Body>
R Boundary(const char* function, R on_exception, Body&& body) noexcept {
  try {
    return std::forward<Body>(body)();
  } catch (const std::bad_alloc&) {
    (void)FailException(function, "host memory exhausted", true);
  } catch (const std::exception& e) {
    (void)FailException(function, e.what(), false);
  } catch (...) {
    (void)FailException(function, "unknown exception", false);
  }
  return on_exception;
}

}  // namespace memcoord::capi
