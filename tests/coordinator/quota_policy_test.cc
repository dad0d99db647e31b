#include "coordinator/service/quota_policy.h"

#include <gtest/gtest.h>

#include "common/bytes.h"

namespace memcoord::coordinator {
namespace {

TEST(QuotaPolicy, SplitKeepsLiveBytesAndSharesTheRest) {
  std::vector<PoolQuotaView> pools = {{0, "a", 10 * kMiB, 10 * kMiB, 0}, {0, "b", 0, 0, 0}};
  auto changes = SplitBudget(100 * kMiB, pools);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].limit_bytes, 10 * kMiB + 44 * kMiB);
  EXPECT_EQ((*changes)[1].limit_bytes, 44 * kMiB);
  EXPECT_LE((*changes)[0].limit_bytes + (*changes)[1].limit_bytes, 100 * kMiB);
}

TEST(QuotaPolicy, SplitBelowLiveBytesFails) {
  std::vector<PoolQuotaView> pools = {{0, "a", 80 * kMiB, 80 * kMiB, 0}};
  EXPECT_EQ(SplitBudget(64 * kMiB, pools).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(SplitBudget(64 * kMiB, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(QuotaPolicy, PressureTakesIdleQuotaFromTheIdlestPool) {
  // a: 32 MiB limit, 2 MiB live (30 idle). b: 32 MiB limit, 30 MiB live, needs 8 MiB more.
  std::vector<PoolQuotaView> pools = {{0, "a", 2 * kMiB, 20 * kMiB, 32 * kMiB},
                                      {0, "b", 30 * kMiB, 30 * kMiB, 32 * kMiB}};
  auto changes = RelievePressure(64 * kMiB, pools, 0, "b", 8 * kMiB);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].pool, "a");
  EXPECT_TRUE((*changes)[0].shrinks);
  EXPECT_EQ((*changes)[0].limit_bytes, 26 * kMiB);
  EXPECT_EQ((*changes)[1].pool, "b");
  EXPECT_EQ((*changes)[1].limit_bytes, 38 * kMiB);
  EXPECT_LE((*changes)[0].limit_bytes + (*changes)[1].limit_bytes, 64 * kMiB);
}

TEST(QuotaPolicy, PressureUsesUnassignedBudgetFirst) {
  std::vector<PoolQuotaView> pools = {{0, "a", 0, 0, 16 * kMiB}, {0, "b", 16 * kMiB, 16 * kMiB, 16 * kMiB}};
  auto changes = RelievePressure(64 * kMiB, pools, 0, "b", 4 * kMiB);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].limit_bytes, 20 * kMiB);
}

TEST(QuotaPolicy, PressureBeyondTheBudgetIsExhaustedAndUnknownPoolNotFound) {
  std::vector<PoolQuotaView> pools = {{0, "a", 30 * kMiB, 30 * kMiB, 32 * kMiB},
                                      {0, "b", 30 * kMiB, 30 * kMiB, 32 * kMiB}};
  EXPECT_EQ(RelievePressure(64 * kMiB, pools, 0, "b", 16 * kMiB).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RelievePressure(64 * kMiB, pools, 0, "zz", 1).status().code(), StatusCode::kNotFound);
}

TEST(QuotaPolicy, ADonorIsNeverShrunkToZeroWhichWouldMeanNoQuotaAndAnUnlimitedPoolIsNeverCapped) {
  // a: empty, 24 MiB limit. Before, giving b 24 MiB set a's limit to 0: no quota at all.
  std::vector<PoolQuotaView> pools = {{0, "a", 0, 0, 24 * kMiB}, {0, "b", 24 * kMiB, 24 * kMiB, 24 * kMiB}};
  auto changes = RelievePressure(48 * kMiB, pools, 0, "b", 24 * kMiB);
  EXPECT_EQ(changes.status().code(), StatusCode::kResourceExhausted);  // 22 MiB idle, not 24
  changes = RelievePressure(48 * kMiB, pools, 0, "b", 22 * kMiB);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  EXPECT_EQ((*changes)[0].limit_bytes, kQuotaGranuleBytes);
  // No quota on c: its OOM is the device's; before, it got a cap of live + requested bytes.
  pools.push_back({0, "c", 16 * kMiB, 16 * kMiB, 0});
  auto capped = RelievePressure(48 * kMiB, pools, 0, "c", 8 * kMiB);
  EXPECT_EQ(capped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(capped.status().message().find("no quota"), std::string::npos) << capped.status().message();
  // A budget too small to give every pool a granule is refused rather than split into "no quota" (0).
  EXPECT_EQ(SplitBudget(kQuotaGranuleBytes, {{0, "x", 0, 0, 0}, {0, "y", 0, 0, 0}}).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace memcoord::coordinator
