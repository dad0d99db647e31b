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

// Liveness runs on the time points the caller passes: t0 + N ms is a controllable clock.
WorkerState StateOf(const ClusterState& state, int rank) { return state.worker(rank)->state; }

TEST(ClusterState, SilenceMakesSuspectAfterThreeIntervalsAndDeadOnlyAfterTheGrace) {
  ClusterState state;  // defaults: suspect after 3 x 100 ms, dead after 3000 ms
  const auto t0 = Clock::now();
  auto a = state.register_worker(Id(0), {}, t0);
  auto b = state.register_worker(Id(1), {}, t0);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(state.report(*a, 1, 0, {}, t0 + milliseconds(250)).ok());
  std::vector<int> suspects;
  EXPECT_TRUE(state.sweep(t0 + milliseconds(300), &suspects).empty());  // exactly 3 x 100 ms: still live
  EXPECT_TRUE(suspects.empty());
  EXPECT_EQ(StateOf(state, 1), WorkerState::kLive);
  EXPECT_TRUE(state.sweep(t0 + milliseconds(301), &suspects).empty());  // suspect, not dead
  EXPECT_EQ(suspects, std::vector<int>{1});
  EXPECT_EQ(StateOf(state, 1), WorkerState::kSuspect);
  EXPECT_EQ(StateOf(state, 0), WorkerState::kLive);
  // A suspect still holds its rank: commands and aborts reach it.
  EXPECT_EQ(state.live_ranks(), (std::vector<int>{0, 1}));
  EXPECT_EQ(state.session_of(1), *b);
  EXPECT_EQ(state.snapshot(t0 + milliseconds(400))[1].state, WorkerState::kSuspect);
  suspects.clear();
  EXPECT_TRUE(state.sweep(t0 + milliseconds(3000), &suspects).empty());  // exactly the grace: not dead
  EXPECT_EQ(suspects, std::vector<int>{0});                              // rank 0 silent since 250 ms
  auto dead = state.sweep(t0 + milliseconds(3001));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].rank, 1);
  EXPECT_NE(dead[0].reason.find("silent for 3001 ms"), std::string::npos) << dead[0].reason;
  EXPECT_NE(dead[0].reason.find("dead after 3000 ms"), std::string::npos) << dead[0].reason;
  EXPECT_EQ(state.live_ranks(), std::vector<int>{0});
  EXPECT_EQ(state.report(*b, 2, 0, {}, t0 + milliseconds(3002)).code(), StatusCode::kFailedPrecondition);
}

TEST(ClusterState, SuspectThatReportsAgainIsLiveAgainAndAOneSecondStallKillsNothing) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto s = state.register_worker(Id(0), {}, t0);
  ASSERT_TRUE(s.ok());
  // A 1 s stall (SIGSTOP, a network hiccup), swept every 25 ms as the service does.
  std::vector<int> suspects;
  for (int ms = 0; ms <= 1000; ms += 25) {
    EXPECT_TRUE(state.sweep(t0 + milliseconds(ms), &suspects).empty()) << "dead at " << ms << " ms";
  }
  EXPECT_EQ(suspects, std::vector<int>{0});  // suspect once, not again on every sweep
  EXPECT_EQ(StateOf(state, 0), WorkerState::kSuspect);
  ASSERT_TRUE(state.report(*s, 9, 0, {}, t0 + milliseconds(1010)).ok());
  EXPECT_EQ(StateOf(state, 0), WorkerState::kLive);
  // The silence clock restarts at the report.
  EXPECT_TRUE(state.sweep(t0 + milliseconds(1010 + 2999)).empty());
  EXPECT_EQ(state.sweep(t0 + milliseconds(1010 + 3001)).size(), 1u);
}

TEST(ClusterState, ClosedSessionIsDeadAtOnceEvenWhenSuspect) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto s = state.register_worker(Id(3), {}, t0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(state.sweep(t0 + milliseconds(500)).empty());
  ASSERT_EQ(StateOf(state, 3), WorkerState::kSuspect);
  auto dead = state.mark_dead(*s, "session stream broke");
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->rank, 3);
  EXPECT_EQ(StateOf(state, 3), WorkerState::kDead);
  EXPECT_TRUE(state.sweep(t0 + milliseconds(10000)).empty());  // dead once
}

TEST(ClusterState, SuspectRankCannotBeClaimedUntilDead) {
  ClusterState state;
  const auto t0 = Clock::now();
  ASSERT_TRUE(state.register_worker(Id(2), {}, t0).ok());
  ASSERT_TRUE(state.sweep(t0 + milliseconds(400)).empty());
  auto second = state.register_worker(Id(2), {}, t0 + milliseconds(400));
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().message().find("suspect"), std::string::npos) << second.status().message();
  ASSERT_EQ(state.sweep(t0 + milliseconds(3100)).size(), 1u);
  EXPECT_TRUE(state.register_worker(Id(2), {}, t0 + milliseconds(3100)).ok());
}

