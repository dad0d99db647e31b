#include "worker/capi/errors.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/thread_exit_key.h"

namespace memcoord::capi {
namespace {

// Not a std::string: a thread_local with a destructor is destroyed before the thread's pthread key
// destructors run, and a key destructor that makes a failing memcoord call (freeing a per-thread block at
// exit, a common C pattern) wrote into, and freed again, a string already freed. The text lives in a heap
// buffer that a pthread key frees; a key destructor storing an error after that one ran gets a new buffer,
// which glibc's next destructor pass frees. The thread_locals are trivially destructible (and small: the
// library's TLS may have to fit the static TLS block of a process that dlopens it). Texts longer than the
// buffer end in kTruncated.
constexpr std::size_t kLastErrorBytes = 4096;
constexpr std::string_view kTruncated = " ... (truncated)";
constexpr const char* kNoBufferText =
    "RESOURCE_EXHAUSTED: the error text could not be stored (no host memory)";
thread_local char* t_buffer = nullptr;
thread_local const char* t_last_error = "";

void FreeBuffer(void* buffer) {
  std::free(buffer);
  t_buffer = nullptr;
  t_last_error = "";
}

ThreadExitKey g_buffer_key(&FreeBuffer);

// This thread's buffer, made on its first error; nullptr when no memory is left. Without a key (every
// pthread key taken) the buffer is not freed at thread exit.
char* Buffer() noexcept {
  if (t_buffer == nullptr) {
    auto* buffer = static_cast<char*>(std::malloc(kLastErrorBytes));
    if (buffer == nullptr) return nullptr;
    (void)g_buffer_key.set(buffer);
    t_buffer = buffer;
  }
  return t_buffer;
}

void Store(std::string_view text) noexcept {
  char* buffer = Buffer();
  if (buffer == nullptr) {
    t_last_error = kNoBufferText;
    return;
  }
  if (text.size() < kLastErrorBytes) {
    std::memcpy(buffer, text.data(), text.size());
    buffer[text.size()] = '\0';
  } else {
    const std::size_t kept = kLastErrorBytes - 1 - kTruncated.size();
    std::memcpy(buffer, text.data(), kept);
    std::memcpy(buffer + kept, kTruncated.data(), kTruncated.size());
    buffer[kLastErrorBytes - 1] = '\0';
  }
  t_last_error = buffer;
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

const char* LastError() noexcept { return t_last_error; }

}  // namespace memcoord::capi
