// Quota moves as transactions: unit cases for each failure, and a seeded randomized run that checks
// "the sum of the limits workers enforce on a device never exceeds its budget" after every single change a
// simulated worker applies (acks, refusals, timeouts with late delivery, deaths, restarts as unlimited).
#include "coordinator/service/quota_transaction.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <map>
#include <random>

#include "common/bytes.h"

namespace memcoord::coordinator {
namespace {

constexpr std::uint64_t kGranule = kQuotaGranuleBytes;

// One device of simulated workers. `actual` is the limit a worker enforces, `recorded` what the coordinator
// counts (QuotaPort::record). Commands to one rank apply in order, as on its session stream: a command that
// timed out may arrive later, but always before the next command to that rank.
class SimDevice : public QuotaPort {
 public:
  struct Pool {
    int rank;
    std::string name;
    std::uint64_t allocated = 0;
    std::uint64_t actual = 0;
    std::uint64_t recorded = 0;
    bool alive = true;
  };

  SimDevice(std::uint64_t capacity, std::uint32_t seed) : capacity_(capacity), rng_(seed) {}

  std::vector<Pool> pools;
  std::map<QuotaAckKind, int> outcomes;
  int violations = 0;
  int checks = 0;
  bool fail_on_violation = true;  // false: only count (the negative control)
  // Percentages of each answer for a command the worker would accept.
  int refuse_pct = 10, timeout_applied_pct = 5, timeout_late_pct = 5, die_pct = 3;

  std::vector<QuotaAckOutcome> apply(const std::vector<QuotaMoveStep>& changes) override {
    std::vector<QuotaAckOutcome> out;
    for (const QuotaMoveStep& c : changes) out.push_back(apply_one(c));
    return out;
  }
  void record(int rank, const std::string& pool, std::uint64_t limit) override {
    if (Pool* p = find(rank, pool)) p->recorded = limit;
    check();
  }

  Pool* find(int rank, const std::string& name) {
    for (Pool& p : pools) {
      if (p.alive && p.rank == rank && p.name == name) return &p;
    }
    return nullptr;
  }
  std::vector<PoolQuotaView> views() const {
    std::vector<PoolQuotaView> v;
    for (const Pool& p : pools) {
      if (p.alive) v.push_back(PoolQuotaView{p.rank, p.name, p.allocated, p.allocated, p.recorded});
    }
    return v;
  }
  // Late commands arrive now.
  void deliver_late(int rank) {
    auto& queue = late_[rank];
    while (!queue.empty()) {
      set_actual(queue.front().rank, queue.front().pool, queue.front().to_bytes);
      queue.pop_front();
    }
  }
  void deliver_all_late() {
    for (auto& [rank, queue] : late_) deliver_late(rank);
  }
  void kill(int rank) {
    late_[rank].clear();
    for (Pool& p : pools) {
      if (p.rank == rank) p.alive = false;
    }
  }
  // A restarted worker: new pools without quota.
  void restart(int rank, const std::vector<std::string>& names) {
    for (const std::string& n : names) pools.push_back(Pool{rank, n, 0, 0, 0, true});
  }
  std::mt19937& rng() { return rng_; }

  // The invariant, and the record never below what a worker enforces.
  void check() {
    ++checks;
    std::uint64_t actual_sum = 0;
    for (const Pool& p : pools) {
      if (!p.alive) continue;
      actual_sum += p.actual;
      if (p.actual > p.recorded) {  // 0 (no quota) counts as 0: it is bounded by the device
        ++violations;
        if (fail_on_violation)
          ADD_FAILURE() << "rank " << p.rank << " pool " << p.name << " enforces " << p.actual
                        << " but the coordinator counts " << p.recorded;
      }
    }
    if (actual_sum > capacity_) {
      ++violations;
      if (fail_on_violation)
        ADD_FAILURE() << "limits enforced on the device sum to " << actual_sum << " > budget " << capacity_;
    }
  }

 private:
  void set_actual(int rank, const std::string& pool, std::uint64_t limit) {
    if (Pool* p = find(rank, pool)) {
      p->actual = limit;
      check();
    }
  }