TEST(ClusterState, DeadBoundIsNeverBelowTheSuspectBound) {
  // A slow reporter (1 s interval) with a short grace: dead only after 3 x 1 s of silence.
  ClusterState state(ClusterStateOptions{.dead_after = milliseconds(500)});
  const auto t0 = Clock::now();
  WorkerIdentity slow = Id(0);
  slow.report_interval_ms = 1000;
  ASSERT_TRUE(state.register_worker(slow, {}, t0).ok());
  EXPECT_TRUE(state.sweep(t0 + milliseconds(3000)).empty());
  EXPECT_EQ(state.sweep(t0 + milliseconds(3001)).size(), 1u);
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

TEST(ClusterState, SlowStepsAreMeasuredAsSlowNotAsBurstsAndPauses) {
  // 10 s steps (a large model) with a report every 100 ms: the rate must read 0.1 steps/s, the input of the
  // trim deadline. Before, windows without a step read 0 and the one with a step 5 steps/s.
  ClusterState state;
  const auto t0 = Clock::now();
  auto s = state.register_worker(Id(0), {}, t0);
  ASSERT_TRUE(s.ok());
  for (int ms = 0; ms <= 30000; ms += 100) {
    ASSERT_TRUE(state.report(*s, ms / 10000, 0, {}, t0 + milliseconds(ms)).ok());
  }
  auto progress = state.progress({0}, t0 + milliseconds(30000));
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_NEAR(progress[0].steps_per_second, 0.1, 0.005);
}

TEST(ClusterState, DeadAfterFlagParsesDurationsAndRefusesNonsense) {
  EXPECT_EQ(*ParseDeadAfter("3s"), milliseconds(3000));
  EXPECT_EQ(*ParseDeadAfter("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDeadAfter("1.5s"), milliseconds(1500));
  EXPECT_EQ(*ParseDeadAfter("2m"), milliseconds(120000));
  EXPECT_EQ(*ParseDeadAfter("3000"), milliseconds(3000));
  for (const char* bad : {"", "s", "3h", "-1s", "50ms", "2h", "1.2.3s", "3 s", "99999999999999s", "abc"}) {
    auto parsed = ParseDeadAfter(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("3s, 500ms"), std::string::npos) << parsed.status().message();
  }
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

// An aborted group stays aborted (every Register into it is told) until it holds no rank.
TEST(ClusterState, AnAbortedGroupStaysAbortedUntilEveryRankLeft) {
  ClusterState state;
  const auto t0 = Clock::now();
  std::uint64_t sessions[3] = {};
  for (int r = 0; r < 3; ++r) {
    auto s = state.register_worker(Id(r), {}, t0);
    ASSERT_TRUE(s.ok());
    sessions[r] = *s;
  }
  WorkerIdentity elsewhere = Id(3);
  elsewhere.group = "other";
  auto other = state.register_worker(elsewhere, {}, t0);
  ASSERT_TRUE(other.ok());

  auto dead = state.mark_dead(sessions[1], "session stream broke");
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->group, "world");
  EXPECT_FALSE(state.abort_for(sessions[0]).has_value());  // not yet recorded: the caller aborts next
  EXPECT_EQ(state.abort_group(GroupAbort{"world", 1, "rank 1 is dead: broke", t0}), (std::vector<int>{0, 2}));
  auto record = state.abort_for(sessions[0]);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->dead_rank, 1);
  EXPECT_EQ(record->reason, "rank 1 is dead: broke");
  EXPECT_FALSE(state.abort_for(*other).has_value());       // another group is not aborted
  EXPECT_FALSE(state.abort_for(sessions[1]).has_value());  // a dead session holds no rank

  // Rank 1 comes back (a reset): it is told. Rank 0's death, caused by the abort, keeps the first cause.
  auto back = state.register_worker(Id(1), {}, t0 + milliseconds(5));
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(state.abort_for(*back).has_value());
  EXPECT_EQ(state.abort_for(*back)->dead_rank, 1);
  ASSERT_TRUE(state.mark_dead(sessions[0], "exited").has_value());
  EXPECT_EQ(state.abort_group(GroupAbort{"world", 0, "rank 0 is dead", t0}), (std::vector<int>{1, 2}));
  EXPECT_EQ(state.abort_for(*back)->dead_rank, 1);

  // The last ranks leave, one detached, one silent: the record ends, a new job's rank is not aborted.
  ASSERT_TRUE(state.mark_dead(*back, "detached").has_value());
  ASSERT_TRUE(state.report(sessions[2], 1, 0, {}, t0 + milliseconds(5000)).ok());
  ASSERT_TRUE(state.report(*other, 1, 0, {}, t0 + milliseconds(5000)).ok());
  ASSERT_TRUE(state.abort_for(sessions[2]).has_value());
  EXPECT_EQ(state.sweep(t0 + milliseconds(5000 + 3001)).size(), 2u);
  auto fresh = state.register_worker(Id(0), {}, t0 + milliseconds(9000));
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(state.abort_for(*fresh).has_value());
}

TEST(ClusterState, ADeathInAGroupThatHoldsNoOtherRankRecordsNoAbort) {
  ClusterState state;
  const auto t0 = Clock::now();
  auto s = state.register_worker(Id(0), {}, t0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(state.mark_dead(*s, "broke").has_value());
  EXPECT_TRUE(state.abort_group(GroupAbort{"world", 0, "rank 0 is dead", t0}).empty());
  auto next = state.register_worker(Id(1), {}, t0);
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(state.abort_for(*next).has_value());
}

}  // namespace
}  // namespace memcoord::coordinator
