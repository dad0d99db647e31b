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

}  // namespace
}  // namespace memcoord::coordinator