  QuotaAckOutcome apply_one(const QuotaMoveStep& c) {
    Pool* p = find(c.rank, c.pool);
    if (p == nullptr) return record_outcome({QuotaAckKind::kGone, StatusCode::kOk, "no such rank"});
    deliver_late(c.rank);  // an ordered stream: what was sent before arrives first
    const int roll = static_cast<int>(rng_() % 100);
    if (c.to_bytes != 0 && c.to_bytes < p->allocated) {  // the worker's own rule (CachingPool::set_limit)
      return record_outcome({QuotaAckKind::kRefused, StatusCode::kFailedPrecondition, "below live bytes"});
    }
    int edge = refuse_pct;
    if (roll < edge) return record_outcome({QuotaAckKind::kRefused, StatusCode::kInternal, "injected"});
    if (roll < (edge += timeout_applied_pct)) {
      set_actual(c.rank, c.pool, c.to_bytes);
      return record_outcome({QuotaAckKind::kTimedOut, StatusCode::kOk, ""});
    }
    if (roll < (edge += timeout_late_pct)) {
      late_[c.rank].push_back(c);
      return record_outcome({QuotaAckKind::kTimedOut, StatusCode::kOk, ""});
    }
    if (roll < (edge += die_pct)) {
      kill(c.rank);
      return record_outcome({QuotaAckKind::kGone, StatusCode::kOk, ""});
    }
    set_actual(c.rank, c.pool, c.to_bytes);
    return record_outcome({QuotaAckKind::kOk, StatusCode::kOk, ""});
  }
  QuotaAckOutcome record_outcome(QuotaAckOutcome o) {
    ++outcomes[o.kind];
    return o;
  }

