// What the C ABI's lifetime and abort tests share: an environment set for a scope, and the tally of calls
// that hammer the entry points while memcoord shuts down and starts again (each either succeeds or fails with
// a clear "not initialized"/"not found"; anything else is a test failure naming the call). Test-only.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace memcoord::testing
