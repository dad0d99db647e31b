// Training estimates of transformers (gpt2, bert, llama, mixtral), whole or as pipeline stages.
#include <algorithm>
#include <memory>

#include "coordinator/planner/allocator_rounding.h"
#include "coordinator/planner/estimator_coefficients.h"
#include "coordinator/planner/estimator_parts.h"
#include "coordinator/planner/output_head.h"
#include "coordinator/planner/pipeline_split.h"
#include "coordinator/planner/transformer_activations.h"

namespace memcoord::planner::internal {
namespace {

namespace cal = calibration;

// Per-rank parameters of a unit: tensor parallelism splits block matmuls and the vocabulary-wide
// embedding and head; norms are replicated.
double RankParams(const ModelUnit& u, double tp) {
  const double params = static_cast<double>(u.params);
  switch (u.kind) {
    case UnitKind::kBlock:
      return static_cast<double>(u.matmul_params) / tp + params - static_cast<double>(u.matmul_params);
    case UnitKind::kEmbedding:
    case UnitKind::kHead:
      return params / tp;
    case UnitKind::kNorm:
      break;
  }
  return params;
}

// What one (micro-)batch of training puts on a rank, before model states.
struct Terms {
  Dtypes z;
  double t = 0;            // tokens per (micro-)batch
  BlockActivations block;  // one block, all tokens
  HeadActivations head;    // all tokens
  double checkpoint_input = 0;
  double block_backward = 0;
  double scores = 0;                  // one attention call's fp32 scores under math attention (else 0)
  double output_hidden = 0;           // autocast: the fp32 final hidden state the output object holds
  double output_cache_per_block = 0;  // autocast, llama/mixtral: the output's fp32 KV cache, one block
  double recompute = 0;  // checkpointing: one block's activations, its gradients and backward transient
  double autocast_cache = 0;
  double inputs = 0;
  double largest_block = 0;          // parameters per rank
  double embedding_params = 0;       // per rank
  std::vector<double> weight_slack;  // per unit: the caching allocator's slack on its weights (unsharded)
};

Terms TermsOf(const ModelSpec& s, const std::vector<ModelUnit>& units, const TrainingOptions& o,
              OutputHead head) {
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  Terms c;
  c.z = DtypesFor(o.precision);
  c.t = static_cast<double>(o.batch) * static_cast<double>(o.seq);
  const BlockActivations per_token = BlockBytesPerToken(s, o.precision, tp);
  c.block = {per_token.attention * c.t, per_token.mlp * c.t, per_token.norms * c.t};
  // Math attention (transformer_activations.h) saves the softmax of the scores and the keys and values
  // repeated to every head.
  c.scores =
      AttentionScoresBytes(s, o.precision, static_cast<double>(o.batch), static_cast<double>(o.seq), tp);
  if (c.scores > 0) c.block.attention += c.scores + 2 * c.t * static_cast<double>(s.hidden) / tp * c.z.d;
  const HeadActivations h = HeadBytesPerToken(s, head, o.precision, tp);
  c.head = {h.io * c.t, h.saved * c.t, h.forward_transient * c.t, h.backward_transient * c.t};
  const double residual = (c.z.amp || c.z.d == 4) ? 4 : 2;
  c.checkpoint_input = c.t * static_cast<double>(s.hidden) * residual;
  c.block_backward = c.t * BlockBackwardTransientPerToken(s, o.precision, tp);
  double layer_matmul = 0;
  for (const ModelUnit& u : units) {
    if (u.kind == UnitKind::kEmbedding) c.embedding_params += RankParams(u, tp);
    if (u.kind != UnitKind::kBlock) continue;
    c.largest_block = std::max(c.largest_block, RankParams(u, tp));
    layer_matmul += static_cast<double>(u.matmul_params) / tp;
  }
  // A checkpointed block's backward: its recomputed activations (its input is the checkpoint, counted
  // already), its gradients, and the larger of two moments: the feed-forward's backward with everything
  // saved, or the attention's backward after the MLP's tensors were freed (math attention: the score-sized
  // gradients).
  // (The feed-forward's backward transient, fitted on blocks' backward, includes the block's gradients.)
  c.recompute = std::max(c.block.total() + c.block_backward,
                         c.block.attention + cal::kMathScoresBackward * c.scores + c.largest_block * c.z.wb) -
                c.checkpoint_input;
  // Under autocast the output object holds tensors that the saved ones do not share until the loss is
  // computed: the fp32 final hidden state (the head saved its 16-bit cast) and, for llama and mixtral
  // without checkpointing (use_cache), the KV cache of the forward, which holds fp32 K and V (the rotary
  // embedding turns K into fp32 and the cache promotes V with it) while SDPA saved 16-bit casts.
  if (c.z.amp) {
    c.output_hidden = 4 * c.t * static_cast<double>(s.hidden);
    const bool cache =
        (s.family == ModelFamily::kLlama || s.family == ModelFamily::kMixtral) && !o.checkpointing;
    c.output_cache_per_block = cache ? 8 * c.t * KvWidth(s) / tp : 0;
  }
  c.autocast_cache = c.z.amp && o.checkpointing ? 2 * layer_matmul : 0;
  c.inputs = c.t * 8 * 2;  // token ids and labels (int64)
  // Sharded weights live in flat buffers of another layout: the slack is modelled for whole tensors only.
  for (const ModelUnit& u : units) {
    c.weight_slack.push_back(o.parallel.sharding == Sharding::kNone ? WeightSlackBytes(s, u, head, c.z.wb, tp)
                                                                    : 0);
  }
  return c;
}

// Bytes unit `u` saves for backward per (micro-)batch; the head also carries its backward transient, the
// embedding the inputs, so that a stage's sum covers them.
double UnitActivation(const ModelUnit& u, const Terms& c, const TrainingOptions& o, bool with_transient) {
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  const double copies = c.z.amp ? 2.0 * static_cast<double>(u.matmul_params) / tp : 0.0;
  switch (u.kind) {
    case UnitKind::kEmbedding:
      return c.head.io + c.inputs;
    case UnitKind::kBlock:
      return o.checkpointing ? c.checkpoint_input : c.block.total() + copies;
    case UnitKind::kHead:
      return c.head.saved + copies + (with_transient ? c.head.backward_transient : 0);
    case UnitKind::kNorm:
      break;
  }
  return 0;
}

// Units [first, last] on one rank holding `in_flight` micro-batches.
struct StageBytes {
  ModelStates states;
  double activations = 0;
  double transient = 0;
  double backward_gradients = 0;  // checkpointing: gradients accumulated when the backward peaks
  double forward_backward = 0;
  double optimizer_step = 0;
};

// What a stage's peak depends on from its units: per-rank parameters, saved activations per micro-batch,
// whether it holds the head, and how many units it has.
struct StageUnits {
  double params = 0;
  double weight_slack = 0;
  double activations = 0;
  bool has_head = false;
  bool has_embedding = false;
  std::size_t blocks = 0;
  std::size_t count = 0;
};

StageUnits SumUnits(const std::vector<ModelUnit>& units, std::size_t first, std::size_t last, const Terms& c,
                    const TrainingOptions& o) {
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  StageUnits sum;
  for (std::size_t i = first; i <= last; ++i) {
    sum.params += RankParams(units[i], tp);
    sum.weight_slack += c.weight_slack[i];
    sum.activations += UnitActivation(units[i], c, o, false);
    sum.has_head = sum.has_head || units[i].kind == UnitKind::kHead;
    sum.has_embedding = sum.has_embedding || units[i].kind == UnitKind::kEmbedding;
    sum.blocks += units[i].kind == UnitKind::kBlock ? 1 : 0;
  }
  sum.count = last - first + 1;
  return sum;
}

// With checkpointing, the gradients already accumulated when a block's recompute and backward peak, beyond
// the checkpoints the stage released by then. The backward's two ends: the stage's last block (every
// checkpoint still held, only later units' gradients so far) and its first block (one checkpoint left, the
// gradients of every unit but that block and the embedding, which come after it). Gradients grow by a
// block's parameters per block while the checkpoints shrink by one block's input, so the larger end is the
// peak and the difference is what it adds. Under a pipeline the gradients are counted whole already.
double GradientsAtCheckpointedBackward(const StageUnits& u, const ModelStates& m, const Terms& c,
                                       const TrainingOptions& o) {
  if (o.parallel.pipelined() || u.blocks == 0 || u.params <= 0) return 0;
  const double later = u.params - c.largest_block - (u.has_embedding ? c.embedding_params : 0);
  const double gradients = m.gradients * std::max(0.0, later) / u.params;
  const double checkpoints_freed = static_cast<double>(u.blocks - 1) * c.checkpoint_input;
  return std::max(0.0, gradients - checkpoints_freed);
}

// Units on one rank holding `in_flight` micro-batches.
StageBytes StageOf(const StageUnits& u, std::int64_t in_flight, const Terms& c, const TrainingOptions& o) {
  StageBytes b;
  b.activations = u.activations * static_cast<double>(in_flight);
  b.states = ModelStatesPerRank(u.params, c.largest_block, o.precision, o.optimizer, o.parallel, true);
  const double head_saved = u.has_head ? c.head.saved : 0;
  // Forward: the loss over the vocabulary with what the output object holds, or (math attention) the scores
  // of a block's attention before the head saved anything.
  const double held = c.output_hidden + static_cast<double>(u.blocks) * c.output_cache_per_block;
  const double forward = std::max(u.has_head ? c.head.forward_transient + held : 0,
                                  cal::kMathScoresForward * c.scores - head_saved) +
                         c.autocast_cache;
  // Backward: the head's, or a block's (its feed-forward pair; math attention: the score-sized gradients
  // once the block's MLP tensors are freed).
  const double backward = std::max(u.has_head ? c.head.backward_transient : c.block_backward,
                                   cal::kMathScoresBackward * c.scores - c.block.mlp);
  const double recompute = o.checkpointing ? c.recompute - head_saved : 0;
  const double gradients = o.checkpointing ? GradientsAtCheckpointedBackward(u, b.states, c, o) : 0;
  if (o.checkpointing && recompute + gradients > std::max(forward, backward)) {
    b.transient = recompute;
    b.backward_gradients = gradients;
  } else {
    b.transient = std::max(forward, backward);
  }
  const ModelStates& m = b.states;
  const double fixed = m.weights + u.weight_slack + m.optimizer_state + m.ddp_buckets + cal::kWorkspaceBytes +
                       RoundingBytes(static_cast<double>(u.count) * 40);
  const double accumulated = o.parallel.pipelined() ? m.gradients : 0;
  b.forward_backward = fixed + accumulated + m.gathered + b.activations + b.transient + b.backward_gradients;
  b.optimizer_step = fixed + m.gradients + m.optimizer_temporaries;
  return b;
}

void FillBreakdown(MemoryEstimate& e, const StageBytes& b, const Terms& c, const TrainingOptions& o,
                   double layers) {
  MemoryBreakdown& m = e.breakdown;
  m.parameters_bytes = Bytes(b.states.weights);
  m.gradients_bytes = Bytes(b.states.gradients);
  m.optimizer_state_bytes = Bytes(b.states.optimizer_state);
  m.optimizer_temporaries_bytes = Bytes(b.states.optimizer_temporaries);
  m.ddp_buckets_bytes = Bytes(b.states.ddp_buckets);
  m.gathered_params_bytes = Bytes(b.states.gathered);
  const double blocks = o.checkpointing ? 0 : layers;
  m.attention_bytes = Bytes(blocks * c.block.attention);
  m.mlp_bytes = Bytes(blocks * c.block.mlp);
  m.norms_bytes = Bytes(blocks * c.block.norms);
  const double logits = c.head.saved;
  const double other = b.activations - c.inputs - logits - blocks * c.block.total();
  m.other_activations_bytes = Bytes(other);
  m.activations_bytes = m.attention_bytes + m.mlp_bytes + m.norms_bytes + m.other_activations_bytes;
  m.logits_bytes = Bytes(logits);
  m.transient_bytes = Bytes(b.transient);
  m.backward_gradients_bytes = Bytes(b.backward_gradients);
  m.inputs_bytes = Bytes(c.inputs);
  m.workspace_bytes = cal::kWorkspaceBytes;
  m.rounding_bytes =
      Bytes(b.forward_backward - b.states.weights - b.states.optimizer_state - b.states.ddp_buckets -
            cal::kWorkspaceBytes - b.states.gathered - b.activations - b.transient - b.backward_gradients -
            (o.parallel.pipelined() ? b.states.gradients : 0));
}

void FillUnits(MemoryEstimate& e, const std::vector<ModelUnit>& units, const Terms& c,
               const TrainingOptions& o) {
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  for (std::size_t i = 0; i < units.size(); ++i) {
    const ModelUnit& u = units[i];
    const ModelStates m =
        ModelStatesPerRank(RankParams(u, tp), 0, o.precision, o.optimizer, o.parallel, true);
    const double act = UnitActivation(u, c, o, true);
    const double weights = m.weights + c.weight_slack[i];
    UnitMemory out{u.name, u.params, 0, u.tied_to};
    out.states_bytes = Bytes(weights + m.gradients + m.optimizer_state);
    out.temporaries_bytes = Bytes(m.optimizer_temporaries);
    out.activation_bytes = Bytes(act);
    out.bytes = Bytes(weights + m.optimizer_state + std::max(act, m.gradients + m.optimizer_temporaries));
    e.units.push_back(std::move(out));
  }
}

// Prefix sums of SumUnits' terms, so that a stage's units sum in O(1): the pipeline split evaluates
// O(stages · log(units) · log(bytes)) ranges, and summing each range unit by unit made it quadratic in the
// units (100,000 layers over 8 stages took 12 s). Sums over [0, last] are the same additions as SumUnits';
// others may differ from it in the last bits. Each sum is non-decreasing as the range grows (non-negative
// terms), as SplitStages requires.
class UnitPrefixSums {
 public:
  UnitPrefixSums(const std::vector<ModelUnit>& units, const Terms& c, const TrainingOptions& o)
      : params_(units.size() + 1, 0),
        slack_(units.size() + 1, 0),
        activations_(units.size() + 1, 0),
        heads_(units.size() + 1, 0),
        embeddings_(units.size() + 1, 0),
        blocks_(units.size() + 1, 0) {
    const double tp = static_cast<double>(o.parallel.tensor_ranks);
    for (std::size_t i = 0; i < units.size(); ++i) {
      params_[i + 1] = params_[i] + RankParams(units[i], tp);
      slack_[i + 1] = slack_[i] + c.weight_slack[i];
      activations_[i + 1] = activations_[i] + UnitActivation(units[i], c, o, false);
      heads_[i + 1] = heads_[i] + (units[i].kind == UnitKind::kHead ? 1 : 0);
      embeddings_[i + 1] = embeddings_[i] + (units[i].kind == UnitKind::kEmbedding ? 1 : 0);
      blocks_[i + 1] = blocks_[i] + (units[i].kind == UnitKind::kBlock ? 1 : 0);
    }
  }
  StageUnits Sum(std::size_t first, std::size_t last) const {
    StageUnits sum;
    sum.params = params_[last + 1] - params_[first];
    sum.weight_slack = slack_[last + 1] - slack_[first];
    sum.activations = activations_[last + 1] - activations_[first];
    sum.has_head = heads_[last + 1] > heads_[first];
    sum.has_embedding = embeddings_[last + 1] > embeddings_[first];
    sum.blocks = blocks_[last + 1] - blocks_[first];
    sum.count = last - first + 1;
    return sum;
  }

