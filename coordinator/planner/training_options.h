// TrainingOptions: how a model is run, which decides its memory: numeric precision, optimizer, batch,
// sequence length, activation checkpointing and training versus inference. Names are the CLI's and the
// plan file's ("amp-bf16", "sgd-momentum"); parsers reject anything else with the accepted list.
//   fp32      fp32 weights, gradients, optimizer state and activations
//   bf16      everything in bf16 (16-bit weights, gradients and optimizer state)
//   amp-bf16  fp32 weights, gradients and state; bf16 autocast activations (amp-fp16: fp16 + GradScaler)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace memcoord::planner {

enum class Precision { kFp32, kBf16, kAmpBf16, kAmpFp16 };
enum class Optimizer { kAdamW, kSgd, kSgdMomentum };
enum class RunMode { kTraining, kInference };

struct TrainingOptions {
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdamW;
  std::int64_t batch = 1;      // sequences (images for resnet50); 0 in inference means weights only
  std::int64_t seq = 1024;     // tokens per sequence; ignored for resnet50 (224×224 images)
  bool checkpointing = false;  // full activation checkpointing: one checkpoint per block
  RunMode mode = RunMode::kTraining;
};

Result<Precision> ParsePrecision(std::string_view name);
Result<Optimizer> ParseOptimizer(std::string_view name);
Result<RunMode> ParseRunMode(std::string_view name);
Result<bool> ParseCheckpointing(std::string_view name);  // "none" | "full"

std::string_view PrecisionName(Precision p);
std::string_view OptimizerName(Optimizer o);
std::string_view RunModeName(RunMode m);

const std::vector<std::string>& PrecisionNames();
const std::vector<std::string>& OptimizerNames();
const std::vector<std::string>& RunModeNames();
const std::vector<std::string>& CheckpointingNames();

}  // namespace memcoord::planner
