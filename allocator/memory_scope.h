// MemoryScope: the C++ form of a `with` block around memory-hungry work (an evaluation pass, a checkpoint
// save). It notes the pool's usage on entry; on exit it can trim the pool's cache and reports what the scope
// left allocated, so a leak inside the scope is visible at its end.
//   {
//     MemoryScope scope(pool, {.name = "eval", .trim_on_exit = true});
//     ... allocate and free ...
//   }  // logs "scope 'eval' left 0 B allocated; trimmed 3.2 GB"
// Not thread-safe itself (one scope per thread); the pool may be used by other threads meanwhile, whose
// allocations then count toward the scope's figures.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "allocator/caching_pool.h"

namespace memcoord {

struct ScopeReport {
  std::string name;
  std::int64_t left_allocated_bytes = 0;  // allocated on exit minus allocated on entry (negative: freed more)
  std::uint64_t allocated_on_entry_bytes = 0;
  std::uint64_t allocated_on_exit_bytes = 0;
  std::uint64_t reserved_on_exit_bytes = 0;  // after the trim, if any
  std::uint64_t trimmed_bytes = 0;
  double duration_ms = 0.0;
};

struct ScopeOptions {
  std::string name = "scope";
  bool trim_on_exit = false;
  // Called with the report when the scope closes; by default the report is logged at info level.
  std::function<void(const ScopeReport&)> on_exit;
};

class MemoryScope {
 public:
  MemoryScope(CachingPool& pool, ScopeOptions options = {});
  ~MemoryScope();  // closes the scope if close() was not called
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

  // Ends the scope now and returns its report; later calls return the same report.
  const ScopeReport& close();

 private:
  CachingPool& pool_;
  ScopeOptions options_;
  ScopeReport report_;
  std::int64_t start_ns_ = 0;
  bool closed_ = false;
};

}  // namespace memcoord
