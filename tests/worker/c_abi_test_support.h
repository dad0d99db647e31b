// What the C ABI's lifetime and abort tests share: an environment set for a scope, the calls that hammer the
// entry points while memcoord shuts down and starts again (a torch-hook pair, a device allocation), and their
// tally (each either succeeds or fails with a clear "not initialized"/"not found"; anything else is a test
// failure naming the call). Test-only.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/memcoord.h"

namespace memcoord::testing {

// Sets environment variables for a scope and restores what was there before (unset when nothing was).
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      setenv(name, value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        setenv(it->first, it->second->c_str(), 1);
      } else {
        unsetenv(it->first);
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

// What the hammering threads' calls returned.
struct CallCounts {
  std::atomic<long> ok{0};
  std::atomic<long> not_initialized{0};
  std::atomic<long> not_found{0};
  std::atomic<long> other{0};
};

inline bool SaysNotInitialized() {
  return std::string(memcoord_last_error()).find("not initialized") != std::string::npos;
}

// Counts `code`, which `call` returned: 0, FAILED_PRECONDITION saying "not initialized", or NOT_FOUND (a
// block of a worker that was shut down meanwhile, freed into the next one); anything else fails the test.
inline void Classify(CallCounts& counts, int code, const char* call) {
  if (code == 0) {
    ++counts.ok;
  } else if (code == MEMCOORD_ERR_FAILED_PRECONDITION && SaysNotInitialized()) {
    ++counts.not_initialized;
  } else if (code == MEMCOORD_ERR_NOT_FOUND) {
    ++counts.not_found;
  } else {
    ++counts.other;
    ADD_FAILURE() << call << ": code " << code << ": " << memcoord_last_error();
  }
}

// The next request size of a hammering loop: 512 B to 1 MiB, a different size each call.
inline std::size_t NextHammerSize(std::size_t size) { return size * 3 % (1 << 20) + 512; }

// One alloc+free pair through the torch hooks, counted: a failed allocation by its error (the free is void:
// its errors are logged).
inline void CountedTorchPair(std::size_t size, CallCounts& counts) {
  void* p = memcoord_torch_malloc(static_cast<std::ptrdiff_t>(size), 0, nullptr);
  if (p == nullptr) {
    Classify(counts, SaysNotInitialized() ? MEMCOORD_ERR_FAILED_PRECONDITION : MEMCOORD_ERR_INTERNAL,
             "memcoord_torch_malloc");
    return;
  }
  memcoord_torch_free(p, static_cast<std::ptrdiff_t>(size), 0, nullptr);
  ++counts.ok;
}

// memcoord_device_alloc on device 0; a failure is counted and returns nullptr.
inline void* CountedDeviceAlloc(std::size_t size, CallCounts& counts) {
  void* p = memcoord_device_alloc(0, size, 0);
  if (p == nullptr) Classify(counts, MEMCOORD_ERR_FAILED_PRECONDITION, "memcoord_device_alloc");
  return p;
}

}  // namespace memcoord::testing
