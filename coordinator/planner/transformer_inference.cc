// Inference estimates of transformers: one no-grad forward (inference) and model.generate (generate).
#include <algorithm>

#include "coordinator/planner/allocator_rounding.h"
#include "coordinator/planner/estimator_coefficients.h"
#include "coordinator/planner/estimator_parts.h"
#include "coordinator/planner/output_head.h"
#include "coordinator/planner/transformer_activations.h"

namespace memcoord::planner::internal {
namespace {

namespace cal = calibration;

struct InferenceDims {
  Dtypes z;
  double b = 0;
  double prompt = 0;  // tokens per sequence in the forward (generate: the prompt)
  double h = 0;
  double v = 0;
  double layers = 0;
  double kv = 0;                   // key/value width on this rank
  double forward_per_token = 0;    // ForwardTransientPerToken
  double expert_pair_weights = 0;  // mixtral: one expert's weights (3 × ffn × hidden) on this rank, bytes
  double experts_per_token = 0;    // mixtral: experts each token visits (0: no experts)
  bool lm = false;
};

InferenceDims DimsOf(const ModelSpec& s, const TrainingOptions& o, OutputHead head) {
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  InferenceDims d;
  d.z = DtypesFor(o.precision);
  d.b = static_cast<double>(o.batch);
  d.prompt = static_cast<double>(o.seq);
  d.h = static_cast<double>(s.hidden);
  d.v = static_cast<double>(s.vocab) / tp;
  d.layers = static_cast<double>(s.layers);
  d.kv = KvWidth(s) / tp;
  d.lm = head == OutputHead::kCausalLm;  // only causal LMs return a KV cache
  d.forward_per_token = ForwardTransientPerToken(s, o.precision, tp);
  if (s.family == ModelFamily::kMixtral) {
    d.expert_pair_weights = 3 * static_cast<double>(s.ffn) / tp * d.h * d.z.d;
    d.experts_per_token = static_cast<double>(s.experts_per_token);
  }
  return d;
}

MemoryEstimate Start(const std::vector<ModelUnit>& units, const TrainingOptions& o, Dtypes z) {
  MemoryEstimate e;
  e.params = TotalParams(units);
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  for (const ModelUnit& u : units) {
    const double p = static_cast<double>(u.params) / (u.kind == UnitKind::kNorm ? 1 : tp);
    UnitMemory m{u.name, u.params, Bytes(p * z.wb), u.tied_to};
    m.states_bytes = m.bytes;
    e.units.push_back(std::move(m));
  }
  double weights = 0;
  for (const UnitMemory& u : e.units) weights += static_cast<double>(u.states_bytes);
  e.breakdown.parameters_bytes = Bytes(weights);
  return e;
}

// `unit_cache`: the KV cache the blocks' units carry (generate: the full cache even when the prefill peaks,
// so that the units and the per-device overhead bound both phases). `slack`: per unit, the caching
// allocator's slack on its weights (allocator_rounding.h), counted with the allocator's rounding.
void Finish(MemoryEstimate& e, const std::vector<ModelUnit>& units, const InferenceDims& d, double transient,
            double unit_cache, const std::vector<double>& slack) {
  MemoryBreakdown& m = e.breakdown;
  m.transient_bytes = Bytes(transient);
  m.workspace_bytes = cal::kWorkspaceBytes;
  double total_slack = 0;
  for (std::size_t i = 0; i < units.size(); ++i) {
    total_slack += slack[i];
    e.units[i].bytes += Bytes(slack[i]);
    e.units[i].states_bytes = e.units[i].bytes;
  }
  m.rounding_bytes = Bytes(RoundingBytes(static_cast<double>(units.size()) * 16) + total_slack);
  e.forward_backward_bytes = m.parameters_bytes + m.kv_cache_bytes + m.logits_bytes + m.transient_bytes +
                             m.inputs_bytes + m.workspace_bytes + m.rounding_bytes;
  e.total_bytes = e.forward_backward_bytes;
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (units[i].kind == UnitKind::kBlock) e.units[i].bytes += Bytes(unit_cache / d.layers);
    if (units[i].kind == UnitKind::kHead) e.units[i].bytes += m.logits_bytes;
    e.units[i].activation_bytes = e.units[i].bytes - e.units[i].states_bytes;
  }
  e.per_device_overhead_bytes = Bytes(cal::kWorkspaceBytes + transient);
}

// One forward with use_cache: the KV cache it returns, its logits and the block transient.
void OneForward(MemoryEstimate& e, const InferenceDims& d) {
  const double t = d.b * d.prompt;
  const double kv_cache = d.lm ? 2 * d.layers * t * d.kv * d.z.d : 0;
  const double logits = d.lm ? t * d.v * d.z.d : t * d.h * d.z.d;
  e.breakdown.kv_cache_bytes = Bytes(kv_cache);
  e.breakdown.logits_bytes = Bytes(logits);
  e.breakdown.inputs_bytes = Bytes(t * 8);
  e.peak_phase = "forward";
}

// model.generate (greedy, DynamicCache): the larger of two phases, both on top of the weights and one step's
// last-token logits (with their fp32 copies).
//   prefill: the prompt's forward; at its last block the cache holds the whole prompt, and that block's
//            forward transient (ForwardTransientPerToken × prompt tokens) is live on top of it.
//   decode:  the last step; the cache holds prompt + new tokens, and one of two transients is live: the
//            concatenation that grows one layer's keys (old and new copy coexist: one layer's K), or, with
//            experts, transformers' batched_mm dispatch (generate switches grouped_mm to batched_mm for
//            decoding), which gathers a copy of the visited expert's weights for each (token, expert) pair:
//            batch × experts_per_token × 3 × ffn × hidden.
// Returns the transient of the larger phase; the cache of that phase goes to the breakdown.
double Generate(MemoryEstimate& e, const InferenceDims& d, double new_tokens) {
  const double per_token_cache = 2 * d.layers * d.kv * d.z.d;
  const double total = d.b * (d.prompt + new_tokens);
  const double prompt_cache = per_token_cache * d.b * d.prompt;
  const double full_cache = per_token_cache * total;
  const double prefill_transient = d.forward_per_token * d.b * d.prompt;
  const double concat_copy = d.kv * d.z.d * total;
  const double expert_gather = d.b * d.experts_per_token * d.expert_pair_weights;
  const double decode_transient = std::max(concat_copy, expert_gather);
  const bool prefill = prompt_cache + prefill_transient > full_cache + decode_transient;
  e.breakdown.kv_cache_bytes = Bytes(prefill ? prompt_cache : full_cache);
  e.breakdown.logits_bytes = Bytes(d.b * d.v * (d.z.d + cal::kGenerateLogitsFp32Copies * 4));
  e.breakdown.inputs_bytes = Bytes(total * 8 * 2);
  e.peak_phase = prefill ? "prefill" : "decode";
  return prefill ? prefill_transient : decode_transient;
}

}  // namespace

