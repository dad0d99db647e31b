// Inference estimates of transformers: one no-grad forward (inference) and model.generate (generate).
#include <algorithm>

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
  double f = 0;  // feed-forward width times the experts each token visits
  double v = 0;
  double layers = 0;
  double kv = 0;  // key/value width on this rank
  bool lm = false;
};

InferenceDims DimsOf(const ModelSpec& s, const TrainingOptions& o, OutputHead head) {
  const double tp = static_cast<double>(o.parallel.tensor_ranks);
  InferenceDims d;
  d.z = DtypesFor(o.precision);
  d.b = static_cast<double>(o.batch);
  d.prompt = static_cast<double>(o.seq);
  d.h = static_cast<double>(s.hidden);
  d.f = static_cast<double>(s.ffn) * static_cast<double>(s.experts_per_token) / tp;
  d.v = static_cast<double>(s.vocab) / tp;
  d.layers = static_cast<double>(s.layers);
  d.kv = KvWidth(s) / tp;
  d.lm = head == OutputHead::kCausalLm;  // only causal LMs return a KV cache
  return d;
}

// Bytes of one block's feed-forward intermediates for `tokens` tokens (the largest transient of a forward).
double FeedForwardTransient(const InferenceDims& d, double tokens) {
  return tokens * (3 * d.f + 2 * d.h) * d.z.d;
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

void Finish(MemoryEstimate& e, const std::vector<ModelUnit>& units, const InferenceDims& d,
            double transient) {
  MemoryBreakdown& m = e.breakdown;
  m.transient_bytes = Bytes(transient);
  m.workspace_bytes = cal::kWorkspaceBytes;
  m.rounding_bytes = Bytes(RoundingBytes(static_cast<double>(units.size()) * 16));
  e.forward_backward_bytes = m.parameters_bytes + m.kv_cache_bytes + m.logits_bytes + m.transient_bytes +
                             m.inputs_bytes + m.workspace_bytes + m.rounding_bytes;
  e.total_bytes = e.forward_backward_bytes;
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (units[i].kind == UnitKind::kBlock)
      e.units[i].bytes += Bytes(static_cast<double>(m.kv_cache_bytes) / d.layers);
    if (units[i].kind == UnitKind::kHead) e.units[i].bytes += m.logits_bytes;
    e.units[i].activation_bytes = e.units[i].bytes - e.units[i].states_bytes;
  }
  e.per_device_overhead_bytes = Bytes(cal::kWorkspaceBytes + transient);
}

// One forward with use_cache: the KV cache it returns, its logits and the feed-forward transient.
void OneForward(MemoryEstimate& e, const InferenceDims& d) {
  const double t = d.b * d.prompt;
  const double kv_cache = d.lm ? 2 * d.layers * t * d.kv * d.z.d : 0;
  const double logits = d.lm ? t * d.v * d.z.d : t * d.h * d.z.d;
  e.breakdown.kv_cache_bytes = Bytes(kv_cache);
  e.breakdown.logits_bytes = Bytes(logits);
  e.breakdown.inputs_bytes = Bytes(t * 8);
  e.peak_phase = "forward";
}

// model.generate: the prefill (prompt cache, one forward's transients, last-token logits) against the last
// decoding step (full cache, one layer's cache copied by the concatenation, the step's logits in fp32).
double Generate(MemoryEstimate& e, const InferenceDims& d, double new_tokens) {
  const double per_token_cache = 2 * d.layers * d.kv * d.z.d;
  const double total = d.b * (d.prompt + new_tokens);
  const double cache = per_token_cache * total;
  const double logits = d.b * d.v * (d.z.d + cal::kGenerateLogitsFp32Copies * 4);
  // Both generate rows of the fit set peak at the full cache plus one prompt forward's feed-forward
  // transient (not the prompt's cache alone): the transient is counted on top of the whole cache.
  const double prefill = cal::kGeneratePrefillTransient * FeedForwardTransient(d, d.b * d.prompt);
  const double decode = per_token_cache / d.layers * total;
  e.breakdown.kv_cache_bytes = Bytes(cache);
  e.breakdown.logits_bytes = Bytes(logits);
  e.breakdown.inputs_bytes = Bytes(total * 8 * 2);
  e.peak_phase = prefill > decode ? "prefill" : "decode";
  return std::max(prefill, decode);
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
  if (o.mode == RunMode::kGenerate && d.lm) {
    transient = Generate(e, d, static_cast<double>(o.new_tokens));
  } else {
    OneForward(e, d);
    const double t = d.b * d.prompt;
    transient =
        std::max(t * d.h * d.z.d, FeedForwardTransient(d, t) - static_cast<double>(e.breakdown.logits_bytes));
  }
  Finish(e, units, d, transient);
  return e;
}

}  // namespace memcoord::planner::internal
