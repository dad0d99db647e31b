#include "coordinator/service/quota_transaction.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/bytes.h"

namespace memcoord::coordinator {
namespace {

bool Shrinks(const QuotaMoveStep& s) {
  if (s.to_bytes == 0) return s.from_bytes != 0;  // dropping a quota removes its contribution
  return s.from_bytes != 0 && s.to_bytes < s.from_bytes;
}

std::string Describe(const QuotaMoveStep& s, const QuotaAckOutcome& o) {
  const char* what = o.kind == QuotaAckKind::kRefused    ? "refused"
                     : o.kind == QuotaAckKind::kTimedOut ? "did not answer in time"
                                                         : "died";
  return fmt::format("rank {} pool '{}' ({} -> {}) {}{}", s.rank, s.pool, FormatBytes(s.from_bytes),
                     FormatBytes(s.to_bytes), what, o.message.empty() ? "" : ": " + o.message);
}

// Undoes acknowledged shrinks: each is a grow back to its old limit, recorded before it is sent.
void RollBack(const std::vector<QuotaMoveStep>& done, QuotaPort& port) {
  if (done.empty()) return;
  std::vector<QuotaMoveStep> undo;
  for (const QuotaMoveStep& s : done) {
    undo.push_back(QuotaMoveStep{s.rank, s.pool, s.to_bytes, s.from_bytes});
    port.record(s.rank, s.pool, s.from_bytes);
  }
  (void)port.apply(undo);  // whatever the answers, the old (higher) limit is already counted
}

Status FailureStatus(const QuotaMoveStep& s, const QuotaAckOutcome& o, bool rolled_back) {
  const std::string text = Describe(s, o) + (rolled_back ? "; the quota move was rolled back" : "");
  if (o.kind == QuotaAckKind::kTimedOut) return Unavailable(text);
  if (o.kind == QuotaAckKind::kRefused && o.code != StatusCode::kOk) return Status(o.code, text);
  return Aborted(text);
}

}  // namespace

std::vector<QuotaMoveStep> MoveSteps(const std::vector<QuotaChange>& changes,
                                     const std::vector<PoolQuotaView>& pools) {
  std::vector<QuotaMoveStep> steps;
  for (const QuotaChange& c : changes) {
    auto it = std::find_if(pools.begin(), pools.end(),
                           [&](const PoolQuotaView& p) { return p.rank == c.rank && p.pool == c.pool; });
    steps.push_back(QuotaMoveStep{c.rank, c.pool, it == pools.end() ? 0 : it->limit_bytes, c.limit_bytes});
  }
  return steps;
}

Status RunQuotaMove(const std::vector<QuotaMoveStep>& steps, QuotaPort& port) {
  std::vector<QuotaMoveStep> shrinks, grows;
  for (const QuotaMoveStep& s : steps) {
    if (s.from_bytes == s.to_bytes) continue;
    (Shrinks(s) ? shrinks : grows).push_back(s);
  }

  // 1. Shrink, and count each new limit only once acknowledged.
  std::vector<QuotaMoveStep> shrunk;
  Status failure;
  const std::vector<QuotaAckOutcome> shrink_acks = port.apply(shrinks);
  for (std::size_t i = 0; i < shrinks.size(); ++i) {
    const QuotaAckOutcome o = i < shrink_acks.size()
                                  ? shrink_acks[i]
                                  : QuotaAckOutcome{QuotaAckKind::kTimedOut, StatusCode::kOk, ""};
    if (o.kind == QuotaAckKind::kOk) {
      port.record(shrinks[i].rank, shrinks[i].pool, shrinks[i].to_bytes);
      shrunk.push_back(shrinks[i]);
    } else if (failure.ok()) {
      failure = FailureStatus(shrinks[i], o, /*rolled_back=*/true);
    }
  }
  // 2. A failed shrink: nothing grows, the acknowledged shrinks are undone.
  if (!failure.ok()) {
    RollBack(shrunk, port);
    return failure;
  }

  // 3. Grow: counted from before the send, since the worker may apply it the moment it arrives.
  for (const QuotaMoveStep& g : grows) port.record(g.rank, g.pool, g.to_bytes);
  const std::vector<QuotaAckOutcome> grow_acks = port.apply(grows);
  bool any_grew = grows.empty();
  bool any_unknown = false;
  for (std::size_t i = 0; i < grows.size(); ++i) {
    const QuotaAckOutcome o =
        i < grow_acks.size() ? grow_acks[i] : QuotaAckOutcome{QuotaAckKind::kTimedOut, StatusCode::kOk, ""};
    if (o.kind == QuotaAckKind::kOk) {
      any_grew = true;
      continue;
    }
    if (o.kind == QuotaAckKind::kTimedOut) {
      any_unknown = true;  // stays counted at the new limit
    } else {
      port.record(grows[i].rank, grows[i].pool, grows[i].from_bytes);
    }
    if (failure.ok()) failure = FailureStatus(grows[i], o, /*rolled_back=*/false);
  }
  if (!any_grew && !any_unknown) {
    RollBack(shrunk, port);
    if (!failure.ok())
      failure = Status(failure.code(), failure.message() + "; the quota move was rolled back");
  }
  return failure;
}

}  // namespace memcoord::coordinator
