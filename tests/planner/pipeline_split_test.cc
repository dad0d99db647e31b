// Pipeline splits: SplitStages is optimal against brute force on stage-dependent loads, and the planner's
// 1F1B-aware split fits a 13B model on 4 × 80 GB where the split balancing weights alone does not.
#include "coordinator/planner/pipeline_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::planner {
namespace {

// A 1F1B-like load: item weights plus activations multiplied by the micro-batches stage j holds.
struct Items {
  std::vector<std::uint64_t> states;
  std::vector<std::uint64_t> acts;
  std::size_t stages = 1;
  std::uint64_t Load(std::size_t a, std::size_t b, std::size_t j) const {
    std::uint64_t s = 0;
    for (std::size_t i = a; i <= b; ++i) s += states[i] + acts[i] * (stages - j);
    return s;
  }
};

std::uint64_t BruteForce(const Items& items, std::size_t n, std::size_t stages, std::size_t from = 0,
                         std::size_t stage = 0) {
  if (stage + 1 == stages) return items.Load(from, n - 1, stage);
  std::uint64_t best = UINT64_MAX;
  for (std::size_t end = from + 1; end + (stages - stage - 1) <= n; ++end) {
    const std::uint64_t here = items.Load(from, end - 1, stage);
    best = std::min(best, std::max(here, BruteForce(items, n, stages, end, stage + 1)));
  }
  return best;
}

TEST(PipelineSplitTest, OptimalAgainstBruteForce) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 2 + rng() % 9;
    Items items;
    items.stages = 1 + rng() % std::min<std::size_t>(n, 5);
    for (std::size_t i = 0; i < n; ++i) {
      items.states.push_back(rng() % 100);
      items.acts.push_back(rng() % 50);
    }
    const StageLoadFunction load = [&](std::size_t a, std::size_t b, std::size_t j) {
      return items.Load(a, b, j);
    };
    const Result<StageSplit> split = SplitStages(n, items.stages, load);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    EXPECT_EQ(split->bottleneck_bytes, BruteForce(items, n, items.stages)) << "trial " << trial;
    for (std::size_t j = 0; j < items.stages; ++j) EXPECT_LT(split->first[j], split->first[j + 1]);
  }
}

TEST(PipelineSplitTest, CapacitiesAndBadInput) {
  Items items{{10, 10, 10, 10}, {5, 5, 5, 5}, 2};
  const StageLoadFunction load = [&](std::size_t a, std::size_t b, std::size_t j) {
    return items.Load(a, b, j);
  };
  EXPECT_FALSE(SplitStages(4, 5, load).ok());
  EXPECT_FALSE(SplitStages(4, 0, load).ok());
  const Result<StageSplit> tight = SplitStages(4, 2, load, {20, 1000});  // stage 0 takes one 20-byte item
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->first[1], 1u);
  EXPECT_EQ(SplitStages(4, 2, load, {19, 1000}).status().code(), StatusCode::kResourceExhausted);
}

constexpr const char* kThirteenB = R"({
  "devices": {"count": 4, "capacity": "80GB"},
  "models": [{"name": "13b", "preset": "llama2-13b", "precision": "bf16", "batch": 2, "seq": 4096,
              "micro_batches": 8}]})";

TEST(PipelineSplitTest, PlannerFitsWhereAWeightsOnlySplitDoesNot) {
  const Result<PlanRequest> request = ParsePlanRequest(kThirteenB);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const Result<Plan> plan = MakePlan(*request);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->feasible) << plan->reason;
  const ModelPlacement& m = plan->models[0];
  ASSERT_EQ(m.stages.size(), 4u);
  ASSERT_EQ(m.weights_only_stages.size(), 4u);
  const std::uint64_t capacity = 80'000'000'000ull;
  for (const StagePeak& p : m.stages) EXPECT_LE(p.bytes, capacity);
  std::uint64_t naive_peak = 0;
  for (const StagePeak& p : m.weights_only_stages) naive_peak = std::max(naive_peak, p.bytes);
  EXPECT_GT(naive_peak, capacity);  // the weights-only split overflows its first stage
  EXPECT_GT(m.weights_only_stages[0].bytes, m.weights_only_stages[3].bytes);
  // 1F1B: the first stage holds 4 micro-batches, so it takes fewer layers than the last.
  EXPECT_EQ(m.stages[0].in_flight, 4);
  EXPECT_EQ(m.stages[3].in_flight, 1);
  EXPECT_LT(m.stages[0].last_unit - m.stages[0].first_unit, m.stages[3].last_unit - m.stages[3].first_unit);
}

TEST(PipelineSplitTest, MicroBatchesNeedALayerSplit) {
  const Result<PlanRequest> r = ParsePlanRequest(R"({"devices": {"count": 2, "capacity": "80GB"},
    "models": [{"preset": "gpt2", "split": "whole", "micro_batches": 4}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("models[0].micro_batches needs \"split\": \"layers\""),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace memcoord::planner
