#include "coordinator/service/cluster_state.h"

#include <gtest/gtest.h>

namespace memcoord::coordinator {
namespace {

using std::chrono::milliseconds;

PoolUsage Pool(const std::string& name, std::uint64_t allocated = 0) {
  PoolUsage p;
  p.name = name;
  p.allocated_bytes = allocated;
  return p;
}

WorkerIdentity Id(int rank, int world = 4) {
  WorkerIdentity id;
  id.rank = rank;
  id.world_size = world;
  id.host = "h";
  id.pid = 100 + rank;
  id.report_interval_ms = 100;
  return id;
}

TEST(ClusterState, RegisterReportAndSnapshot) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto s = state.register_worker(Id(1), {Pool("default")}, t0);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(state.rank_of(*s), 1);
  PoolUsage p = Pool("default", 10);
  ASSERT_TRUE(state.report(*s, 5, 0, {p}, t0 + milliseconds(100)).ok());
  auto snap = state.snapshot(t0 + milliseconds(150));
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].step, 5);
  EXPECT_EQ(snap[0].pools[0].allocated_bytes, 10u);
  EXPECT_EQ(snap[0].last_report_age_ms, 50u);
  EXPECT_EQ(state.live_ranks(), std::vector<int>{1});
}

TEST(ClusterState, BadRegistrationsAreRefusedAndChangeNothing) {
  ClusterState state;
  const auto t0 = Clock::now();
  EXPECT_EQ(state.register_worker(Id(4, 4), {}, t0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(state.register_worker(Id(-1), {}, t0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(state.register_worker(Id(0, 0), {}, t0).status().code(), StatusCode::kInvalidArgument);
  WorkerIdentity slow = Id(0);
  slow.report_interval_ms = 0;
  EXPECT_EQ(state.register_worker(slow, {}, t0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(state.snapshot(t0).empty());
}

TEST(ClusterState, SecondWorkerOnLiveRankIsRefusedDeadRankMayBeReclaimed) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto first = state.register_worker(Id(2), {}, t0);
  ASSERT_TRUE(first.ok());
  auto second = state.register_worker(Id(2), {}, t0);
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().message().find("rank 2"), std::string::npos);
  auto dead = state.mark_dead(*first, "stream broke");
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->rank, 2);
  EXPECT_FALSE(state.mark_dead(*first, "again").has_value());
  auto third = state.register_worker(Id(2), {}, t0);
  ASSERT_TRUE(third.ok());
  // The old session cannot report for the rank any more.
  EXPECT_EQ(state.report(*first, 1, 0, {}, t0).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(state.report(*third, 1, 0, {}, t0).ok());
}

TEST(ClusterState, SilenceForThreeIntervalsMarksDead) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto a = state.register_worker(Id(0), {}, t0);
  auto b = state.register_worker(Id(1), {}, t0);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(state.report(*a, 1, 0, {}, t0 + milliseconds(250)).ok());
  EXPECT_TRUE(state.sweep(t0 + milliseconds(300)).empty());  // exactly 3 x 100 ms: still live
  auto dead = state.sweep(t0 + milliseconds(301));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].rank, 1);
  EXPECT_NE(dead[0].reason.find("silent"), std::string::npos);
  EXPECT_EQ(state.live_ranks(), std::vector<int>{0});
}

TEST(ClusterState, StepRateIsEstimatedFromReports) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto s = state.register_worker(Id(0), {}, t0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(state.report(*s, 0, 0, {}, t0).ok());
  ASSERT_TRUE(state.report(*s, 10, 0, {}, t0 + milliseconds(1000)).ok());
  auto progress = state.progress({0}, t0 + milliseconds(1000));
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_NEAR(progress[0].steps_per_second, 10.0, 0.01);
}

TEST(ClusterState, DeviceBudgetsArePerDevice) {
  ClusterState state;
  const auto t0 = Clock::now();
  WorkerIdentity a = Id(0), b = Id(1);
  a.device = 0;
  b.device = 0;
  ASSERT_TRUE(state.register_worker(a, {}, t0).ok());
  ASSERT_TRUE(state.register_worker(b, {}, t0).ok());
  EXPECT_EQ(state.set_device_budget(7, 1).code(), StatusCode::kNotFound);
  ASSERT_TRUE(state.set_device_budget(0, 1 << 30).ok());
  EXPECT_EQ(state.device_budget(1), 1u << 30);
  EXPECT_EQ(state.device_peers(0), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace memcoord::coordinator
