// Worker-supplied 64-bit values near their limits: every piece of coordinator arithmetic on them saturates
// instead of wrapping (before, RelievePressure granted a request of UINT64_MAX by wrapping the sum to a
// small number, and LeakWatch reported a negative growth rate).
#include "coordinator/service/saturating.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "common/bytes.h"
#include "coordinator/service/leak_watch.h"
#include "coordinator/service/live_plan.h"
#include "coordinator/service/quota_policy.h"
#include "coordinator/service/trim_orchestrator.h"

namespace memcoord::coordinator {
namespace {

constexpr std::uint64_t kMaxU = std::numeric_limits<std::uint64_t>::max();
constexpr std::int64_t kMaxI = std::numeric_limits<std::int64_t>::max();

TEST(Saturating, HelpersClampAtTheBounds) {
  EXPECT_EQ(SatAdd(kMaxU - 1, std::uint64_t{5}), kMaxU);
  EXPECT_EQ(SatAdd(std::uint64_t{2}, std::uint64_t{3}), 5u);
  EXPECT_EQ(SatMul(kMaxU / 2, std::uint64_t{10}), kMaxU);
  EXPECT_EQ(SatMul(std::uint64_t{7}, std::uint64_t{6}), 42u);
  EXPECT_EQ(SatSub(std::uint64_t{3}, std::uint64_t{5}), 0u);
  EXPECT_EQ(SatAdd(kMaxI - 1, std::int64_t{2}), kMaxI);
  EXPECT_EQ(SatAdd(std::numeric_limits<std::int64_t>::min() + 1, std::int64_t{-2}),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(ClampToInt64(1e300), kMaxI);
  EXPECT_EQ(ClampToInt64(-1e300), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(ClampToInt64(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(ClampToInt64(9223372036854775808.0), kMaxI);
  EXPECT_EQ(ClampToInt64(-12.7), -12);
}

TEST(Saturating, PressureWithHugeRequestsOrLiveBytesIsExhaustedNotGranted) {
  std::vector<PoolQuotaView> pools = {{0, "a", 2 * kMiB, 2 * kMiB, 32 * kMiB},
                                      {0, "b", 30 * kMiB, 30 * kMiB, 32 * kMiB}};
  // allocated + requested used to wrap to a few MiB: "already allowed", no change, the pool retries forever.
  auto wrapped = RelievePressure(64 * kMiB, pools, 0, "b", kMaxU - 16 * kMiB);
  EXPECT_EQ(wrapped.status().code(), StatusCode::kResourceExhausted) << wrapped.status().ToString();
  EXPECT_EQ(RelievePressure(64 * kMiB, pools, 0, "b", kMaxU).status().code(), StatusCode::kResourceExhausted);
  pools[1].allocated_bytes = kMaxU;
  EXPECT_EQ(RelievePressure(64 * kMiB, pools, 0, "b", 1).status().code(), StatusCode::kResourceExhausted);
  // Limits that sum past UINT64_MAX: no unassigned budget appears from a wrapped sum; the idle pool donates.
  std::vector<PoolQuotaView> huge = {{0, "a", 0, 0, kMaxU - kMiB}, {0, "b", 0, 0, 4 * kMiB}};
  auto changes = RelievePressure(64 * kMiB, huge, 0, "b", 8 * kMiB);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].pool, "a");
  EXPECT_EQ((*changes)[1].limit_bytes, 8 * kMiB);
}

TEST(Saturating, SplitWithHugeLiveBytesFailsInsteadOfWrapping) {
  std::vector<PoolQuotaView> pools = {{0, "a", kMaxU, kMaxU, 0}, {0, "b", kMaxU / 2 + 1, 0, 0}};
  EXPECT_EQ(SplitBudget(64 * kMiB, pools).status().code(), StatusCode::kFailedPrecondition);
  std::vector<PoolQuotaView> two_halves = {{0, "a", 1ull << 63, 0, 0}, {0, "b", 1ull << 63, 0, 0}};
  EXPECT_EQ(SplitBudget(64 * kMiB, two_halves).status().code(), StatusCode::kFailedPrecondition);
}

TEST(Saturating, LeakRateOfAHugeGrowthIsPositive) {
  LeakWatch watch(LeakWatchOptions{.window = 3, .min_rising_fraction = 0.5, .min_growth_bytes = 1});
  for (std::int64_t step = 1; step <= 3; ++step) {
    PoolUsage p;
    p.name = "default";
    p.allocated_bytes = step == 1 ? 0 : (step == 2 ? kMaxU / 2 : kMaxU);
    watch.observe(0, step, {p});
  }
  auto alerts = watch.alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_GT(alerts[0].bytes_per_step, 0);
  EXPECT_EQ(alerts[0].bytes_per_step, kMaxI);
  watch.observe(0, std::numeric_limits<std::int64_t>::min(), {});  // ignored, no overflow
  EXPECT_EQ(watch.alerts().size(), 1u);
}

TEST(Saturating, LiveDeviceCacheAndTrimReleaseSumsSaturate) {
  WorkerRecord w;
  w.id.rank = 0;
  w.id.host = "h";
  w.reports = 1;
  w.device_free_bytes = kGiB;
  PoolUsage p;
  p.reserved_bytes = kMaxU;
  w.pools = {p, p};
  auto devices = LiveDevices({w});
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].cached_bytes, kMaxU);

  AckBoard board;
  TrimOrchestrator trims(board);
  auto send = [&](int rank, const TrimCommandSpec& cmd) {
    RankAck a;
    a.rank = rank;
    a.step = cmd.step;
    a.released_bytes = kMaxU - 1;
    a.received_at = Clock::now();
    board.deliver(cmd.command_id, a);
    return true;
  };
  TrimSpec spec;
  spec.now = true;
  TrimOutcome out = trims.run(1, spec, {{0, 0, 0, 0}, {1, 0, 0, 0}}, send);
  EXPECT_EQ(out.released_bytes, kMaxU);
}

}  // namespace
}  // namespace memcoord::coordinator
