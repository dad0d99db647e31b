#include "coordinator/service/quota_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "common/bytes.h"
#include "coordinator/service/saturating.h"

namespace memcoord::coordinator {
namespace {

// Saturates: a worker-supplied count near UINT64_MAX stays huge instead of wrapping to 0.
std::uint64_t RoundUp(std::uint64_t bytes) {
  return SatMul(SatAdd(bytes, kQuotaGranuleBytes - 1) / kQuotaGranuleBytes, kQuotaGranuleBytes);
}

}  // namespace

Result<std::vector<QuotaChange>> SplitBudget(std::uint64_t budget_bytes,
                                             const std::vector<PoolQuotaView>& pools) {
  if (pools.empty()) return InvalidArgument("no pools share this device yet; nothing to split");
  if (budget_bytes == 0) return InvalidArgument("a device budget must be positive");
  std::uint64_t live = 0;
  for (const PoolQuotaView& p : pools) live = SatAdd(live, RoundUp(p.allocated_bytes));
  if (live > budget_bytes) {
    return FailedPrecondition(fmt::format("live bytes of the device's {} pools ({}) exceed the budget {}",
                                          pools.size(), FormatBytes(live), FormatBytes(budget_bytes)));
  }
  const std::uint64_t share = (budget_bytes - live) / pools.size();
  std::vector<QuotaChange> changes;
  for (const PoolQuotaView& p : pools) {
    const std::uint64_t limit = RoundUp(p.allocated_bytes) + share / kQuotaGranuleBytes * kQuotaGranuleBytes;
    if (limit == 0) {  // 0 would mean "no quota": the opposite of what a budget asks
      return FailedPrecondition(
          fmt::format("a budget of {} cannot give each of the device's {} pools at least {}",
                      FormatBytes(budget_bytes), pools.size(), FormatBytes(kQuotaGranuleBytes)));
    }
    changes.push_back(QuotaChange{p.rank, p.pool, limit, p.limit_bytes == 0 || limit < p.limit_bytes});
  }
  return changes;
}

Result<std::vector<QuotaChange>> RelievePressure(std::uint64_t budget_bytes,
                                                 const std::vector<PoolQuotaView>& pools, int rank,
                                                 const std::string& pool, std::uint64_t requested_bytes) {
  auto who = std::find_if(pools.begin(), pools.end(),
                          [&](const PoolQuotaView& p) { return p.rank == rank && p.pool == pool; });
  if (who == pools.end()) {
    return NotFound(fmt::format("rank {} has no pool '{}' on this device", rank, pool));
  }
  if (who->limit_bytes == 0) {
    return FailedPrecondition(fmt::format(
        "pool '{}' on rank {} has no quota: its out-of-memory is the device's, not a quota's, so no limit is "
        "raised (and none is imposed); free cache elsewhere on the device instead",
        pool, rank));
  }
  // The pool needs its live bytes plus the request; what it has beyond that in cache it frees itself.
  const std::uint64_t wanted = RoundUp(SatAdd(who->allocated_bytes, requested_bytes));
  if (wanted <= who->limit_bytes) {
    return std::vector<QuotaChange>{};  // the limit already allows it: the pool only needs to trim
  }
  std::uint64_t need = wanted - who->limit_bytes;
  const std::uint64_t assigned =
      std::accumulate(pools.begin(), pools.end(), std::uint64_t{0},
                      [](std::uint64_t sum, const PoolQuotaView& p) { return SatAdd(sum, p.limit_bytes); });
  std::vector<QuotaChange> changes;
  const std::uint64_t unassigned = budget_bytes > assigned ? budget_bytes - assigned : 0;
  std::uint64_t got = std::min(unassigned, need);

  // Take from the pools with the most idle quota (limit above live bytes), largest first.
  // A donor keeps its live bytes and at least one granule: a limit of 0 would mean "no quota".
  const auto keep = [](const PoolQuotaView* p) {
    return std::max(RoundUp(p->allocated_bytes), kQuotaGranuleBytes);
  };
  std::vector<const PoolQuotaView*> donors;
  for (const PoolQuotaView& p : pools) {
    if (&p != &*who && p.limit_bytes > keep(&p)) donors.push_back(&p);
  }
  std::sort(donors.begin(), donors.end(), [&](const PoolQuotaView* a, const PoolQuotaView* b) {
    return a->limit_bytes - keep(a) > b->limit_bytes - keep(b);
  });
  for (const PoolQuotaView* d : donors) {
    if (got >= need) break;
    const std::uint64_t idle = d->limit_bytes - keep(d);
    const std::uint64_t take = std::min(idle, RoundUp(need - got));
    changes.push_back(QuotaChange{d->rank, d->pool, d->limit_bytes - take, true});
    got += take;
  }
  if (got < need) {
    return ResourceExhausted(
        fmt::format("pool '{}' on rank {} needs {} more but the device budget {} has only {} free or idle",
                    pool, rank, FormatBytes(need), FormatBytes(budget_bytes), FormatBytes(got)));
  }
  changes.push_back(QuotaChange{rank, pool, who->limit_bytes + got, false});
  return changes;
}

}  // namespace memcoord::coordinator
