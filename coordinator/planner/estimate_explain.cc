#include "coordinator/planner/estimate_explain.h"

#include "common/bytes.h"
#include "coordinator/planner/estimator_coefficients.h"
#include "coordinator/planner/model_states.h"
#include "coordinator/planner/transformer_activations.h"

namespace memcoord::planner {
namespace {

std::string Pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string Row(const std::string& name, std::uint64_t bytes, const std::string& note) {
  return "  " + Pad(name, 30) + Pad(FormatBytes(bytes), 12) + note + "\n";
}

std::vector<std::string> ParallelAssumptions(const TrainingOptions& o) {
  std::vector<std::string> out;
  const Parallelism& p = o.parallel;
  if (p.data_ranks > 1 && p.sharding == Sharding::kNone) {
    out.push_back("DDP over " + std::to_string(p.data_ranks) +
                  " ranks: gradient buckets (gradient_as_bucket_view=False) are a second copy of the "
                  "gradients, resident from wrapping on");
  }
  if (p.sharding == Sharding::kZero1 || p.sharding == Sharding::kZero2 || p.sharding == Sharding::kZero3) {
    out.push_back(std::string(ShardingName(p.sharding)) + " over " + std::to_string(p.data_ranks) +
                  " ranks, DeepSpeed's layout: 16-bit weights and gradients, K = " +
                  std::to_string(static_cast<int>(ZeroOptimizerBytesPerParam(o.precision, o.optimizer))) +
                  " bytes of fp32 master weights and optimizer state per parameter (fp32: 4-byte weights "
                  "and gradients, no master copy); zero3 gathers the current and the prefetched block");
  }
  if (p.sharding == Sharding::kFsdp) {
    out.push_back("FSDP FULL_SHARD over " + std::to_string(p.data_ranks) +
                  " ranks, one FSDP unit per block: PyTorch's layout sharded, plus the current and the "
                  "prefetched block unsharded and one block's unsharded gradients");
  }
  if (p.tensor_ranks > 1) {
    out.push_back("tensor parallel over " + std::to_string(p.tensor_ranks) +
                  " ranks (Megatron-style, no sequence parallelism): block matmuls, attention and MLP "
                  "activations and the vocabulary split; norms and the residual stream whole on every rank; "
                  "not measured");
  }
  if (p.pipelined()) {
    out.push_back("1F1B pipeline of " + std::to_string(p.pipeline_stages) + " stages, " +
                  std::to_string(p.micro_batches) +
                  " micro-batches of `batch` each: stage i holds activations of min(S - i, M) micro-batches "
                  "and its gradients accumulate across them; the split balances that (pipeline_split.h)");
  }
  return out;
}

}  // namespace

std::vector<std::string> EstimateAssumptions(const ModelSpec& spec, const TrainingOptions& o,
                                             const MemoryEstimate& e) {
  std::vector<std::string> out;
  out.push_back("head: " + std::string(OutputHeadName(e.head)) +
                (o.head == OutputHead::kDefault ? " (the family's pretraining head, by default)" : ""));
  if (o.mode == RunMode::kTraining) {
    out.push_back(
        "the usual loop: loss = model(**batch).loss; loss.backward(); opt.step(); "
        "opt.zero_grad(set_to_none=True); no model output is kept across backward");
  } else if (o.mode == RunMode::kGenerate) {
    out.push_back("model.generate, greedy, default dynamic KV cache: " + std::to_string(o.seq) +
                  " prompt tokens + " + std::to_string(o.new_tokens) + " new tokens per sequence");
    out.push_back(
        "generate peaks at the larger of the prefill (the prompt's cache + one block's forward transient "
        "over the prompt) and the last decoding step (the full cache + one layer's keys copied by the "
        "concatenation" +
        std::string(spec.family == ModelFamily::kMixtral
                        ? ", or the expert weights batched_mm gathers per (token, expert) pair, if larger)"
                        : ")") +
        "; this one: " + e.peak_phase);
  } else {
    out.push_back("one no-grad forward; a causal LM returns its KV cache (use_cache=True)");
  }
  if (spec.family != ModelFamily::kResNet50 && MathAttention(spec, o.precision) &&
      o.mode == RunMode::kTraining) {
    out.push_back(
        "attention: PyTorch SDPA's math kernel (fp32 grouped-query attention has no fused kernel): "
        "batch × heads × seq × seq fp32 scores, one saved per block, 2.25 live in a forward, 3 more in a "
        "backward");
  } else if (spec.family != ModelFamily::kResNet50) {
    out.push_back("attention: PyTorch SDPA (flash / memory-efficient, no seq × seq matrix kept)");
  }
  if (o.mode == RunMode::kTraining && spec.family != ModelFamily::kResNet50 &&
      (o.precision == Precision::kAmpBf16 || o.precision == Precision::kAmpFp16)) {
    const bool cache =
        (spec.family == ModelFamily::kLlama || spec.family == ModelFamily::kMixtral) && !o.checkpointing;
    out.push_back(std::string("autocast: until the loss is computed the output object holds the fp32 final "
                              "hidden state") +
                  (cache ? " and the forward's KV cache in fp32 (use_cache)" : ""));
  }
  if (o.checkpointing) {
    out.push_back(spec.family == ModelFamily::kResNet50
                      ? "checkpointing: each bottleneck block wrapped in torch.utils.checkpoint "
                        "(use_reentrant=False), the stem not"
                      : "checkpointing: Hugging Face gradient_checkpointing_enable(use_reentrant=False), "
                        "one checkpoint per block");
  }
  out.push_back(
      "activation sizes: analytic counts × scales fitted on H200 measurements (torch 2.11, "
      "transformers 5.17; calibration/README.md)");
  for (std::string& s : ParallelAssumptions(o)) out.push_back(std::move(s));
  return out;
}

std::string ExplainEstimate(const ModelSpec&, const TrainingOptions& o, const MemoryEstimate& e) {
  const MemoryBreakdown& b = e.breakdown;
  std::string out = "breakdown (one rank):\n";
  const bool training = o.mode == RunMode::kTraining;
  out += Row("weights", b.parameters_bytes, "every phase");
  if (training) {
    out += Row("gradients", b.gradients_bytes,
               e.stages.empty() ? "optimizer step" : "every phase (accumulated)");
    out += Row("optimizer state", b.optimizer_state_bytes, "every phase");
    out += Row("optimizer temporaries", b.optimizer_temporaries_bytes, "optimizer step");
    if (b.ddp_buckets_bytes > 0) out += Row("DDP gradient buckets", b.ddp_buckets_bytes, "every phase");
    if (b.gathered_params_bytes > 0)
      out += Row("gathered parameters", b.gathered_params_bytes, "forward/backward");
    out += Row("activations: attention", b.attention_bytes, "forward/backward");
    out += Row("activations: MLP", b.mlp_bytes, "forward/backward");
    out += Row("activations: norms", b.norms_bytes, "forward/backward");
    out += Row("activations: other", b.other_activations_bytes,
               "embedding output, checkpointed block inputs, autocast weight copies");
    out += Row("logits and loss", b.logits_bytes, "forward/backward (the fp32 log-softmax of the loss)");
  } else {
    out +=
        Row("KV cache", b.kv_cache_bytes, o.mode == RunMode::kGenerate ? "prompt + new tokens" : "returned");
    out += Row("logits", b.logits_bytes, o.mode == RunMode::kGenerate ? "one step, last token" : "output");
  }
  out += Row("transient", b.transient_bytes, "largest short-lived buffer at the peak phase");
  if (b.backward_gradients_bytes > 0) {
    out += Row("gradients so far", b.backward_gradients_bytes,
               "checkpointed backward at its first block: later units' gradients, less freed checkpoints");
  }
  out += Row("inputs", b.inputs_bytes, "token ids and labels (images)");
  out += Row("workspace", b.workspace_bytes, "cuBLAS + cuBLASLt workspaces");
  out += Row("allocator rounding", b.rounding_bytes,
             "512-byte blocks; weights of 10 MiB or more in 2 MiB segments (caching allocator)");
  out += "  peak " + FormatBytes(e.total_bytes) + " (" + e.peak_phase + ")";
  if (training && e.stages.empty()) {
    out += ": max(forward/backward " + FormatBytes(e.forward_backward_bytes) + ", optimizer step " +
           FormatBytes(e.optimizer_step_bytes) + "), not the sum of the rows";
  }
  out += "\nassumptions:\n";
  for (const std::string& a : e.assumptions) out += "  - " + a + "\n";
  return out;
}

}  // namespace memcoord::planner
