// The estimator's exact parts (weights, gradients, optimizer state), how its terms move with the inputs
// (heads, generation, checkpointing, parallelism), --explain, and input checks. The error table against
// H200 measurements is calibration_table_test.cc.
#include "coordinator/planner/memory_estimator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "coordinator/planner/estimate_explain.h"

namespace memcoord::planner {
namespace {

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
  o.head = OutputHead::kMaskedLm;
  e = EstimateMemory(*PresetSpec("gpt2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("head \"masked-lm\" is not accepted for gpt2; accepted: causal-lm, "
                                      "sequence-classification"),
            std::string::npos)
      << e.status().message();
  o.head = OutputHead::kDefault;
  o.new_tokens = 16;
  e = EstimateMemory(*PresetSpec("gpt2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("new_tokens 16 is only for mode generate"), std::string::npos);
  o.mode = RunMode::kGenerate;
  o.head = OutputHead::kSequenceClassification;
  e = EstimateMemory(*PresetSpec("gpt2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("generate needs head causal-lm"), std::string::npos);
  o.head = OutputHead::kDefault;
  o.seq = 1000;
  o.new_tokens = 100;
  e = EstimateMemory(*PresetSpec("gpt2"), o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("seq + new_tokens 1100 exceeds the gpt2 position table"),
            std::string::npos);
}

TEST(MemoryEstimatorTest, HeadsDecideTheLogits) {
  TrainingOptions o;
  o.precision = Precision::kAmpBf16;
  o.batch = 32;
  o.seq = 512;
  const MemoryEstimate mlm = Estimate("bert-base", o);  // the default: BERT's pretraining head
  EXPECT_EQ(mlm.head, OutputHead::kMaskedLm);
  o.head = OutputHead::kSequenceClassification;
  const MemoryEstimate cls = Estimate("bert-base", o);
  EXPECT_EQ(cls.head, OutputHead::kSequenceClassification);
  EXPECT_EQ(cls.breakdown.logits_bytes, 0u);
  // The fp32 log-softmax over 30522 tokens at every position, and more around the loss.
  EXPECT_GE(mlm.breakdown.logits_bytes, 32ull * 512 * 30522 * 4);
  EXPECT_GT(mlm.total_bytes, cls.total_bytes + 32ull * 512 * 30522 * 4);
  EXPECT_NE(mlm.assumptions.front().find("masked-lm (the family's pretraining head, by default)"),
            std::string::npos);
  EXPECT_EQ(Estimate("gpt2", o).head, OutputHead::kSequenceClassification);
  o.head = OutputHead::kDefault;
  EXPECT_EQ(Estimate("llama2-7b", o).head, OutputHead::kCausalLm);
}

TEST(MemoryEstimatorTest, GenerationPeaksAtPrefillOrAtTheLastDecodingStep) {
  TrainingOptions o;
  o.mode = RunMode::kGenerate;
  o.precision = Precision::kBf16;
  o.batch = 8;
  o.seq = 1024;
  o.new_tokens = 0;
  const MemoryEstimate prompt_only = Estimate("llama2-7b", o);
  // K and V of 32 layers × 4096 wide in bf16 per token.
  const std::uint64_t per_token = 2ull * 32 * 4096 * 2;
  // The prompt's forward: its cache plus one block's transient (SwiGLU: 3 ffn + 4 hidden per token).
  EXPECT_EQ(prompt_only.peak_phase, "prefill");
  EXPECT_EQ(prompt_only.breakdown.kv_cache_bytes, per_token * 8 * 1024);
  EXPECT_EQ(prompt_only.breakdown.transient_bytes, (3ull * 11008 + 4 * 4096) * 2 * 8 * 1024);
  // Many new tokens: the last step holds the whole cache and one layer's keys copied by the concatenation.
  o.new_tokens = 4096;
  const MemoryEstimate longer = Estimate("llama2-7b", o);
  EXPECT_EQ(longer.peak_phase, "decode");
  EXPECT_EQ(longer.breakdown.kv_cache_bytes, per_token * 8 * 5120);
  EXPECT_EQ(longer.breakdown.transient_bytes, 4096ull * 2 * 8 * 5120);
  EXPECT_GT(longer.total_bytes, longer.breakdown.parameters_bytes + per_token * 8 * 5120);
}

TEST(MemoryEstimatorTest, GenerationWithExpertsGathersExpertWeightsPerToken) {
  // transformers decodes with batched_mm: each (token, expert) pair gets a copy of its expert's weights.
  TrainingOptions o;
  o.mode = RunMode::kGenerate;
  o.precision = Precision::kBf16;
  o.batch = 16;
  o.seq = 16;
  o.new_tokens = 16;
  const MemoryEstimate e = Estimate("mixtral-8x7b", o);
  EXPECT_EQ(e.peak_phase, "decode");
  EXPECT_EQ(e.breakdown.transient_bytes, 16ull * 2 * 3 * 14336 * 4096 * 2);
}

TEST(MemoryEstimatorTest, Fp32GroupedQueryAttentionKeepsTheScores) {
  // No fused SDPA kernel takes fp32 grouped-query attention: the math kernel saves batch × heads × seq × seq
  // fp32 scores per block. llama2-70b has 8 key/value heads for 64 query heads; llama2-7b has none grouped.
  TrainingOptions o;
  o.precision = Precision::kFp32;
  o.batch = 1;
  o.seq = 1024;
  const double scores = 80.0 * 64 * 1024 * 1024 * 4;
  const MemoryEstimate gqa = Estimate("llama2-70b", o);
  EXPECT_GT(static_cast<double>(gqa.breakdown.attention_bytes), scores);
  o.precision = Precision::kBf16;  // flash attention takes 16-bit grouped-query attention
  EXPECT_LT(static_cast<double>(Estimate("llama2-70b", o).breakdown.attention_bytes), scores / 4);
  o.precision = Precision::kFp32;
  const MemoryEstimate mha = Estimate("llama2-7b", o);
  EXPECT_LT(static_cast<double>(mha.breakdown.attention_bytes), 32.0 * 32 * 1024 * 1024 * 4);
}

TEST(MemoryEstimatorTest, CheckpointedBackwardPeaksWithTheGradientsOfLaterBlocks) {
  // Gradients accumulate during backward; with checkpointing the first block's backward sees every later
  // unit's gradients, less the block inputs already released.
  TrainingOptions o;
  o.precision = Precision::kFp32;
  o.batch = 1;
  o.seq = 512;
  o.checkpointing = true;
  const MemoryEstimate e = Estimate("llama2-7b", o);
  const double params = static_cast<double>(e.params);
  const double embedding = 32000.0 * 4096;
  const double block = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2 * 4096;
  const double inputs = 512.0 * 4096 * 4;  // one block's checkpointed input, fp32
  const double expected = 4 * (params - embedding - block) - 31 * inputs;
  EXPECT_NEAR(static_cast<double>(e.breakdown.backward_gradients_bytes), expected, expected * 1e-9);
  EXPECT_GT(e.forward_backward_bytes, e.breakdown.parameters_bytes + e.breakdown.backward_gradients_bytes);
}

TEST(MemoryEstimatorTest, ResNetCheckpointingIsModelled) {
  TrainingOptions o;
  o.batch = 128;
  const MemoryEstimate plain = Estimate("resnet50", o);
  o.checkpointing = true;
  const MemoryEstimate ckpt = Estimate("resnet50", o);
  EXPECT_LT(ckpt.total_bytes, plain.total_bytes * 3 / 4);
  EXPECT_GT(ckpt.total_bytes, plain.total_bytes / 4);
}

TEST(MemoryEstimatorTest, ExplainListsEveryKindAndAssumption) {
  TrainingOptions o;
  o.precision = Precision::kBf16;
  o.batch = 4;
  o.seq = 2048;
  o.parallel.data_ranks = 8;
  o.parallel.sharding = Sharding::kZero2;
  const ModelSpec spec = *PresetSpec("llama2-7b");
  const MemoryEstimate e = Estimate("llama2-7b", o);
  const MemoryBreakdown& b = e.breakdown;
  EXPECT_EQ(b.activations_bytes, b.attention_bytes + b.mlp_bytes + b.norms_bytes + b.other_activations_bytes);
  EXPECT_GT(b.attention_bytes, 0u);
  EXPECT_GT(b.mlp_bytes, b.attention_bytes);
  EXPECT_GT(b.norms_bytes, 0u);
  const std::string text = ExplainEstimate(spec, o, e);
  for (const char* term : {"weights", "gradients", "optimizer state", "activations: attention",
                           "activations: MLP", "activations: norms", "logits and loss", "allocator rounding",
                           "workspace", "zero2 over 8 ranks", "K = 12", "head: causal-lm"}) {
    EXPECT_NE(text.find(term), std::string::npos) << term << "\n" << text;
  }
}

}  // namespace
}  // namespace memcoord::planner
