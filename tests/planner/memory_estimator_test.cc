// The estimator against real peaks measured on an NVIDIA H200 (coordinator/planner/calibration/
// measured_h200.json, made by measure_peaks.py): every configuration within ±10%, the held-out ones
// included; plus its exact parts (weights, gradients, optimizer state) and input checks.
#include "coordinator/planner/memory_estimator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace memcoord::planner {
namespace {

nlohmann::json LoadMeasurements() {
  std::ifstream in(MEMCOORD_CALIBRATION_JSON);
  EXPECT_TRUE(in.good()) << "cannot read " << MEMCOORD_CALIBRATION_JSON;
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(MemoryEstimatorTest, WithinTenPercentOfH200Measurements) {
  const nlohmann::json data = LoadMeasurements();
  ASSERT_FALSE(data.is_discarded());
  const std::uint64_t workspace = data["meta"]["workspace_bytes"].get<std::uint64_t>();
  int fitted = 0;
  int held_out = 0;
  double worst_held_out = 0;
  std::printf("%-8s %-12s %-9s %-12s %5s %5s %-4s %-9s %9s %9s %7s\n", "role", "model", "precision",
              "optimizer", "batch", "seq", "ckpt", "mode", "measured", "estimate", "error");
  for (const nlohmann::json& row : data["rows"]) {
    ASSERT_FALSE(row.contains("error")) << row.dump();
    const std::string model = row["model"];
    Result<ModelSpec> spec =
        data["specs"].contains(model) ? ParseModelSpec(data["specs"][model]) : PresetSpec(model);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_NEAR(static_cast<double>(TotalParams(*spec)), row["params"].get<double>(), 5000.0)
        << model;  // + the classifier (2h + 2)
    TrainingOptions o;
    o.precision = *ParsePrecision(row["precision"].get<std::string>());
    o.optimizer = *ParseOptimizer(row["optimizer"].get<std::string>());
    o.mode = *ParseRunMode(row["mode"].get<std::string>());
    o.batch = row["batch"];
    o.seq = row["seq"];
    o.checkpointing = row["checkpointing"] == "full";
    Result<MemoryEstimate> e = EstimateMemory(*spec, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const double measured = row["peak_bytes"].get<double>() + static_cast<double>(workspace);
    const double error = (static_cast<double>(e->total_bytes) - measured) / measured;
    const std::string role = row["role"];
    std::printf("%-8s %-12s %-9s %-12s %5d %5d %-4s %-9s %8.3fG %8.3fG %+6.1f%%\n", role.c_str(),
                model.c_str(), row["precision"].get<std::string>().c_str(),
                row["optimizer"].get<std::string>().c_str(), row["batch"].get<int>(), row["seq"].get<int>(),
                row["checkpointing"].get<std::string>().c_str(), row["mode"].get<std::string>().c_str(),
                measured / 1e9, static_cast<double>(e->total_bytes) / 1e9, 100 * error);
    EXPECT_LE(std::abs(error), 0.10) << role << " " << row.dump();
    if (role == "fit") {
      ++fitted;
    } else {
      ++held_out;
      worst_held_out = std::max(worst_held_out, std::abs(error));
    }
  }
  std::printf("fitted %d, held out %d, worst held-out error %.1f%%\n", fitted, held_out,
              100 * worst_held_out);
  EXPECT_GE(held_out, 15);
}

MemoryEstimate Estimate(const std::string& preset, TrainingOptions o) {
  Result<MemoryEstimate> e = EstimateMemory(*PresetSpec(preset), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : MemoryEstimate{};
}

TEST(MemoryEstimatorTest, ModelStatesFollowPrecisionAndOptimizer) {
  const std::uint64_t p = 124'439'808;
  TrainingOptions o;
  o.batch = 1;
  o.seq = 128;
  MemoryEstimate fp32 = Estimate("gpt2", o);
  EXPECT_EQ(fp32.breakdown.parameters_bytes, 4 * p);
  EXPECT_EQ(fp32.breakdown.gradients_bytes, 4 * p);
  EXPECT_EQ(fp32.breakdown.optimizer_state_bytes, 8 * p);
  EXPECT_EQ(fp32.breakdown.optimizer_temporaries_bytes, 4 * p);
  o.precision = Precision::kBf16;
  MemoryEstimate bf16 = Estimate("gpt2", o);
  EXPECT_EQ(bf16.breakdown.parameters_bytes, 2 * p);
  EXPECT_EQ(bf16.breakdown.optimizer_state_bytes, 4 * p);
  o.precision = Precision::kAmpBf16;
  EXPECT_EQ(Estimate("gpt2", o).breakdown.optimizer_state_bytes, 8 * p);  // fp32 master state
  o.optimizer = Optimizer::kSgd;
  EXPECT_EQ(Estimate("gpt2", o).breakdown.optimizer_state_bytes, 0u);
  o.optimizer = Optimizer::kSgdMomentum;
  EXPECT_EQ(Estimate("gpt2", o).breakdown.optimizer_state_bytes, 4 * p);
}

TEST(MemoryEstimatorTest, ActivationsGrowWithBatchAndShrinkWithCheckpointing) {
  TrainingOptions o;
  o.precision = Precision::kBf16;
  o.batch = 8;
  o.seq = 2048;
  const MemoryEstimate base = Estimate("llama2-7b", o);
  o.batch = 16;
  const MemoryEstimate bigger = Estimate("llama2-7b", o);
  o.checkpointing = true;
  const MemoryEstimate ckpt = Estimate("llama2-7b", o);
  EXPECT_GT(bigger.breakdown.activations_bytes, base.breakdown.activations_bytes * 19 / 10);
  EXPECT_LT(ckpt.total_bytes, bigger.total_bytes / 2);
  EXPECT_EQ(base.peak_phase, "forward/backward");
}

TEST(MemoryEstimatorTest, InferenceWithoutBatchIsWeightsOnly) {
  TrainingOptions o;
  o.mode = RunMode::kInference;
  o.precision = Precision::kBf16;
  o.batch = 0;
  o.seq = 0;
  const MemoryEstimate e = Estimate("llama2-70b", o);
  EXPECT_EQ(e.total_bytes, 2ull * 68'976'648'192ull);
  std::uint64_t units = 0;
  for (const UnitMemory& u : e.units) units += u.bytes;
  EXPECT_EQ(units, e.total_bytes);
}

TEST(MemoryEstimatorTest, OptionsThatDoNotFitTheModelAreNamed) {
  TrainingOptions o;
  o.seq = 2048;
  Result<MemoryEstimate> e = EstimateMemory(*PresetSpec("gpt2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("seq 2048"), std::string::npos) << e.status().message();
  o.seq = 128;
  o.batch = 0;
  e = EstimateMemory(*PresetSpec("gpt2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("batch"), std::string::npos);
  o.batch = -3;
  EXPECT_FALSE(EstimateMemory(*PresetSpec("gpt2"), o).ok());
  o.batch = 4;
  o.checkpointing = true;
  e = EstimateMemory(*PresetSpec("resnet50"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("checkpointing"), std::string::npos);
}

}  // namespace
}  // namespace memcoord::planner
