// Calibrated constants of the memory estimator, measured on an NVIDIA H200 with torch 2.11 and
// transformers 5.17 (calibration/measure_peaks.py; rounds and table in calibration/README.md). Round 2:
// fitted by calibration/fit_scales.py on fit_h200.jsonl, check_h200.jsonl and fit2_h200.jsonl (59 rows);
// check2_h200.jsonl is measured after this fit, to check it. Each transformer scale multiplies the analytic
// per-layer activation count of MemoryEstimator (bytes saved for backward per token per block).
// amp-fp16 uses the amp-bf16 values.
#pragma once

#include <cstdint>

namespace memcoord::planner::calibration {

// Per family (gpt2, bert, llama, mixtral) and precision (fp32, bf16, amp), from the rows without
// checkpointing. No fp32 mixtral row was measured: its fp32 scale is llama's.
struct ActivationScales {
  double fp32;
  double bf16;
  double amp;
};
inline constexpr ActivationScales kGpt2Scales{1.035, 1.035, 1.411};
inline constexpr ActivationScales kBertScales{0.939, 0.945, 1.057};
inline constexpr ActivationScales kLlamaScales{0.971, 0.967, 1.092};
inline constexpr ActivationScales kMixtralScales{0.971, 0.986, 1.510};

// cuBLAS + cuBLASLt workspaces PyTorch keeps once the first matmul ran (measured 64 MiB on H200).
inline constexpr std::uint64_t kWorkspaceBytes = 67108864;

// Backward of a block without logits (bert): gradient buffers of the feed-forward pair, in units of
// tokens × ffn × activation bytes.
inline constexpr double kBlockBackwardTransient = 1.75;

// resnet50 at 224×224: bytes saved for backward per image (fitted at batch 64), the backward transient
// as a fraction of them, and the live bytes per image of a no-grad forward (fp32; 16-bit halves it).
inline constexpr double kResNetActivationFp32 = 85669088.0;
inline constexpr double kResNetActivationBf16 = 43735824.0;
inline constexpr double kResNetActivationAmp = 44049943.0;
inline constexpr double kResNetBackwardTransient = 0.0105;
inline constexpr double kResNetInferenceFp32 = 10436608.0;

// resnet50 with each bottleneck checkpointed: saved bytes relative to the analytic share of what the
// whole network saves, and the recompute of the largest block (its activations and gradients) relative to
// its analytic share.
inline constexpr double kResNetCheckpointScale = 0.984;
inline constexpr double kResNetRecomputeFactor = 0.510;

// model.generate: fp32 copies of one step's last-token logits (processors, softmax) beyond the logits
// themselves.
inline constexpr double kGenerateLogitsFp32Copies = 2.0;

// Math attention (fp32 grouped-query attention, transformer_activations.h): live score-sized fp32 tensors
// (batch × heads × seq × seq) at one attention call. Forward: the scores, their softmax and the boolean
// mask row check (2.25 scores); backward: beyond the saved probabilities, their gradient, the softmax
// gradient and one temporary (3 scores). Fitted on llama-mid and llama-gqa fp32 with checkpointing
// (fit2_h200.jsonl, check_h200.jsonl): forward 2.27 and 2.25, backward 3.04 and 3.02.
inline constexpr double kMathScoresForward = 2.25;
inline constexpr double kMathScoresBackward = 3.0;

// Share of resnet50's activations per unit (stem, layer1..layer4, head), from the feature-map sizes.
inline constexpr double kResNetActivationShare[6] = {0.095, 0.394, 0.263, 0.197, 0.049, 0.002};

}  // namespace memcoord::planner::calibration
