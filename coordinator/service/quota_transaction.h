// RunQuotaMove: applies a set of quota changes on one device as a transaction, so that the sum of the
// limits the workers may be enforcing never exceeds the device budget, at any moment, whatever acks, nacks,
// timeouts and deaths happen on the way.
//
// Accounting: a pool's contribution to its device's sum is its limit (0, no quota, contributes nothing:
// it is bounded by the device itself). A change that lowers a contribution is a *shrink*, one that raises
// it a *grow*: 32 -> 16 MiB shrinks, none -> 16 MiB grows (it adds 16 MiB to the sum), 16 MiB -> none
// shrinks. The recorded limit (QuotaPort::record, what the coordinator plans with) is always at least what
// the worker may be enforcing: a grow is recorded before it is sent, a shrink only once it is acknowledged.
//
// Steps:
//   1. Shrink: every shrink is sent; the coordinator waits for the acks (QuotaPort::apply). Each OK ack
//      records the new, lower limit.
//   2. If any shrink was refused, timed out or its rank died: roll back. Every shrink that was acked is
//      undone (recorded back first, then sent: a grow), nothing grows, and the error names what failed.
//      A timed-out shrink stays recorded at its old, higher limit (the worker may or may not have applied
//      it; counting the higher one is safe).
//   3. Grow: each grow is recorded, then sent, and acked. A refused grow, or one whose rank died, is
//      recorded back at its old limit. If no grow took effect (all refused or gone), the donors are rolled
//      back as in 2. A timed-out grow stays recorded at its new limit and keeps the donors shrunk: undoing
//      them could exceed the budget if the worker did apply it.
// Why this order holds the invariant: shrinks only lower the sum; grows start after every shrink they
// need is acknowledged, and a plan's grows add at most what its shrinks and the unassigned budget freed.
//
// Pure control flow over a QuotaPort: no threads, no locks; the caller serializes moves per device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "coordinator/service/quota_policy.h"

namespace memcoord::coordinator {

// One pool's change: from its current (recorded) limit to a new one; 0 is "no quota".
struct QuotaMoveStep {
  int rank = -1;
  std::string pool;
  std::uint64_t from_bytes = 0;
  std::uint64_t to_bytes = 0;
};

enum class QuotaAckKind {
  kOk,        // applied
  kRefused,   // the worker answered with an error: it kept its old limit
  kTimedOut,  // no answer in time: either limit may be in force
  kGone,      // the rank died (or was unreachable): its pools hold nothing any more
};

struct QuotaAckOutcome {
  QuotaAckKind kind = QuotaAckKind::kOk;
  StatusCode code = StatusCode::kOk;  // the worker's code, for kRefused
  std::string message;
};

// How a transaction reaches workers and the coordinator's record.
class QuotaPort {
 public:
  virtual ~QuotaPort() = default;
  // Sends every change (applied by the worker on receipt) and waits for their answers; one outcome per
  // change, in order.
  virtual std::vector<QuotaAckOutcome> apply(const std::vector<QuotaMoveStep>& changes) = 0;
  // Records the limit the coordinator now counts for a pool (see the header comment).
  virtual void record(int rank, const std::string& pool, std::uint64_t limit_bytes) = 0;
};

// Turns a policy's changes into steps, taking each pool's current limit from `pools`.
std::vector<QuotaMoveStep> MoveSteps(const std::vector<QuotaChange>& changes,
                                     const std::vector<PoolQuotaView>& pools);

// Runs the transaction. OK when every change took effect; otherwise the first failure, naming rank, pool
// and whether the move was rolled back: the worker's own code for a refusal, UNAVAILABLE for a timeout,
// ABORTED for a rank that died.
Status RunQuotaMove(const std::vector<QuotaMoveStep>& steps, QuotaPort& port);

}  // namespace memcoord::coordinator
