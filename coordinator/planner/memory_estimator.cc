#include "coordinator/planner/memory_estimator.h"

#include <algorithm>
#include <cmath>

#include "coordinator/planner/estimator_coefficients.h"
#include "coordinator/planner/limits.h"

namespace memcoord::planner {
namespace {

namespace cal = calibration;

struct Sizes {
  double d = 4;      // activation element bytes
  double wb = 4;     // weight (and gradient, optimizer state) element bytes
  bool amp = false;  // autocast: fp32 master weights, 16-bit matmuls
};

Sizes SizesFor(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return {4, 4, false};
    case Precision::kBf16:
      return {2, 2, false};
    case Precision::kAmpBf16:
    case Precision::kAmpFp16:
      return {2, 4, true};
  }
  return {};
}

double OptimizerStates(Optimizer o) {
  return o == Optimizer::kAdamW ? 2 : (o == Optimizer::kSgdMomentum ? 1 : 0);
}
double OptimizerTemporaries(Optimizer o) { return o == Optimizer::kAdamW ? 1 : 0; }

double Scale(ModelFamily f, Precision p) {
  const cal::ActivationScales& s = f == ModelFamily::kGpt2   ? cal::kGpt2Scales
                                   : f == ModelFamily::kBert ? cal::kBertScales
                                                             : cal::kLlamaScales;
  return p == Precision::kFp32 ? s.fp32 : (p == Precision::kBf16 ? s.bf16 : s.amp);
}

// Analytic bytes saved for backward per token by one block (before calibration), from the tensors each
// op keeps: layer inputs, q/k/v, attention output and its contiguous copy, dropout masks (1 byte),
// norm inputs/outputs and the feed-forward intermediates (GPT-2's tanh GELU keeps four, BERT's erf GELU
// one, LLaMA's SwiGLU gate/up/product). Under autocast the residual stream stays fp32.
double BlockCoefficient(const ModelSpec& s, Sizes z) {
  const double h = static_cast<double>(s.hidden);
  const double f = static_cast<double>(s.ffn) * static_cast<double>(s.experts_per_token);
  const double kv = h / static_cast<double>(s.heads) * static_cast<double>(s.kv_heads);
  const double amp_residual = z.amp ? 4 * h : 0;
  switch (s.family) {
    case ModelFamily::kGpt2:
      return (7 * z.d + 2) * h + 2 * z.d * kv + 5 * f * z.d + amp_residual;
    case ModelFamily::kBert:
      return (7 * z.d + 2) * h + 2 * z.d * kv + 2 * f * z.d + amp_residual;
    case ModelFamily::kLlama:
    case ModelFamily::kMixtral: {
      const double norms = (z.d == 4 ? 24 : 16) * h + amp_residual;
      const double router = s.family == ModelFamily::kMixtral ? 4.0 * static_cast<double>(s.experts) : 0;
      return norms + 3 * z.d * h + 2 * z.d * kv + 4 * z.d * f + router;
    }
    case ModelFamily::kResNet50:
      break;
  }
  return 0;
}

// Bytes of a double count. Counts past kMaxModelBytes (only from inputs EstimateMemory then rejects) stop
// just above it: llround past int64 has no defined result, and sums of a few clamped values stay in uint64.
std::uint64_t Bytes(double v) {
  if (!(v > 0)) return 0;
  if (v > static_cast<double>(kMaxModelBytes)) return kMaxModelBytes + 1;
  return static_cast<std::uint64_t>(std::llround(v));
}

// Every figure a plan sums stays within kMaxModelBytes (limits.h); past it the batch and sequence are to
// blame, since the parameters alone stay far below it.
Status CheckInRange(const MemoryEstimate& e, const ModelSpec& s, const TrainingOptions& o) {
  std::uint64_t units = 0;
  for (const UnitMemory& u : e.units) units = AddSaturated(units, u.bytes);
  if (e.total_bytes <= kMaxModelBytes && units <= kMaxModelBytes &&
      e.per_device_overhead_bytes <= kMaxModelBytes)
    return Status::Ok();
  const std::string tokens = s.family == ModelFamily::kResNet50
                                 ? "batch " + std::to_string(o.batch)
                                 : "batch " + std::to_string(o.batch) + " × seq " + std::to_string(o.seq);
  return InvalidArgument(
      tokens + ": the estimated peak exceeds what the planner handles for one model; accepted: at most " +
      std::to_string(kMaxModelBytes) + " bytes (2^53, 8 PiB)");
}

Status Validate(const ModelSpec& s, const TrainingOptions& o) {
  const bool training = o.mode == RunMode::kTraining;
  const std::int64_t min_size = training ? 1 : 0;
  if (o.batch < min_size || o.batch > (std::int64_t{1} << 24)) {
    return InvalidArgument("batch must be between " + std::to_string(min_size) + " and 16777216" +
                           (training ? " in training" : " (0: weights only)") + ", got " +
                           std::to_string(o.batch));
  }
  if (s.family == ModelFamily::kResNet50) {
    if (o.checkpointing) {
      return InvalidArgument(
          "checkpointing \"full\" is not modelled for resnet50 (torchvision has no per-block "
          "checkpointing); accepted: none");
    }
    return Status::Ok();
  }
  if (o.seq < min_size || o.seq > (std::int64_t{1} << 24)) {
    return InvalidArgument("seq must be between " + std::to_string(min_size) + " and 16777216, got " +
                           std::to_string(o.seq));
  }
  if (s.max_positions > 0 && o.seq > s.max_positions) {
    return InvalidArgument("seq " + std::to_string(o.seq) + " exceeds the " + s.name + " position table (" +
                           std::to_string(s.max_positions) + " positions); accepted: 1.." +
                           std::to_string(s.max_positions));
  }
  return Status::Ok();
}

// Fills the parts every mode shares and the per-unit weight bytes.
MemoryEstimate Start(const std::vector<ModelUnit>& units, Sizes z, double unit_factor) {
  MemoryEstimate e;
  e.params = TotalParams(units);
  for (const ModelUnit& u : units) {
    e.units.push_back(
        {u.name, u.params, Bytes(static_cast<double>(u.params) * z.wb * unit_factor), u.tied_to});
  }
  e.breakdown.parameters_bytes = Bytes(static_cast<double>(e.params) * z.wb);
  return e;
}

MemoryEstimate EstimateResNet(const std::vector<ModelUnit>& units, const TrainingOptions& o, Sizes z) {
  const double b = static_cast<double>(o.batch);
  const double p = static_cast<double>(TotalParams(units));
  const double input = b * 3 * 224 * 224 * (o.precision == Precision::kBf16 ? 2 : 4);
  if (o.mode == RunMode::kInference) {
    MemoryEstimate e = Start(units, z, 1);
    const double live = b * cal::kResNetInferenceFp32 * z.d / 4;
    e.breakdown.transient_bytes = Bytes(live);
    e.breakdown.inputs_bytes = Bytes(input);
    e.breakdown.workspace_bytes = o.batch > 0 ? cal::kWorkspaceBytes : 0;
    e.forward_backward_bytes =
        e.breakdown.parameters_bytes + Bytes(live + input) + e.breakdown.workspace_bytes;
    e.total_bytes = e.forward_backward_bytes;
    e.peak_phase = o.batch > 0 ? "forward" : "weights";
    for (std::size_t i = 0; i < e.units.size(); ++i)
      e.units[i].bytes += Bytes(live * cal::kResNetActivationShare[i]);
    e.units[0].bytes += Bytes(input);
    e.per_device_overhead_bytes = e.breakdown.workspace_bytes;
    return e;
  }
  const double states = OptimizerStates(o.optimizer);
  const double temps = OptimizerTemporaries(o.optimizer);
  MemoryEstimate e = Start(units, z, 1 + states);
  const double per_image = o.precision == Precision::kFp32   ? cal::kResNetActivationFp32
                           : o.precision == Precision::kBf16 ? cal::kResNetActivationBf16
                                                             : cal::kResNetActivationAmp;
  const double saved = b * per_image + (z.amp ? 2 * p : 0);
  const double backward = cal::kResNetBackwardTransient * saved;
  MemoryBreakdown& m = e.breakdown;
  m.gradients_bytes = Bytes(p * z.wb);
  m.optimizer_state_bytes = Bytes(p * z.wb * states);
  m.optimizer_temporaries_bytes = Bytes(p * z.wb * temps);
  m.activations_bytes = Bytes(saved);
  m.transient_bytes = Bytes(backward);
  m.inputs_bytes = Bytes(input);
  m.workspace_bytes = cal::kWorkspaceBytes;
  const std::uint64_t fixed =
      m.parameters_bytes + m.optimizer_state_bytes + m.inputs_bytes + m.workspace_bytes;
  e.forward_backward_bytes = fixed + m.activations_bytes + m.transient_bytes;
  e.optimizer_step_bytes = fixed + m.gradients_bytes + m.optimizer_temporaries_bytes;
  e.total_bytes = std::max(e.forward_backward_bytes, e.optimizer_step_bytes);
  e.peak_phase = e.forward_backward_bytes >= e.optimizer_step_bytes ? "forward/backward" : "optimizer step";
  for (std::size_t i = 0; i < e.units.size(); ++i) {
    const double act = b * per_image * cal::kResNetActivationShare[i] +
                       (z.amp ? 2.0 * static_cast<double>(units[i].params) : 0.0);
    e.units[i].bytes += Bytes(std::max(act, static_cast<double>(units[i].params) * z.wb * (1 + temps)));
  }
  e.units[0].bytes += Bytes(input);
  e.per_device_overhead_bytes = Bytes(cal::kWorkspaceBytes + backward);
  return e;
}

// A transformer's dimensions as the formulas use them.
struct TransformerDims {
  double t = 0;  // tokens per step: batch × seq
  double h = 0;
  double f = 0;  // feed-forward width times the experts each token visits
  double v = 0;
  double layers = 0;
  double kv = 0;    // key/value width
  bool lm = false;  // causal LM head with a vocabulary-wide loss (not bert)
  double p = 0;     // parameters
};

TransformerDims DimsOf(const ModelSpec& s, const std::vector<ModelUnit>& units, const TrainingOptions& o) {
  TransformerDims d;
  d.t = static_cast<double>(o.batch) * static_cast<double>(o.seq);
  d.h = static_cast<double>(s.hidden);
  d.f = static_cast<double>(s.ffn) * static_cast<double>(s.experts_per_token);
  d.v = static_cast<double>(s.vocab);
  d.layers = static_cast<double>(s.layers);
  d.kv = d.h / static_cast<double>(s.heads) * static_cast<double>(s.kv_heads);
  d.lm = s.family != ModelFamily::kBert;
  d.p = static_cast<double>(TotalParams(units));
  return d;
}

// One forward with use_cache: weights, the KV cache it returns, its logits and the feed-forward transient.
MemoryEstimate EstimateTransformerInference(const TransformerDims& d, const std::vector<ModelUnit>& units,
                                            Sizes z) {
  MemoryEstimate e = Start(units, z, 1);
  if (d.t == 0) {
    e.total_bytes = e.breakdown.parameters_bytes;
    e.forward_backward_bytes = e.total_bytes;
    e.peak_phase = "weights";
    return e;
  }
  const double kv_cache = d.lm ? 2 * d.layers * d.t * d.kv * z.d : 0;  // returned by the forward (use_cache)
  const double logits = d.lm ? d.t * d.v * z.d : d.t * d.h * z.d;
  const double transient = std::max(d.t * d.h * z.d, d.t * (3 * d.f + 2 * d.h) * z.d - logits);
  MemoryBreakdown& m = e.breakdown;
  m.activations_bytes = Bytes(kv_cache);
  m.logits_bytes = Bytes(logits);
  m.transient_bytes = Bytes(transient);
  m.inputs_bytes = Bytes(d.t * 8);
  m.workspace_bytes = cal::kWorkspaceBytes;
  e.forward_backward_bytes = m.parameters_bytes + m.activations_bytes + m.logits_bytes + m.transient_bytes +
                             m.inputs_bytes + m.workspace_bytes;
  e.total_bytes = e.forward_backward_bytes;
  e.peak_phase = "forward";
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (units[i].kind == UnitKind::kBlock) e.units[i].bytes += Bytes(kv_cache / d.layers);
    if (units[i].kind == UnitKind::kHead) e.units[i].bytes += Bytes(logits);
  }
  e.per_device_overhead_bytes = Bytes(cal::kWorkspaceBytes + transient);
  return e;
}

