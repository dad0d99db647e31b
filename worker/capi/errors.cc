#include "worker/capi/errors.h"

#include <cstdio>

namespace memcoord::capi {
namespace {

thread_local std::string t_last_error;

// Assigning a string may itself throw bad_alloc; the last error then holds a fixed text.
void Store(std::string_view text) noexcept {
  try {
    t_last_error.assign(text);
  } catch (...) {
    t_last_error.clear();
  }
}

}  // namespace

int Fail(const Status& status) noexcept {
  try {
    Store(status.ToString());
  } catch (...) {
    Store("error (its message could not be formatted)");
  }
  return static_cast<int>(status.code());
}

int FailNotInitialized(const char* function) noexcept {
  char text[256];
  std::snprintf(text, sizeof(text),
                "FAILED_PRECONDITION: %s: memcoord is not initialized (call memcoord_init() first; after "
                "memcoord_shutdown() nothing but memcoord_init() works)",
                function);
  Store(text);
  return static_cast<int>(StatusCode::kFailedPrecondition);
}

int FailException(const char* function, const char* what, bool out_of_memory) noexcept {
  char text[512];
  std::snprintf(text, sizeof(text), "%s: %s: %s", out_of_memory ? "RESOURCE_EXHAUSTED" : "INTERNAL", function,
                what != nullptr ? what : "");
  Store(text);
  return static_cast<int>(out_of_memory ? StatusCode::kResourceExhausted : StatusCode::kInternal);
}

const char* LastError() noexcept { return t_last_error.c_str(); }

}  // namespace memcoord::capi
