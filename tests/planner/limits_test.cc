// Sizes × counts in the planner's input paths: parameter counts (int64), peak estimates (double to
// uint64) and sums over devices (uint64) stay inside their types for every accepted input, and inputs
// past the limits in limits.h are INVALID_ARGUMENT naming the field and the limit — never a signed
// overflow (undefined), an out-of-range float conversion or a silently wrapped sum.
#include "coordinator/planner/limits.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::planner {
namespace {

std::string Message(const Status& s) { return s.ok() ? std::string("ok") : s.message(); }

TEST(PlannerLimitsTest, AddSaturatedStopsAtTheTop) {
  constexpr std::uint64_t kTop = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(AddSaturated(2, 3), 5u);
  EXPECT_EQ(AddSaturated(kTop - 1, 1), kTop);
  EXPECT_EQ(AddSaturated(kTop - 1, 2), kTop);
  EXPECT_EQ(AddSaturated(kTop, kTop), kTop);
}

TEST(PlannerLimitsTest, ASpecWithTooManyParametersIsRejected) {
  // 100,000 layers of 1,024 experts of width 2^24: 3 × 2^58 parameters per block, so the sum over blocks
  // overflowed int64 (undefined) at the third block.
  const nlohmann::json spec = {{"family", "mixtral"}, {"hidden", 16777216}, {"layers", 100000},
                               {"heads", 1},          {"kv_heads", 1},      {"ffn", 16777216},
                               {"vocab", 1},          {"experts", 1024},    {"experts_per_token", 1}};
  Result<ModelSpec> s = ParseModelSpec(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "spec: hidden 16777216, ffn 16777216, experts 1024, layers 100000 and vocab 1 make about 8.7e+22 "
            "parameters; accepted: at most 281474976710656 (2^48)");
  // Inside the limit is accepted: 2^22 wide, a 2^24 vocabulary, 1 layer (3 × 2^46 parameters).
  const nlohmann::json wide = {{"family", "llama"}, {"hidden", 4194304}, {"layers", 1},
                               {"heads", 1},        {"ffn", 1},          {"vocab", 16777216}};
  EXPECT_TRUE(ParseModelSpec(wide).ok());
}

TEST(PlannerLimitsTest, AnEstimatePastThePlannersRangeIsAnError) {
  // 2^24 sequences of 2^24 tokens: the logits alone are ~7e19 bytes, past uint64; the conversion used to
  // return whatever llround made of it (no error).
  const ModelSpec spec = *PresetSpec("llama2-7b");
  for (RunMode mode : {RunMode::kTraining, RunMode::kInference}) {
    TrainingOptions o;
    o.mode = mode;
    o.batch = 16777216;
    o.seq = 16777216;
    Result<MemoryEstimate> e = EstimateMemory(spec, o);
    ASSERT_FALSE(e.ok()) << RunModeName(mode) << ": " << e->total_bytes;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(e.status().message(),
              "batch 16777216 × seq 16777216: the estimated peak exceeds what the planner handles for one "
              "model; accepted: at most 9007199254740992 bytes (2^53, 8 PiB)");
  }
  // A large but real configuration is still estimated.
  TrainingOptions big;
  big.batch = 4096;
  big.seq = 4096;
  EXPECT_TRUE(EstimateMemory(spec, big).ok());
}

TEST(PlannerLimitsTest, DeviceCapacityIsBounded) {
  Result<PlanRequest> r = ParsePlanRequest(
      R"({"devices": [{"name": "a", "capacity": "80GB"}, {"name": "b", "capacity": 2305843009213693952}],
          "models": [{"preset": "gpt2"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r.status()),
            "devices[1].capacity must be at most 1152921504606846976 bytes (2^60, 1 EiB), got "
            "2305843009213693952");
}

TEST(PlannerLimitsTest, DevicesTogetherPastUint64DoNotWrap) {
  // 16 devices of 2^60 bytes hold 2^64 together: the sum wrapped to 0 and a 0.5 GB model "needed more than
  // all 16 devices together (0 B usable)".
  Result<PlanRequest> r = ParsePlanRequest(
      R"({"devices": {"count": 16, "capacity": 1152921504606846976}, "models": [{"preset": "gpt2"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<Plan> plan = MakePlan(*r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->feasible) << plan->reason;
}

TEST(PlannerLimitsTest, MakePlanChecksRequestsBuiltInMemory) {
  // The Plan RPC's live path fills devices from workers' reports, past the file parser's checks.
  Result<PlanRequest> r =
      ParsePlanRequest(R"({"devices": {"count": 1, "capacity": "80GB"}, "models": [{"preset": "gpt2"}]})");
  ASSERT_TRUE(r.ok());
  PlanRequest huge = *r;
  huge.devices.push_back({"host:gpu1", std::uint64_t{1} << 63, 0});
  EXPECT_EQ(Message(MakePlan(huge).status()),
            "devices[1] (host:gpu1).capacity must be at most 1152921504606846976 bytes (2^60, 1 EiB), got "
            "9223372036854775808");
  PlanRequest reserve = *r;
  reserve.devices[0].reserve_bytes = reserve.devices[0].capacity_bytes + 1;
  EXPECT_EQ(
      Message(MakePlan(reserve).status()),
      "devices[0] (gpu0).reserve (80000000001 bytes) must be smaller than its capacity (80000000000 bytes)");
  PlanRequest many = *r;
  many.models.resize(kMaxModels + 1, r->models[0]);
  EXPECT_EQ(Message(MakePlan(many).status()), "models: 1025 models; accepted: at most 1024");
}

TEST(PlannerLimitsTest, TooManyModelsInAFile) {
  std::string models;
  for (std::size_t i = 0; i <= kMaxModels; ++i) models += std::string(i ? "," : "") + R"({"preset": "gpt2"})";
  Result<PlanRequest> r =
      ParsePlanRequest(R"({"devices": {"count": 1, "capacity": "80GB"}, "models": [)" + models + "]}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r.status()), "models: 1025 models; accepted: at most 1024");
}

}  // namespace
}  // namespace memcoord::planner
