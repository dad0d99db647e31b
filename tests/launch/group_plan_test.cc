// PlanGroups: contiguous groups, one model per group through the planner's packer, the largest model on the
// roomiest group, clear errors when it cannot fit.
#include "examples/train/group_plan.h"

#include <gtest/gtest.h>

namespace memcoord::train {
namespace {

ModelConfig Model(const std::string& name, int hidden) {
  ModelConfig m;
  m.name = name;
  m.shape.hidden = hidden;
  return m;
}

TEST(GroupPlanTest, TwoModelsOnFourRanksGetTwoGroupsOfTwo) {
  Result<GroupPlan> plan =
      PlanGroups({Model("a", 256), Model("b", 128)}, std::vector<std::uint64_t>(4, 1ull << 30), 128, 8192);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->ranks_of_group.size(), 2u);
  EXPECT_EQ(plan->ranks_of_group[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(plan->ranks_of_group[1], (std::vector<int>{2, 3}));
  EXPECT_NE(plan->group_of_model[0], plan->group_of_model[1]);
  EXPECT_EQ(plan->model_of_rank(0), plan->model_of_rank(1));
  EXPECT_NE(plan->model_of_rank(1), plan->model_of_rank(2));
  EXPECT_GT(plan->model_bytes[0], plan->model_bytes[1]);
}

TEST(GroupPlanTest, LargestModelGoesToTheRoomiestGroup) {
  // Ranks 0-1 are small devices, 2-3 large: the large model must land on group 1.
  const std::uint64_t small = ReplicaBytes(Model("big", 512).shape, 128, 8192) - 1;
  const std::uint64_t large = 1ull << 32;
  Result<GroupPlan> plan =
      PlanGroups({Model("big", 512), Model("small", 16)}, {small, small, large, large}, 128, 8192);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->group_of_model[0], 1);
  EXPECT_EQ(plan->group_of_model[1], 0);
  EXPECT_EQ(plan->model_of_rank(3), 0);
}

TEST(GroupPlanTest, UnevenWorldSplitsAsEvenlyAsPossible) {
  Result<GroupPlan> plan =
      PlanGroups({Model("a", 64), Model("b", 64)}, std::vector<std::uint64_t>(5, 1ull << 30), 16, 16);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ranks_of_group[0].size(), 3u);
  EXPECT_EQ(plan->ranks_of_group[1].size(), 2u);
}

TEST(GroupPlanTest, ModelThatFitsNoGroupIsResourceExhaustedNamingIt) {
  Result<GroupPlan> plan = PlanGroups({Model("huge", 4096)}, {1 << 20, 1 << 20}, 128, 8192);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("huge needs"), std::string::npos) << plan.status().message();
}

TEST(GroupPlanTest, MoreModelsThanRanksIsInvalid) {
  Result<GroupPlan> plan = PlanGroups({Model("a", 8), Model("b", 8)}, {1 << 30}, 4, 4);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(PlanGroups({}, {1 << 30}, 4, 4).ok());
}

TEST(GroupPlanTest, ReplicaBytesCountsParametersThreeTimesPlusActivations) {
  MlpShape s;  // 32 -> 128 -> 128 -> 8
  const std::uint64_t params = s.parameter_count();
  EXPECT_EQ(params, 32u * 128 + 128 + 128u * 128 + 128 + 128u * 8 + 8);
  const std::uint64_t widths = 32 + 128 + 128 + 8;
  EXPECT_EQ(ReplicaBytes(s, 10, 1), 3 * params * 4 + 2 * 10 * widths * 4);
  EXPECT_EQ(ReplicaBytes(s, 10, 1000), 3 * params * 4 + 1000 * widths * 4);
}

}  // namespace
}  // namespace memcoord::train