// The byte counts (before rounding) a training step's phases are made of.
struct TrainingTerms {
  double states = 0;  // optimizer state per parameter, in weights
  double temps = 0;   // optimizer temporaries per parameter, in weights
  double layer_matmul = 0;
  double outside_matmul = 0;
  double block = 0;  // one block's saved activations
  double io = 0;     // embedding dropout mask and output, final norm in/out
  double inputs = 0;
  double logits_saved = 0;
  double forward_transient = 0;
  double backward_transient = 0;
  double amp_copies = 0;
  double residual = 0;  // bytes per element of the residual stream
  double blocks_saved = 0;
};

TrainingTerms TrainingTermsOf(const ModelSpec& s, const std::vector<ModelUnit>& units,
                              const TrainingOptions& o, Sizes z, const TransformerDims& d) {
  TrainingTerms c;
  c.states = OptimizerStates(o.optimizer);
  c.temps = OptimizerTemporaries(o.optimizer);
  for (const ModelUnit& u : units) {
    (u.kind == UnitKind::kBlock ? c.layer_matmul : c.outside_matmul) += static_cast<double>(u.matmul_params);
  }
  c.block = d.t * BlockCoefficient(s, z) * Scale(s.family, o.precision);
  c.io = (2 * z.d + 1) * d.h * d.t;
  c.inputs = d.t * 8 * 2;                             // token ids and labels (int64)
  c.logits_saved = d.lm ? d.t * d.v * (z.d + 4) : 0;  // logits, and the fp32 log-softmax of the loss
  c.forward_transient = (d.lm && z.d == 2 ? d.t * d.v * 4 : 0) +              // logits upcast to fp32
                        (z.amp && o.checkpointing ? 2 * c.layer_matmul : 0);  // autocast cache
  c.backward_transient = d.lm ? 2 * d.t * d.v * 4  // gradients of the loss and of the log-softmax
                              : d.t * d.f * z.d * cal::kBlockBackwardTransient;
  c.amp_copies = z.amp ? 2 * (o.checkpointing ? c.outside_matmul : c.layer_matmul + c.outside_matmul) : 0;
  c.residual = (z.amp || z.d == 4) ? 4 : 2;
  c.blocks_saved = o.checkpointing ? d.layers * d.t * d.h * c.residual : d.layers * c.block;
  return c;
}

