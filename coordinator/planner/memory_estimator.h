// MemoryEstimator: the peak GPU memory (as torch.cuda.max_memory_allocated reports it) of one training step
// of the usual loop, one inference forward, or one model.generate call, on one rank, plus the per-unit
// bytes the placement planner packs.
//
// Training peak = max(forward/backward, optimizer step), where
//   forward/backward = weights + optimizer state + saved activations (by kind: attention, MLP, norms;
//                      logits and loss by head) + the largest transient (the loss's logits and fp32 upcast
//                      with what the output object holds under autocast, the head's or a block's backward,
//                      a checkpointed block's recompute with the gradients accumulated by then)
//                      [+ gradients under a pipeline, which accumulate across micro-batches];
//   optimizer step   = weights + gradients + optimizer state + optimizer temporaries (AdamW's foreach
//                      sqrt buffer is one parameter-sized tensor; SGD has none);
// both + inputs + cuBLAS workspace + DDP buckets / ZeRO-3 and FSDP gathered parameters (model_states.h).
// The usual loop holds no model output across backward: the logits die with it, only the loss's fp32
// log-softmax stays. Gradients are freed by zero_grad(set_to_none=True), so (without a pipeline) they do
// not overlap the forward's activations; during backward they accumulate, which is what peaks with
// checkpointing (the first block's backward). Full checkpointing keeps each block's input and recomputes
// one block at a time during backward (resnet50: each bottleneck block, non-reentrant). fp32
// grouped-query attention runs SDPA's math kernel and keeps batch × heads × seq × seq scores
// (transformer_activations.h).
// Inference = weights + KV cache + output logits of one forward (batch 0: weights only).
// Generate = weights + one step's logits + the larger of the prefill (the prompt's cache and one block's
// forward transient over the prompt) and the last decoding step (the full cache and the larger of one
// layer's keys copied by the concatenation and, with experts, the expert weights gathered per token).
// Pipelines: `stages` holds the per-stage peaks of the 1F1B-aware split (pipeline_split.h) and total_bytes
// the busiest stage. Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
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
  std::uint64_t ddp_buckets_bytes = 0;      // DDP's gradient buckets (data_ranks > 1, no sharding)
  std::uint64_t gathered_params_bytes = 0;  // zero3 / fsdp: unsharded parameters in flight
  // Saved for backward, logits excluded: the sum of the four kinds below.
  std::uint64_t activations_bytes = 0;
  std::uint64_t attention_bytes = 0;
  std::uint64_t mlp_bytes = 0;
  std::uint64_t norms_bytes = 0;
  std::uint64_t other_activations_bytes = 0;  // embedding output, checkpointed block inputs, autocast copies
  std::uint64_t kv_cache_bytes = 0;           // inference and generate
  std::uint64_t logits_bytes = 0;             // training: saved logits and loss; inference: output logits
  std::uint64_t transient_bytes = 0;          // short-lived buffers at the peak phase
  // Checkpointing: gradients already accumulated when the backward peaks (at its first block), beyond the
  // checkpoints released by then; 0 when another phase peaks.
  std::uint64_t backward_gradients_bytes = 0;
  std::uint64_t inputs_bytes = 0;
  std::uint64_t workspace_bytes = 0;
  // The caching allocator: 512-byte rounding of every live tensor, and the 2 MiB segments of weights of
  // 10 MiB or more (allocator_rounding.h).
  std::uint64_t rounding_bytes = 0;
};

// Bytes a placement puts on the device hosting a unit: its weights and optimizer state plus the larger of
// (gradients + optimizer temporaries) and the activations it saves (the head also carries logits and loss).
// Summing units bounds the peak from above: each unit's phases are taken at their own maximum. The parts
// are kept for pipeline splits, where activations multiply by the micro-batches in flight.
struct UnitMemory {
  std::string name;
  std::int64_t params = 0;
  std::uint64_t bytes = 0;
  std::optional<std::size_t> tied_to;
  std::uint64_t states_bytes = 0;       // weights + gradients + optimizer state
  std::uint64_t temporaries_bytes = 0;  // optimizer temporaries
  std::uint64_t activation_bytes = 0;   // saved per (micro-)batch, logits and the head's backward included
};

// One pipeline stage: units [first_unit, last_unit], micro-batches in flight, its peak with them and with
// model states only (what a weights-only split balances).
struct StagePeak {
  std::size_t first_unit = 0;
  std::size_t last_unit = 0;
  std::int64_t in_flight = 1;
  std::uint64_t bytes = 0;
  std::uint64_t states_only_bytes = 0;
};

struct MemoryEstimate {
  std::int64_t params = 0;
  OutputHead head = OutputHead::kDefault;  // the head assumed (never kDefault once estimated)
  std::uint64_t total_bytes = 0;           // the peak
  std::string peak_phase;  // "forward/backward", "optimizer step", "forward", "prefill", "decode", "weights"
  std::uint64_t forward_backward_bytes = 0;
  std::uint64_t optimizer_step_bytes = 0;
  MemoryBreakdown breakdown;
  std::vector<UnitMemory> units;
  // Extra bytes on every device that runs part of the model (workspace, recomputed block, transients).
  std::uint64_t per_device_overhead_bytes = 0;
  std::vector<StagePeak> stages;               // pipeline_stages > 1: the 1F1B-aware split
  std::vector<StagePeak> weights_only_stages;  // the split balancing model states alone, for comparison
  std::vector<std::string> assumptions;        // what the figures assume, for --explain
};

// REQUIRES: spec came from PresetSpec or ParseModelSpec. INVALID_ARGUMENT naming the field when the options
// do not fit the model: batch or seq below 1 in training, seq above the learned positions (gpt2, bert),
// a head the family does not have, new_tokens outside generate, bad parallelism (parallelism.h); and when
// the peak, the sum of the units or the per-device overhead would pass kMaxModelBytes (2^53 bytes,
// limits.h), naming the batch and sequence that make it so.
Result<MemoryEstimate> EstimateMemory(const ModelSpec& spec, const TrainingOptions& options);

}  // namespace memcoord::planner
