#include "coordinator/service/trim_orchestrator.h"

#include <gtest/gtest.h>

#include <thread>

namespace memcoord::coordinator {
namespace {

using std::chrono::milliseconds;

RankAck Ack(int rank, std::int64_t step = 0, std::uint64_t released_bytes = 0) {
  RankAck a;
  a.rank = rank;
  a.step = step;
  a.released_bytes = released_bytes;
  a.received_at = Clock::now();
  return a;
}

TEST(TrimOrchestrator, PicksAStepAheadOfEveryRank) {
  AckBoard board;
  TrimOrchestrator trims(board, TrimOrchestratorOptions{.step_margin = 2, .lead = milliseconds(100)});
  // Rank 1 runs 50 steps/s and reported 40 ms ago: by the time the command lands it is ~7 steps further.
  std::vector<RankProgress> ranks = {{0, 10, 0.0, 0}, {1, 12, 50.0, 40}};
  EXPECT_EQ(trims.pick_step(ranks), 12 + 7 + 2);
  EXPECT_EQ(trims.pick_step({}), 2);
}

TEST(TrimOrchestrator, CollectsEveryAckAtTheSameStep) {
  AckBoard board;
  TrimOrchestrator trims(board);
  std::vector<std::thread> workers;
  auto send = [&](int rank, const TrimCommandSpec& cmd) {
    workers.emplace_back([&board, rank, cmd] {
      std::this_thread::sleep_for(milliseconds(5 * rank));
      board.deliver(cmd.command_id, Ack(rank, cmd.step, 100));
    });
    return true;
  };
  TrimOutcome out = trims.run(7, TrimSpec{}, {{0, 3, 0, 0}, {1, 4, 0, 0}, {2, 4, 0, 0}}, send);
  for (auto& t : workers) t.join();
  EXPECT_TRUE(out.complete);
  EXPECT_EQ(out.step, 6);
  ASSERT_EQ(out.acks.size(), 3u);
  for (const RankAck& a : out.acks) EXPECT_EQ(a.step, out.step);
  EXPECT_EQ(out.released_bytes, 300u);
  EXPECT_TRUE(out.missing_ranks.empty());
}

TEST(TrimOrchestrator, SilentRankEndsAtTheDeadlineWithAPartialResult) {
  AckBoard board;
  TrimOrchestrator trims(board);
  auto send = [&](int rank, const TrimCommandSpec& cmd) {
    if (rank != 1) board.deliver(cmd.command_id, Ack(rank));
    return true;
  };
  TrimSpec spec;
  spec.now = true;
  spec.deadline = milliseconds(150);
  const auto start = Clock::now();
  TrimOutcome out = trims.run(8, spec, {{0, 0, 0, 0}, {1, 0, 0, 0}, {2, 0, 0, 0}}, send);
  const auto elapsed = Clock::now() - start;
  EXPECT_FALSE(out.complete);
  EXPECT_EQ(out.step, -1);
  EXPECT_EQ(out.missing_ranks, std::vector<int>{1});
  EXPECT_EQ(out.acks.size(), 2u);
  EXPECT_GE(elapsed, milliseconds(150));
  EXPECT_LT(elapsed, milliseconds(1000));
}

TEST(TrimOrchestrator, DeadRankEndsTheWaitAtOnce) {
  AckBoard board;
  TrimOrchestrator trims(board);
  std::thread killer;
  auto send = [&](int rank, const TrimCommandSpec&) {
    if (rank == 0) {
      killer = std::thread([&board] {
        std::this_thread::sleep_for(milliseconds(20));
        board.rank_gone(0);
      });
    }
    return rank != 1;  // rank 1 cannot even be reached
  };
  TrimSpec spec;
  spec.deadline = milliseconds(5000);
  const auto start = Clock::now();
  TrimOutcome out = trims.run(9, spec, {{0, 0, 0, 0}, {1, 0, 0, 0}}, send);
  killer.join();
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  EXPECT_EQ(out.missing_ranks, (std::vector<int>{0, 1}));
  EXPECT_FALSE(out.complete);
}

TEST(TrimOrchestrator, ARankThatTrimsAfterSIsLateAndTheTrimIsNotComplete) {
  AckBoard board;
  TrimOrchestrator trims(board);
  auto send = [&](int rank, const TrimCommandSpec& cmd) {
    // Rank 1 was past S when the command arrived: it trims two steps later. Rank 2 fails.
    RankAck ack = Ack(rank, rank == 1 ? cmd.step + 2 : cmd.step, 10);
    if (rank == 2) {
      ack.code = 9;
      ack.message = "pool busy";
    }
    board.deliver(cmd.command_id, ack);
    return true;
  };
  TrimOutcome out = trims.run(10, TrimSpec{}, {{0, 3, 0, 0}, {1, 4, 0, 0}, {2, 4, 0, 0}, {3, 4, 0, 0}}, send);
  EXPECT_FALSE(out.complete) << "a rank trimmed at another step: the trim was not synchronized";
  EXPECT_TRUE(out.missing_ranks.empty());
  EXPECT_EQ(out.late_ranks, std::vector<int>{1});
  EXPECT_EQ(out.failed_ranks, std::vector<int>{2});
  ASSERT_EQ(out.acks.size(), 4u);
  EXPECT_EQ(out.acks[1].step, out.step + 2);  // the per-rank truth is in the acks
}

TEST(TrimOrchestrator, JudgeTrimOnTheClientSideAgreesAndNowHasNoLateRanks) {
  TrimOutcome at_step;
  at_step.step = 7;
  at_step.acks = {Ack(0, 7), Ack(1, 7)};
  JudgeTrim(at_step);
  EXPECT_TRUE(at_step.complete);
  at_step.acks[1].step = 8;
  JudgeTrim(at_step);
  EXPECT_FALSE(at_step.complete);
  EXPECT_EQ(at_step.late_ranks, std::vector<int>{1});
  TrimOutcome now;
  now.step = -1;
  now.acks = {Ack(0, 41), Ack(1, 99)};
  JudgeTrim(now);
  EXPECT_TRUE(now.complete);
  now.missing_ranks = {2};
  JudgeTrim(now);
  EXPECT_FALSE(now.complete);
}

TEST(TrimOrchestrator, DefaultDeadlineScalesWithTheSlowestRanksStepTime) {
  AckBoard board;
  TrimOrchestrator trims(board, TrimOrchestratorOptions{.step_margin = 2, .lead = milliseconds(100)});
  // Fast ranks: the 5 s floor.
  std::vector<RankProgress> fast = {{0, 100, 50.0, 10}, {1, 101, 50.0, 20}};
  EXPECT_EQ(trims.deadline_for(trims.pick_step(fast), fast), kMinTrimDeadline);
  EXPECT_EQ(trims.deadline_for(-1, fast), kMinTrimDeadline);
  // A 70B job: 10 s steps on rank 0. S = 10 + ceil(0.1 x 0.1 s) + 2 = 13; the slowest rank runs steps
  // 11..13 (and the one in progress): 4 x 10 s + 0.1 s lead, doubled, + 1 s = 81.2 s.
  std::vector<RankProgress> slow = {{0, 10, 0.1, 0}, {1, 5, 50.0, 0}};
  const std::int64_t s = trims.pick_step(slow);
  EXPECT_EQ(s, 13);
  EXPECT_EQ(trims.deadline_for(s, slow), milliseconds(81200));
  EXPECT_GT(trims.deadline_for(s, slow), milliseconds(5000));
  // A stalled rank with an absurd rate or step cannot push the deadline past the cap or wrap S.
  std::vector<RankProgress> absurd = {{0, INT64_MAX - 1, 1e300, 0}, {1, 0, 1e-300, 0}};
  EXPECT_EQ(trims.pick_step(absurd), INT64_MAX);
  EXPECT_EQ(trims.deadline_for(5, absurd), kMaxTrimDeadline);
}

TEST(TrimOrchestrator, MeasuredCommandRoundTripMovesTheStepAheadOfThatRank) {
  AckBoard board;
  TrimOrchestrator trims(board, TrimOrchestratorOptions{.step_margin = 2, .lead = milliseconds(100)});
  std::vector<RankProgress> ranks = {{0, 10, 20.0, 0}, {1, 10, 20.0, 0}};
  EXPECT_EQ(trims.pick_step(ranks), 10 + 2 + 2);  // 20 steps/s x 100 ms lead
  // A quota (applied on receipt) to rank 1 comes back after ~490 ms of which the worker spent 0.
  board.open(42, {1}, /*immediate=*/true);
  RankAck slow = Ack(1);
  slow.received_at = Clock::now() + milliseconds(490);
  board.deliver(42, slow);
  (void)board.wait(42, Clock::now());
  EXPECT_GE(board.round_trip(1), std::chrono::microseconds(489000));
  EXPECT_EQ(board.round_trip(0), std::chrono::microseconds(0));
  // 20 steps/s x (100 + ~490 ms): S moves 10 steps further, enough for the command to reach rank 1 in time.
  EXPECT_EQ(trims.pick_step(ranks), 10 + 12 + 2);
  // An at-step trim's ack is no round-trip sample (it waited for S).
  board.open(43, {0});
  RankAck late = Ack(0);
  late.received_at = Clock::now() + milliseconds(900);
  board.deliver(43, late);
  EXPECT_EQ(board.round_trip(0), std::chrono::microseconds(0));
}

}  // namespace
}  // namespace memcoord::coordinator