// The breakdown and the two phases: forward/backward (with checkpointing, possibly the recompute of one
// block during backward) and the optimizer step.
void SetTrainingPeak(MemoryEstimate& e, const TrainingOptions& o, Sizes z, const TransformerDims& d,
                     const TrainingTerms& c) {
  MemoryBreakdown& m = e.breakdown;
  m.gradients_bytes = Bytes(d.p * z.wb);
  m.optimizer_state_bytes = Bytes(d.p * z.wb * c.states);
  m.optimizer_temporaries_bytes = Bytes(d.p * z.wb * c.temps);
  m.activations_bytes = Bytes(c.blocks_saved + c.io + c.amp_copies);
  m.logits_bytes = Bytes(c.logits_saved);
  m.inputs_bytes = Bytes(c.inputs);
  m.workspace_bytes = cal::kWorkspaceBytes;
  const double fixed =
      static_cast<double>(m.parameters_bytes + m.optimizer_state_bytes) + c.inputs + cal::kWorkspaceBytes;
  const double saved = c.blocks_saved + c.io + c.amp_copies + c.logits_saved;
  double transient = std::max(c.forward_transient, c.backward_transient);
  double forward_backward = fixed + saved + transient;
  if (o.checkpointing) {
    // Backward recomputes one block at a time: its activations, its gradients and the head's coexist.
    const double recompute = saved - c.logits_saved + c.block +
                             (c.layer_matmul / d.layers + c.outside_matmul) * z.wb +
                             d.t * d.f * z.d * cal::kBlockBackwardTransient;
    if (fixed + recompute > forward_backward) {
      forward_backward = fixed + recompute;
      transient = recompute - (saved - c.logits_saved);
    }
  }
  m.transient_bytes = Bytes(transient);
  e.forward_backward_bytes = Bytes(forward_backward);
  e.optimizer_step_bytes = Bytes(fixed) + m.gradients_bytes + m.optimizer_temporaries_bytes;
  e.total_bytes = std::max(e.forward_backward_bytes, e.optimizer_step_bytes);
  e.peak_phase = e.forward_backward_bytes >= e.optimizer_step_bytes ? "forward/backward" : "optimizer step";
}

