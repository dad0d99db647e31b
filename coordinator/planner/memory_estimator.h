// MemoryEstimator: the peak GPU memory (as torch.cuda.max_memory_allocated reports it) of one training step
// or one inference forward of a model on one device, plus the per-unit bytes the placement planner packs.
//
// Training peak = max(forward/backward, optimizer step) + cuBLAS workspace + inputs, where
//   forward/backward = weights + optimizer state + saved activations + saved logits/loss
//                      + the larger of the forward and backward transients (logit upcast, loss gradients);
//   optimizer step   = weights + gradients + optimizer state + optimizer temporaries (AdamW's foreach
//                      sqrt buffer is one parameter-sized tensor; SGD has none).
// Gradients are freed by zero_grad(set_to_none=True), so they do not overlap the forward's activations.
// Attention is PyTorch's default memory-efficient SDPA (no s×s score matrix is kept). With full
// checkpointing only each block's input is saved and one block is recomputed at a time during backward.
// Inference = weights + KV cache + output logits of one forward (batch 0: weights only).
// Activation coefficients are analytic counts of the tensors autograd saves, scaled by constants fitted on
// H200 measurements (estimator_coefficients.h). Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/model_units.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

struct MemoryBreakdown {
  std::uint64_t parameters_bytes = 0;
  std::uint64_t gradients_bytes = 0;
  std::uint64_t optimizer_state_bytes = 0;
  std::uint64_t optimizer_temporaries_bytes = 0;
  std::uint64_t activations_bytes = 0;  // saved for backward (inference: KV cache), logits excluded
  std::uint64_t logits_bytes = 0;       // saved logits and loss (inference: output logits)
  std::uint64_t transient_bytes = 0;    // short-lived buffers at the peak phase
  std::uint64_t inputs_bytes = 0;
  std::uint64_t workspace_bytes = 0;
};

// Bytes a placement puts on the device hosting a unit: its weights and optimizer state plus the larger of
// (gradients + optimizer temporaries) and the activations it saves (the head also carries logits and loss).
// Summing units bounds the peak from above: each unit's phases are taken at their own maximum.
struct UnitMemory {
  std::string name;
  std::int64_t params = 0;
  std::uint64_t bytes = 0;
  std::optional<std::size_t> tied_to;
};

struct MemoryEstimate {
  std::int64_t params = 0;
  std::uint64_t total_bytes = 0;  // the peak
  std::string peak_phase;         // "forward/backward", "optimizer step", "forward", "weights"
  std::uint64_t forward_backward_bytes = 0;
  std::uint64_t optimizer_step_bytes = 0;
  MemoryBreakdown breakdown;
  std::vector<UnitMemory> units;
  // Extra bytes on every device that runs part of the model (workspace, recomputed block, transients).
  std::uint64_t per_device_overhead_bytes = 0;
};

// REQUIRES: spec came from PresetSpec or ParseModelSpec. INVALID_ARGUMENT naming the field when the options
// do not fit the model: batch or seq below 1 in training, seq above the learned positions (gpt2, bert),
// checkpointing on resnet50; and when the peak, the sum of the units or the per-device overhead would pass
// kMaxModelBytes (2^53 bytes, limits.h), naming the batch and sequence that make it so.
Result<MemoryEstimate> EstimateMemory(const ModelSpec& spec, const TrainingOptions& options);

}  // namespace memcoord::planner
