// QuotaPolicy: splits one device's memory budget between the pools that share it (pools of one worker, or
// of several worker processes on one GPU) and moves quota toward a pool under pressure.
//
//   split(budget, pools): every pool keeps at least its live bytes; what remains is shared equally.
//   relieve(budget, pools, who, requested): the pool `who` needs `requested` more bytes. Unassigned budget
//     is used first; then quota is taken from the pools holding the most idle cache (limit above their live
//     bytes), which the worker trims before lowering the limit. RESOURCE_EXHAUSTED when even that is not
//     enough; nothing is changed then. A pool without a quota (limit 0) is never capped: its OOM means the
//     device itself is full, and capping it at its live bytes plus the request (what this did before) turns
//     every later allocation into an OOM; FAILED_PRECONDITION says so and the caller frees peers' cache.
//   Sums and roundings of worker-supplied byte counts saturate (saturating.h): they never wrap.
// The changes are applied as a transaction (quota_transaction.h): donors shrink and ack before anyone grows.
// Pure functions of their input: no state, no locks, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace memcoord::coordinator {

struct PoolQuotaView {
  int rank = -1;
  std::string pool;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t limit_bytes = 0;  // 0: none yet
};

struct QuotaChange {
  int rank = -1;
  std::string pool;
  std::uint64_t limit_bytes = 0;
  bool shrinks = false;  // lower than before: the worker trims the pool's cache to fit first
};

// A pool at 90% of its quota or more: quota moves toward it before it runs out. False without a quota.
// Never overflows (allocated >= limit - limit/10, not allocated*10 >= limit*9, which wrapped near 2^64).
constexpr bool NearLimit(std::uint64_t allocated_bytes, std::uint64_t limit_bytes) {
  return limit_bytes > 0 && allocated_bytes >= limit_bytes - limit_bytes / 10;
}

// Every budget and request is rounded up to this granularity.
constexpr std::uint64_t kQuotaGranuleBytes = 2ull << 20;

// Errors: FAILED_PRECONDITION when the pools' live bytes already exceed the budget; INVALID_ARGUMENT for
// an empty pool list or a zero budget.
Result<std::vector<QuotaChange>> SplitBudget(std::uint64_t budget_bytes,
                                             const std::vector<PoolQuotaView>& pools);

// Errors: NOT_FOUND when `who` is not among `pools`; FAILED_PRECONDITION when that pool has no quota;
// RESOURCE_EXHAUSTED when the budget cannot cover the request even after taking every idle byte. The changes
// include the requesting pool's new limit, last.
Result<std::vector<QuotaChange>> RelievePressure(std::uint64_t budget_bytes,
                                                 const std::vector<PoolQuotaView>& pools, int rank,
                                                 const std::string& pool, std::uint64_t requested_bytes);

}  // namespace memcoord::coordinator