  const std::uint64_t capacity_;
  std::mt19937 rng_;
  std::map<int, std::deque<QuotaMoveStep>> late_;
};

// The old way (before the transaction): every limit recorded and sent at once, answers ignored.
Status SendAllAtOnce(const std::vector<QuotaMoveStep>& steps, QuotaPort& port) {
  for (const QuotaMoveStep& s : steps) {
    port.record(s.rank, s.pool, s.to_bytes);
    (void)port.apply({s});
  }
  return Status::Ok();
}

struct RunStats {
  int moves = 0, granted = 0, failed = 0, splits = 0, restarts = 0;
};

// Thousands of random steps over a device of `ranks` x 2 pools. Returns the violations seen.
int RandomRun(std::uint32_t seed, int steps, int ranks, bool transactional, RunStats* stats,
              SimDevice** device_out = nullptr) {
  const std::uint64_t capacity = 512 * kGranule;  // 1 GiB
  static thread_local std::unique_ptr<SimDevice> keep;
  keep = std::make_unique<SimDevice>(capacity, seed);
  SimDevice& d = *keep;
  d.fail_on_violation = transactional;
  if (device_out) *device_out = &d;
  auto run = [&](const std::vector<QuotaMoveStep>& s) {
    return transactional ? RunQuotaMove(s, d) : SendAllAtOnce(s, d);
  };
  for (int r = 0; r < ranks; ++r) d.restart(r, {"default", "kv"});
  std::mt19937& rng = d.rng();
  auto split = [&] {
    auto changes = SplitBudget(capacity, d.views());
    if (!changes.ok()) return;
    ++stats->splits;
    (void)run(MoveSteps(*changes, d.views()));
  };
  split();
  for (int i = 0; i < steps; ++i) {
    const int action = static_cast<int>(rng() % 100);
    std::vector<SimDevice::Pool*> alive;
    for (auto& p : d.pools) {
      if (p.alive) alive.push_back(&p);
    }
    if (alive.empty() || action < 3) {  // a dead rank comes back as a new worker without quotas
      std::vector<int> dead;
      for (int r = 0; r < ranks; ++r) {
        if (d.find(r, "default") == nullptr) dead.push_back(r);
      }
      if (!dead.empty()) {
        d.restart(dead[rng() % dead.size()], {"default", "kv"});
        ++stats->restarts;
      }
      continue;
    }
    SimDevice::Pool* p = alive[rng() % alive.size()];
    if (action < 63) {  // pressure: a pool asks for more
      const std::uint64_t want = (rng() % 128 + 1) * kGranule / (rng() % 4 + 1);
      auto changes = RelievePressure(capacity, d.views(), p->rank, p->name, want);
      if (!changes.ok()) continue;
      ++stats->moves;
      Status s = run(MoveSteps(*changes, d.views()));
      s.ok() ? ++stats->granted : ++stats->failed;
    } else if (action < 73) {
      split();
    } else if (action < 95) {  // the pool allocates or frees, within what it enforces
      const std::uint64_t cap = p->actual == 0 ? capacity / 4 : p->actual;
      p->allocated = cap == 0 ? 0 : rng() % (cap + 1);
    } else {
      d.deliver_all_late();
    }
  }
  d.deliver_all_late();
  return d.violations;
}

TEST(QuotaTransaction, RandomizedRunNeverExceedsTheDeviceBudget) {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    RunStats stats;
    SimDevice* d = nullptr;
    const int violations = RandomRun(seed, 5000, 8, /*transactional=*/true, &stats, &d);
    EXPECT_EQ(violations, 0) << "seed " << seed;
    std::printf(
        "seed %u: 5000 steps, 16 pools on 8 ranks: %d moves (%d granted, %d failed), %d splits, %d restarts; "
        "answers ok %d refused %d timed out %d gone %d; invariant checked %d times\n",
        seed, stats.moves, stats.granted, stats.failed, stats.splits, stats.restarts,
        d->outcomes[QuotaAckKind::kOk], d->outcomes[QuotaAckKind::kRefused],
        d->outcomes[QuotaAckKind::kTimedOut], d->outcomes[QuotaAckKind::kGone], d->checks);
    // The run exercised every kind of answer, and moves both succeeded and failed.
    EXPECT_GT(stats.granted, 100);
    EXPECT_GT(stats.failed, 10);
    for (QuotaAckKind k :
         {QuotaAckKind::kOk, QuotaAckKind::kRefused, QuotaAckKind::kTimedOut, QuotaAckKind::kGone}) {
      EXPECT_GT(d->outcomes[k], 0) << "seed " << seed;
    }
  }
}

TEST(QuotaTransaction, TheOldSendEverythingAtOnceOrderBreaksTheInvariant) {
  // The same run with the pre-transaction order (requester raised and limits recorded before the donors
  // acknowledged) exceeds the budget: the checker can fail, and this is the defect the transaction fixes.
  RunStats stats;
  EXPECT_GT(RandomRun(1, 5000, 8, /*transactional=*/false, &stats), 0);
}

// A scripted port: answers from a list, records what it was asked.
class ScriptPort : public QuotaPort {
 public:
  std::deque<QuotaAckKind> answers;
  std::vector<std::string> log;
  std::vector<QuotaAckOutcome> apply(const std::vector<QuotaMoveStep>& changes) override {
    std::vector<QuotaAckOutcome> out;
    for (const QuotaMoveStep& c : changes) {
      QuotaAckKind k = QuotaAckKind::kOk;
      if (!answers.empty()) {
        k = answers.front();
        answers.pop_front();
      }
      log.push_back(fmt::format("send {}:{} {}", c.rank, c.pool, c.to_bytes / kMiB));
      out.push_back(QuotaAckOutcome{
          k, k == QuotaAckKind::kRefused ? StatusCode::kFailedPrecondition : StatusCode::kOk, ""});
    }
    return out;
  }
  void record(int rank, const std::string& pool, std::uint64_t limit) override {
    log.push_back(fmt::format("record {}:{} {}", rank, pool, limit / kMiB));
  }
};

const std::vector<QuotaMoveStep> kMove = {{1, "a", 32 * kMiB, 24 * kMiB}, {0, "b", 32 * kMiB, 40 * kMiB}};

TEST(QuotaTransaction, DonorsShrinkAndAckBeforeTheRequesterGrows) {
  ScriptPort port;
  ASSERT_TRUE(RunQuotaMove(kMove, port).ok());
  EXPECT_EQ(port.log,
            (std::vector<std::string>{"send 1:a 24", "record 1:a 24", "record 0:b 40", "send 0:b 40"}));
}

TEST(QuotaTransaction, ARefusedShrinkGrowsNobody) {
  ScriptPort port;
  port.answers = {QuotaAckKind::kRefused};
  Status s = RunQuotaMove(kMove, port);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 1 pool 'a'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rolled back"), std::string::npos) << s.message();
  EXPECT_EQ(port.log, std::vector<std::string>{"send 1:a 24"});
}

TEST(QuotaTransaction, ADeadRequesterGivesTheDonorsTheirQuotaBack) {
  ScriptPort port;
  port.answers = {QuotaAckKind::kOk, QuotaAckKind::kGone, QuotaAckKind::kOk};
  Status s = RunQuotaMove(kMove, port);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(port.log,
            (std::vector<std::string>{"send 1:a 24", "record 1:a 24", "record 0:b 40", "send 0:b 40",
                                      "record 0:b 32", "record 1:a 32", "send 1:a 32"}));
}

TEST(QuotaTransaction, ATimedOutGrowKeepsTheDonorsShrunkAndCountsTheNewLimit) {
  ScriptPort port;
  port.answers = {QuotaAckKind::kOk, QuotaAckKind::kTimedOut};
  Status s = RunQuotaMove(kMove, port);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(port.log,
            (std::vector<std::string>{"send 1:a 24", "record 1:a 24", "record 0:b 40", "send 0:b 40"}));
}

TEST(QuotaTransaction, GivingAPoolItsFirstQuotaCountsAsAGrow) {
  // none -> 16 MiB adds 16 MiB to the device's sum: it waits for the shrink.
  ScriptPort port;
  ASSERT_TRUE(RunQuotaMove({{0, "new", 0, 16 * kMiB}, {1, "a", 32 * kMiB, 16 * kMiB}}, port).ok());
  EXPECT_EQ(port.log.front(), "send 1:a 16");
}

}  // namespace
}  // namespace memcoord::coordinator
