// TrainingOptions: how a model is run, which decides its memory: numeric precision, optimizer, batch,
// sequence length, activation checkpointing and training versus inference. Names are the CLI's and the
// plan file's ("amp-bf16", "sgd-momentum"); parsers reject anything else with the accepted list.
//   fp32      fp32 weights, gradients, optimizer state and activations
//   bf16      everything in bf16 (16-bit weights, gradients and optimizer state)
//   amp-bf16  fp32 weights, gradients and state; bf16 autocast activations (amp-fp16: fp16 + GradScaler)
// Modes: training (one step of the usual loop: loss = model(**batch).loss; loss.backward(); opt.step();
// opt.zero_grad(set_to_none=True)), inference (one no-grad forward returning its KV cache), generate
// (model.generate: a prompt of `seq` tokens and `new_tokens` greedy tokens per sequence, KV cache kept).
// The output head is an input (OutputHead); kDefault is the family's pretraining head (ResolveHead).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "coordinator/planner/parallelism.h"

namespace memcoord::planner {

enum class Precision { kFp32, kBf16, kAmpBf16, kAmpFp16 };
enum class Optimizer { kAdamW, kSgd, kSgdMomentum };
enum class RunMode { kTraining, kInference, kGenerate };
enum class OutputHead { kDefault, kCausalLm, kMaskedLm, kSequenceClassification, kImageClassification };

struct TrainingOptions {
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdamW;
  std::int64_t batch = 1;      // sequences (images for resnet50); 0 in inference means weights only
  std::int64_t seq = 1024;     // tokens per sequence; ignored for resnet50 (224×224 images)
  bool checkpointing = false;  // full activation checkpointing: one checkpoint per block
  RunMode mode = RunMode::kTraining;
  OutputHead head = OutputHead::kDefault;  // kDefault: the family's pretraining head
  std::int64_t new_tokens = 0;             // generate: tokens generated per sequence after the prompt
  Parallelism parallel;                    // data/tensor/pipeline ranks and sharding (default: one device)
};

Result<Precision> ParsePrecision(std::string_view name);
Result<Optimizer> ParseOptimizer(std::string_view name);
Result<RunMode> ParseRunMode(std::string_view name);
Result<bool> ParseCheckpointing(std::string_view name);  // "none" | "full"
// "default" | "causal-lm" | "masked-lm" | "sequence-classification" | "image-classification".
Result<OutputHead> ParseOutputHead(std::string_view name);

std::string_view PrecisionName(Precision p);
std::string_view OptimizerName(Optimizer o);
std::string_view RunModeName(RunMode m);
std::string_view OutputHeadName(OutputHead h);

const std::vector<std::string>& PrecisionNames();
const std::vector<std::string>& OptimizerNames();
const std::vector<std::string>& RunModeNames();
const std::vector<std::string>& CheckpointingNames();
const std::vector<std::string>& OutputHeadNames();

}  // namespace memcoord::planner