MemoryEstimate EstimateTransformerInference(const ModelSpec& s, const std::vector<ModelUnit>& units,
                                            const TrainingOptions& o) {
  const OutputHead head = *ResolveHead(s.family, o.head);
  const InferenceDims d = DimsOf(s, o, head);
  MemoryEstimate e = Start(units, o, d.z);
  e.head = head;
  if (o.batch == 0 || (o.seq == 0 && o.new_tokens == 0)) {
    e.total_bytes = e.breakdown.parameters_bytes;
    e.forward_backward_bytes = e.total_bytes;
    e.peak_phase = "weights";
    return e;
  }
  double transient = 0;
  double unit_cache = 0;
  if (o.mode == RunMode::kGenerate && d.lm) {
    transient = Generate(e, d, static_cast<double>(o.new_tokens));
    unit_cache = 2 * d.layers * d.kv * d.z.d * d.b * (d.prompt + static_cast<double>(o.new_tokens));
  } else {
    OneForward(e, d);
    const double t = d.b * d.prompt;
    transient =
        std::max(t * d.h * d.z.d, d.forward_per_token * t - static_cast<double>(e.breakdown.logits_bytes));
  }
  if (unit_cache == 0) unit_cache = static_cast<double>(e.breakdown.kv_cache_bytes);
  std::vector<double> slack;
  for (const ModelUnit& u : units) {
    slack.push_back(WeightSlackBytes(s, u, head, d.z.wb, static_cast<double>(o.parallel.tensor_ranks)));
  }
  Finish(e, units, d, transient, unit_cache, slack);
  return e;
}

}  // namespace memcoord::planner::internal
