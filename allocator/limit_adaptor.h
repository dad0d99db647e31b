// LimitAdaptor: a DeviceBackend that forwards to `upstream` and refuses any allocate or map that would take
// the bytes it has handed out past limit_bytes(). Put under a pool, it is the pool's quota on reserved bytes
// (a CorePool's reserved bytes are exactly what passed through it). Over the limit it returns
// RESOURCE_EXHAUSTED and never touches `upstream`; if `upstream` fails, its count is rolled back. Releases
// and unmaps always pass and give bytes back. Address space (reserve_address) is not memory and is not
// counted. It reports the pressure through bytes_over_budget(), so the pool packs its cache before hitting
// the limit.
//
// The limit may be set below what is already in use: later requests are then refused until enough is
// released. It never releases anything itself: CachingPool::set_limit trims the pool to fit first and
// refuses a limit below live blocks (FAILED_PRECONDITION), which only the pool can know.
// Thread safety: every method is thread-safe (atomics; a request that races a set_limit sees either limit).
// used_bytes() is exact when the pool above serializes its calls. Ownership: does not own `upstream`, which
// must outlive it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "allocator/backend_adaptor.h"

namespace memcoord {

class LimitAdaptor final : public BackendAdaptor {
 public:
  // limit_bytes 0: no limit. `owner` names the limit in errors ("pool 'x'").
  explicit LimitAdaptor(DeviceBackend& upstream, std::uint64_t limit_bytes = 0, std::string owner = "pool");

  void set_limit(std::uint64_t limit_bytes) { limit_.store(limit_bytes, std::memory_order_relaxed); }
  std::uint64_t limit_bytes() const { return limit_.load(std::memory_order_relaxed); }  // 0: none
  std::uint64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }

  // What it counts; every other call is forwarded as is (BackendAdaptor).
  std::uint64_t bytes_over_budget(std::uint64_t more_bytes) const override;
  Status map(std::uintptr_t address, std::size_t bytes) override;
  Status map_pieces(std::uintptr_t address, std::span<const std::size_t> pieces) override;
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override;

 private:
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;
  // Counts `bytes` as used, or RESOURCE_EXHAUSTED (nothing counted) when they would pass the limit.
  Status take(std::uint64_t bytes, const char* what);
  void give(std::uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  const std::string owner_;
  std::atomic<std::uint64_t> limit_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace memcoord
