#include "allocator/memory_scope.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "common/bytes.h"

namespace memcoord {
namespace {
std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

MemoryScope::MemoryScope(CachingPool& pool, ScopeOptions options)
    : pool_(pool), options_(std::move(options)) {
  report_.name = options_.name;
  report_.allocated_on_entry_bytes = pool_.stats().allocated_bytes;
  start_ns_ = NowNs();
}

MemoryScope::~MemoryScope() { close(); }

const ScopeReport& MemoryScope::close() {
  if (closed_) return report_;
  closed_ = true;
  if (options_.trim_on_exit) report_.trimmed_bytes = pool_.trim(0).released_bytes;
  const PoolStats stats = pool_.stats();
  report_.allocated_on_exit_bytes = stats.allocated_bytes;
  report_.reserved_on_exit_bytes = stats.reserved_bytes;
  report_.left_allocated_bytes = static_cast<std::int64_t>(stats.allocated_bytes) -
                                 static_cast<std::int64_t>(report_.allocated_on_entry_bytes);
  report_.duration_ms = static_cast<double>(NowNs() - start_ns_) / 1e6;
  if (options_.on_exit) {
    options_.on_exit(report_);
  } else {
    spdlog::info(
        "scope '{}' on pool '{}' left {}{} allocated; trimmed {}", report_.name, pool_.name(),
        report_.left_allocated_bytes < 0 ? "-" : "",
        FormatBytes(static_cast<std::uint64_t>(
            report_.left_allocated_bytes < 0 ? -report_.left_allocated_bytes : report_.left_allocated_bytes)),
        FormatBytes(report_.trimmed_bytes));
  }
  return report_;
}

}  // namespace memcoord