 private:
  std::vector<double> params_;
  std::vector<double> slack_;
  std::vector<double> activations_;
  std::vector<std::size_t> heads_;
  std::vector<std::size_t> embeddings_;
  std::vector<std::size_t> blocks_;
};

// A stage's peak (states_only: weights, gradients and optimizer state alone, what a weights-only split
// balances). Copies what it needs, so the function outlives the estimate.
StageLoadFunction MakeStageLoad(const std::vector<ModelUnit>& units, const Terms& c, const TrainingOptions& o,
                                bool states_only) {
  auto sums = std::make_shared<const UnitPrefixSums>(units, c, o);
  return [sums, c, o, states_only](std::size_t first, std::size_t last, std::size_t stage) {
    if (states_only) {
      const StageBytes b = StageOf(sums->Sum(first, last), 0, c, o);
      return Bytes(b.states.weights + b.states.gradients + b.states.optimizer_state);
    }
    const StageBytes b =
        StageOf(sums->Sum(first, last), o.parallel.in_flight(static_cast<std::int64_t>(stage)), c, o);
    return Bytes(std::max(b.forward_backward, b.optimizer_step));
  };
}

}  // namespace

StageLoadFunction TransformerStageLoad(const ModelSpec& s, const TrainingOptions& o, bool states_only) {
  const std::vector<ModelUnit> units = BuildUnits(s, o.head);
  return MakeStageLoad(units, TermsOf(s, units, o, *ResolveHead(s.family, o.head)), o, states_only);
}

MemoryEstimate EstimateTransformerTraining(const ModelSpec& s, const std::vector<ModelUnit>& units,
                                           const TrainingOptions& o) {
  MemoryEstimate e;
  e.head = *ResolveHead(s.family, o.head);
  e.params = TotalParams(units);
  const Terms c = TermsOf(s, units, o, e.head);
  FillUnits(e, units, c, o);
  const StageBytes whole = StageOf(SumUnits(units, 0, units.size() - 1, c, o), 1, c, o);
  FillBreakdown(e, whole, c, o, static_cast<double>(s.layers));
  e.forward_backward_bytes = Bytes(whole.forward_backward);
  e.optimizer_step_bytes = Bytes(whole.optimizer_step);
  e.total_bytes = std::max(e.forward_backward_bytes, e.optimizer_step_bytes);
  e.peak_phase = e.forward_backward_bytes >= e.optimizer_step_bytes ? "forward/backward" : "optimizer step";
  e.per_device_overhead_bytes =
      Bytes(cal::kWorkspaceBytes + (o.checkpointing ? c.recompute : 0) + c.autocast_cache);
  if (!o.parallel.pipelined()) return e;
  const StageLoadFunction load = MakeStageLoad(units, c, o, false);
  const StageLoadFunction states_only = MakeStageLoad(units, c, o, true);
  PipelineComparison splits =
      ComparePipelineSplits(units.size(), static_cast<std::size_t>(o.parallel.pipeline_stages),
                            o.parallel.micro_batches, load, states_only);
  e.stages = std::move(splits.aware);
  e.weights_only_stages = std::move(splits.weights_only);
  e.total_bytes = 0;
  for (const StagePeak& p : e.stages) e.total_bytes = std::max(e.total_bytes, p.bytes);
  e.peak_phase = "busiest pipeline stage";
  return e;
}

}  // namespace memcoord::planner::internal
