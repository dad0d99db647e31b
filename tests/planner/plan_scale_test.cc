// Plan requests at the size limits (limits.h: 65,536 devices, 2^22 devices × models): past them a clear
// INVALID_ARGUMENT naming the field, the value and what is accepted; at them an answer in well under a
// second. The fuzzer found `{"devices": {"count": 13e4, ...}}` running past its 10 s timeout: the parser
// compared every pair of device names (130,000 devices: 23 s in release), and placement, advice and the
// table had quadratic steps (12 whole models on 65,536 unequal devices: 36 s).
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/planner/limits.h"
#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_report.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::planner {
namespace {

std::string Message(const Status& s) { return s.ok() ? std::string("ok") : s.message(); }

// "[model, model, ..., last]": `count` copies of the object `model`, then `last` when given.
std::string Models(std::size_t count, const std::string& model, const std::string& last = "") {
  std::string out = "[";
  for (std::size_t i = 0; i < count; ++i) out += (i ? "," : "") + model;
  if (!last.empty()) out += "," + last;
  return out + "]";
}

TEST(PlanRequestScaleTest, TheFuzzersDeviceCountIsRefusedByName) {
  const auto start = std::chrono::steady_clock::now();
  Result<PlanRequest> r = ParsePlanRequest(
      R"({"devices": {"count":13e4, "capacity":"4GB"}, "models":[{"preset":"llama2-7b","batch":1644}]})");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "devices.count must be between 1 and 65536, got 130000");
  EXPECT_LT(seconds, 1.0);
}

TEST(PlanRequestScaleTest, ADeviceListPastTheLimitIsRefused) {
  std::string devices = "[";
  for (std::size_t i = 0; i <= kMaxDevices; ++i)
    devices += std::string(i ? "," : "") + R"({"capacity": 1000})";
  devices += "]";
  Result<PlanRequest> r =
      ParsePlanRequest(R"({"devices": )" + devices + R"(, "models": [{"preset": "gpt2"}]})");
  EXPECT_EQ(Message(r.status()), "devices: 65537 devices; accepted: at most 65536");
}

