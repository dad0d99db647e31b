// Per-rank model states against DeepSpeed's published ZeRO formulas (Rajbhandari et al., "ZeRO: Memory
// Optimizations Toward Training Trillion Parameter Models", 2020, Figure 1), with K = 12 for mixed-precision
// Adam: stage 1: 2Ψ + 2Ψ + KΨ/N, stage 2: 2Ψ + (2 + K)Ψ/N, stage 3: (2 + 2 + K)Ψ/N. Also DDP's buckets, FSDP
// and the unsharded layout, and the same terms through EstimateMemory.
#include "coordinator/planner/model_states.h"

#include <gtest/gtest.h>

#include "coordinator/planner/memory_estimator.h"

namespace memcoord::planner {
namespace {

double StatesSum(const ModelStates& s) { return s.weights + s.gradients + s.optimizer_state; }

ModelStates Zero(Sharding stage, double psi, std::int64_t n, Precision p = Precision::kAmpBf16) {
  Parallelism par;
  par.sharding = stage;
  par.data_ranks = n;
  return ModelStatesPerRank(psi, 0, p, Optimizer::kAdamW, par, true);
}

TEST(ModelStatesTest, ZeroStagesMatchDeepSpeedFormulas) {
  const double k = 12;
  EXPECT_EQ(ZeroOptimizerBytesPerParam(Precision::kAmpBf16, Optimizer::kAdamW), k);
  EXPECT_EQ(ZeroOptimizerBytesPerParam(Precision::kBf16, Optimizer::kAdamW), k);
  for (double psi : {7.5e9, 1.3e10, 1.75e11}) {
    for (std::int64_t n : {1, 4, 8, 64, 1024}) {
      const double nd = static_cast<double>(n);
      EXPECT_DOUBLE_EQ(StatesSum(Zero(Sharding::kZero1, psi, n)), 2 * psi + 2 * psi + k * psi / nd);
      EXPECT_DOUBLE_EQ(StatesSum(Zero(Sharding::kZero2, psi, n)), 2 * psi + (2 + k) * psi / nd);
      EXPECT_DOUBLE_EQ(StatesSum(Zero(Sharding::kZero3, psi, n)), (2 + 2 + k) * psi / nd);
    }
  }
  // The paper's worked example: Ψ = 7.5B, N = 64: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
  const double psi = 7.5e9;
  Parallelism ddp;
  EXPECT_NEAR(StatesSum(ModelStatesPerRank(psi, 0, Precision::kAmpBf16, Optimizer::kAdamW, ddp, true)) / 1e9,
              120.0, 0.05);  // PyTorch's amp layout: 4 + 4 + 8 bytes, the same 16Ψ as 2 + 2 + 12
  EXPECT_NEAR(StatesSum(Zero(Sharding::kZero1, psi, 64)) / 1e9, 31.4, 0.05);
  EXPECT_NEAR(StatesSum(Zero(Sharding::kZero2, psi, 64)) / 1e9, 16.6, 0.05);
  EXPECT_NEAR(StatesSum(Zero(Sharding::kZero3, psi, 64)) / 1e9, 1.9, 0.05);
}

TEST(ModelStatesTest, Fp32ZeroKeepsNoMasterCopy) {
  EXPECT_EQ(ZeroOptimizerBytesPerParam(Precision::kFp32, Optimizer::kAdamW), 8);
  EXPECT_EQ(ZeroOptimizerBytesPerParam(Precision::kAmpBf16, Optimizer::kSgdMomentum), 8);
  EXPECT_EQ(ZeroOptimizerBytesPerParam(Precision::kAmpBf16, Optimizer::kSgd), 4);
  const ModelStates s = Zero(Sharding::kZero2, 1e9, 8, Precision::kFp32);
  EXPECT_DOUBLE_EQ(s.weights, 4e9);
  EXPECT_DOUBLE_EQ(s.gradients, 4e9 / 8);
  EXPECT_DOUBLE_EQ(s.optimizer_state, 8e9 / 8);
}

TEST(ModelStatesTest, DdpKeepsBucketsAndFsdpShardsPyTorchsLayout) {
  Parallelism par;
  par.data_ranks = 8;
  const ModelStates ddp = ModelStatesPerRank(1e9, 1e8, Precision::kAmpBf16, Optimizer::kAdamW, par, true);
  EXPECT_DOUBLE_EQ(ddp.ddp_buckets, 4e9);  // a second copy of the fp32 gradients
  EXPECT_DOUBLE_EQ(StatesSum(ddp), 16e9);
  par.sharding = Sharding::kFsdp;
  const ModelStates fsdp = ModelStatesPerRank(1e9, 1e8, Precision::kAmpBf16, Optimizer::kAdamW, par, true);
  EXPECT_DOUBLE_EQ(StatesSum(fsdp), 16e9 / 8);
  EXPECT_DOUBLE_EQ(fsdp.optimizer_temporaries, 4e9 / 8);
  EXPECT_DOUBLE_EQ(fsdp.gathered, 2 * 2 * 1e8 + 4 * 1e8);  // two blocks in bf16, one block's fp32 grads
  EXPECT_EQ(fsdp.ddp_buckets, 0);
  par.data_ranks = 1;
  par.sharding = Sharding::kNone;
  EXPECT_EQ(ModelStatesPerRank(1e9, 1e8, Precision::kFp32, Optimizer::kAdamW, par, true).ddp_buckets, 0);
}

TEST(ModelStatesTest, EstimateShardsModelStatesOverRanks) {
  const Result<ModelSpec> spec = PresetSpec("llama2-13b");
  ASSERT_TRUE(spec.ok());
  const double psi = static_cast<double>(TotalParams(*spec));
  TrainingOptions o;
  o.precision = Precision::kBf16;
  o.batch = 1;
  o.seq = 2048;
  o.parallel.data_ranks = 8;
  std::uint64_t previous = UINT64_MAX;
  for (Sharding s : {Sharding::kNone, Sharding::kZero1, Sharding::kZero2, Sharding::kZero3}) {
    o.parallel.sharding = s;
    const Result<MemoryEstimate> e = EstimateMemory(*spec, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const MemoryBreakdown& b = e->breakdown;
    const double states =
        static_cast<double>(b.parameters_bytes + b.gradients_bytes + b.optimizer_state_bytes);
    if (s == Sharding::kZero3) {
      EXPECT_NEAR(states, 16 * psi / 8, 16);
    }
    if (s == Sharding::kZero1) {
      EXPECT_NEAR(states, 4 * psi + 12 * psi / 8, 16);
    }
    EXPECT_LT(e->total_bytes, previous) << ShardingName(s);
    previous = e->total_bytes;
  }
}

TEST(ModelStatesTest, BadParallelismIsNamed) {
  const Result<ModelSpec> spec = PresetSpec("gpt2");
  TrainingOptions o;
  o.batch = 1;
  o.seq = 128;
  const auto error = [&](TrainingOptions x) {
    Result<MemoryEstimate> e = EstimateMemory(*spec, x);
    return e.ok() ? std::string("ok") : e.status().message();
  };
  TrainingOptions x = o;
  x.parallel.data_ranks = 0;
  EXPECT_NE(error(x).find("data_ranks must be between 1 and"), std::string::npos) << error(x);
  x = o;
  x.parallel.pipeline_stages = 13;
  EXPECT_NE(error(x).find("pipeline_stages 13 exceeds the model's 12 layers"), std::string::npos) << error(x);
  x = o;
  x.parallel.tensor_ranks = 5;
  EXPECT_NE(error(x).find("tensor_ranks 5 must divide"), std::string::npos) << error(x);
  x = o;
  x.parallel.micro_batches = 4;
  EXPECT_NE(error(x).find("micro_batches 4 needs pipeline_stages > 1"), std::string::npos) << error(x);
  const Result<Sharding> zero4 = ParseSharding("zero4");
  ASSERT_FALSE(zero4.ok());
  EXPECT_NE(zero4.status().message().find("accepted: none, zero1, zero2, zero3, fsdp"), std::string::npos);
}

}  // namespace
}  // namespace memcoord::planner