// Each unit's bytes beyond its weights and state: the larger of what it saves for backward and what lives
// after backward (gradients and optimizer temporaries).
void AddTrainingUnitBytes(MemoryEstimate& e, const std::vector<ModelUnit>& units, const TrainingOptions& o,
                          Sizes z, const TransformerDims& d, const TrainingTerms& c) {
  for (std::size_t i = 0; i < units.size(); ++i) {
    const ModelUnit& u = units[i];
    const double copies = z.amp ? 2.0 * static_cast<double>(u.matmul_params) : 0.0;
    double act = 0;
    switch (u.kind) {
      case UnitKind::kEmbedding:
        act = c.io + c.inputs;
        break;
      case UnitKind::kBlock:
        act = o.checkpointing ? d.t * d.h * c.residual : c.block + copies;
        break;
      case UnitKind::kHead:
        act = c.logits_saved + (d.lm ? c.backward_transient : 0) + copies;
        break;
      case UnitKind::kNorm:
        break;
    }
    e.units[i].bytes += Bytes(std::max(act, static_cast<double>(u.params) * z.wb * (1 + c.temps)));
  }
}

MemoryEstimate EstimateTransformerTraining(const ModelSpec& s, const std::vector<ModelUnit>& units,
                                           const TrainingOptions& o, Sizes z, const TransformerDims& d) {
  const TrainingTerms c = TrainingTermsOf(s, units, o, z, d);
  MemoryEstimate e = Start(units, z, 1 + c.states);
  SetTrainingPeak(e, o, z, d, c);
  AddTrainingUnitBytes(e, units, o, z, d, c);
  e.per_device_overhead_bytes =
      Bytes(cal::kWorkspaceBytes +
            (o.checkpointing ? c.block + d.t * d.f * z.d * cal::kBlockBackwardTransient : 0) +
            (d.lm ? 0 : c.backward_transient));
  return e;
}

MemoryEstimate EstimateTransformer(const ModelSpec& s, const std::vector<ModelUnit>& units,
                                   const TrainingOptions& o, Sizes z) {
  const TransformerDims d = DimsOf(s, units, o);
  if (o.mode == RunMode::kInference) return EstimateTransformerInference(d, units, z);
  return EstimateTransformerTraining(s, units, o, z, d);
}

}  // namespace

Result<MemoryEstimate> EstimateMemory(const ModelSpec& spec, const TrainingOptions& options) {
  MEMCOORD_RETURN_IF_ERROR(Validate(spec, options));
  const std::vector<ModelUnit> units = BuildUnits(spec);
  const Sizes z = SizesFor(options.precision);
  MemoryEstimate estimate = spec.family == ModelFamily::kResNet50
                                ? EstimateResNet(units, options, z)
                                : EstimateTransformer(spec, units, options, z);
  MEMCOORD_RETURN_IF_ERROR(CheckInRange(estimate, spec, options));
  return estimate;
}

}  // namespace memcoord::planner