TEST(PlanRequestScaleTest, DevicesTimesModelsIsBounded) {
  const std::string text = R"({"devices": {"count": 65536, "capacity": "80GB"}, "models": )" +
                           Models(65, R"({"preset": "gpt2"})") + "}";
  const std::string expected =
      "devices × models: 65536 devices × 65 models = 4259840; accepted: at most 4194304 (e.g. 65536 devices "
      "with 64 models, or 4096 devices with 1024 models)";
  EXPECT_EQ(Message(ParsePlanRequest(text).status()), expected);
  // A request built in memory (the Plan RPC's live devices) is checked by MakePlan too.
  Result<PlanRequest> r = ParsePlanRequest(R"({"devices": {"count": 65536, "capacity": "80GB"}, "models": )" +
                                           Models(64, R"({"preset": "gpt2"})") + "}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  r->models.push_back(r->models.back());
  EXPECT_EQ(Message(MakePlan(*r).status()), expected);
  r->models.pop_back();
  r->devices.push_back({"one-more", 80'000'000'000, 0});
  EXPECT_EQ(Message(MakePlan(*r).status()), "devices: 65537 devices; accepted: at most 65536");
}

TEST(PlanRequestScaleTest, LayersOverAllModelsAreBounded) {
  // 64 models of 100,000 layers each: parsed, then estimated 6.4 million layers per placement, ~150
  // placements for the advice.
  const std::string deep =
      R"({"spec": {"family": "llama", "hidden": 64, "layers": 100000, "heads": 4, "ffn": 128, "vocab": 1000}})";
  Result<PlanRequest> r =
      ParsePlanRequest(R"({"devices": {"count": 8, "capacity": "80GB"}, "models": )" + Models(2, deep) + "}");
  EXPECT_EQ(Message(r.status()),
            "models: 200000 layers in 2 model(s) together; accepted: at most 16384 layers in one plan");
  Result<PlanRequest> ok = ParsePlanRequest(
      R"({"devices": {"count": 8, "capacity": "80GB"}, "models": [{"preset": "llama2-70b"}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ok->models.resize(205, ok->models[0]);  // 80 layers each: 16,400
  EXPECT_EQ(Message(MakePlan(*ok).status()),
            "models: 16400 layers in 205 model(s) together; accepted: at most 16384 layers in one plan");
}

TEST(PlanRequestScaleTest, APipelinedPlanHasAtMost256Devices) {
  const std::string text = R"({"devices": {"count": 257, "capacity": "80GB"},
                               "models": [{"preset": "gpt2"}, {"preset": "gpt2", "micro_batches": 4, "split": "layers"}]})";
  EXPECT_EQ(Message(ParsePlanRequest(text).status()),
            "models[1].micro_batches: a pipelined model has one stage on each device, and the plan lists 257 "
            "devices; accepted: at most 256 devices in a plan with a pipelined model");
}

TEST(PlanRequestScaleTest, DuplicateNamesNameBothDevices) {
  Result<PlanRequest> r = ParsePlanRequest(
      R"({"devices": [{"name": "a", "capacity": 10}, {"name": "b", "capacity": 10}, {"name": "a", "capacity": 10}],
          "models": [{"preset": "gpt2"}]})");
  EXPECT_EQ(Message(r.status()), "devices[2].name \"a\" is used twice (also devices[0])");
}

// 65,536 devices of distinct capacities (40 GB + i MB).
std::string UnequalDevices() {
  std::string out = "[";
  for (std::size_t i = 0; i < kMaxDevices; ++i)
    out +=
        std::string(i ? "," : "") + R"({"capacity": )" + std::to_string(40'000'000'000 + i * 1'000'003) + "}";
  return out + "]";
}

// 1,024 whole gpt2 of batch 1-30 on 256 devices of 60-100 GB: largest-first packing fails, and each of
// the advice's ~150 trial placements packed with moves and swaps that scanned every item for every device
// (1.5 s in all; 0.05 s with per-device item lists).
std::string ManyModelsOnFewDevices() {
  std::string devices = "[";
  for (std::size_t i = 0; i < 256; ++i)
    devices += std::string(i ? "," : "") + R"({"capacity": )" +
               std::to_string(60'000'000'000 + (i * 7919 % 4001) * 10'000'000) + "}";
  std::string models = "[";
  for (std::size_t i = 0; i < 1024; ++i)
    models += std::string(i ? "," : "") + R"({"preset": "gpt2", "split": "whole", "batch": )" +
              std::to_string(1 + i * 13 % 30) + "}";
  return R"({"devices": )" + devices + "], \"models\": " + models + "]}";
}

struct ScaleCase {
  std::string label;
  std::string json;
  bool feasible;
};

// Parse, plan (with advice when infeasible) and both reports, as `memcoord plan` does. The budget is 1 s
// per request on a loaded 2-core machine; measured in release (2026-12-03) 0.12-0.23 s each, against
// 9.2 s, 35.6 s, 10.9 s and 39.0 s before (the parser alone took 9 s at 65,536 devices).
TEST(PlanRequestScaleTest, PlansAtTheLimitsAnswerFast) {
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "timed in optimised builds without sanitizers only (ASan makes the planner ~50x slower)";
#endif
  const std::string d65536 = R"({"count": 65536, "capacity": "80GB"})";
  const std::string d4096 = R"({"count": 4096, "capacity": "80GB"})";
  const std::string kDeepSpec =
      R"({"family": "llama", "hidden": 64, "layers": 16384, "heads": 4, "ffn": 128, "vocab": 1000})";
  const std::vector<ScaleCase> cases = {
      {"the fuzzer's request at 65,536 devices (too large: advice)",
       R"({"devices": {"count": 65536, "capacity": "4GB"}, "models": [{"preset": "llama2-7b", "batch": 1644}]})",
       false},
      {"12 whole models on 65,536 unequal devices (exact packing)",
       R"({"devices": )" + UnequalDevices() + R"(, "models": )" +
           Models(12, R"({"preset": "gpt2", "batch": 4, "split": "whole"})") + "}",
       true},
      {"64 layer-split models on 65,536 devices",
       R"({"devices": )" + d65536 + R"(, "models": )" +
           Models(64, R"({"preset": "gpt2", "batch": 16, "split": "layers"})") + "}",
       true},
      {"1,024 whole models on 4,096 devices, one too large (advice)",
       R"({"devices": )" + d4096 + R"(, "models": )" +
           Models(1023, R"({"preset": "gpt2", "batch": 8, "split": "whole"})",
                  R"({"preset": "llama2-7b", "batch": 64, "split": "whole"})") +
           "}",
       false},
      {"1,024 whole models that do not fit 256 unequal devices (advice)", ManyModelsOnFewDevices(), false},
      {"a 16,384-layer model on 8 small devices (advice)",
       R"({"devices": {"count": 8, "capacity": "1MB"}, "models": [{"batch": 64, "spec": )" + kDeepSpec +
           "}]}",
       false},
      {"a pipelined 16,384-layer model over 256 devices (advice)",
       R"({"devices": {"count": 256, "capacity": "300MB"}, "models": [{"batch": 640, "micro_batches": 8, "spec": )" +
           kDeepSpec + "}]}",
       false},
  };
  for (const ScaleCase& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    Result<PlanRequest> r = ParsePlanRequest(c.json);
    ASSERT_TRUE(r.ok()) << c.label << ": " << r.status().ToString();
    Result<Plan> plan = MakePlan(*r);
    ASSERT_TRUE(plan.ok()) << c.label << ": " << plan.status().ToString();
    const std::size_t report_bytes = PlanToJson(*r, *plan).dump().size() + PlanToTable(*r, *plan).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %-62s %.3f s (planning %.1f ms, report %zu bytes)\n", c.label.c_str(), seconds,
                plan->planning_ms, report_bytes);
    EXPECT_EQ(plan->feasible, c.feasible) << c.label << ": " << plan->reason;
    EXPECT_LT(seconds, 1.0) << c.label;
  }
}

}  // namespace
}  // namespace memcoord::planner

namespace memcoord::planner {
namespace {

// A pipeline's split evaluates O(stages · log(units) · log(bytes)) stage ranges; each evaluation summed
// its units one by one, so 100,000 layers over 64 stages took 1.65 s (8 stages in a plan, with advice:
// 12 s). With prefix sums an evaluation is O(1).
TEST(PlanRequestScaleTest, APipelineOfManyLayersSplitsFast) {
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "timed in optimised builds without sanitizers only";
#endif
  Result<ModelSpec> spec = ParseModelSpec(nlohmann::json::parse(
      R"({"family": "llama", "hidden": 64, "layers": 100000, "heads": 4, "ffn": 128, "vocab": 1000})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  TrainingOptions o;
  o.parallel.pipeline_stages = 64;
  o.parallel.micro_batches = 8;
  const auto start = std::chrono::steady_clock::now();
  Result<MemoryEstimate> e = EstimateMemory(*spec, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->stages.size(), 64u);
  ASSERT_EQ(e->weights_only_stages.size(), 64u);
  std::printf("  100,000 layers, 64 stages: %.3f s\n", seconds);
  EXPECT_LT(seconds, 0.5);  // release, 2026-12-03: 0.06 s; 1.65 s summing each range
}

}  // namespace
}  // namespace memcoord::planner
