// resnet50 at 224×224: training (optionally with each bottleneck block checkpointed) and inference.
#include <algorithm>

#include "coordinator/planner/estimator_coefficients.h"
#include "coordinator/planner/estimator_parts.h"
#include "coordinator/planner/transformer_activations.h"

namespace memcoord::planner::internal {
namespace {

namespace cal = calibration;

// Elements autograd saves per image, counted from torchvision's resnet50 (BatchNorm inputs, in-place ReLU
// outputs, max-pool indices as two elements each): the whole network, what per-block checkpointing keeps
// (the stem and every block's output), and the largest block (recomputed during backward).
constexpr double kAllSavedElements = 21324800;
constexpr double kCheckpointSavedElements = 7727104;
constexpr double kLargestBlockElements = 3211264;

MemoryEstimate Start(const std::vector<ModelUnit>& units, Dtypes z, double unit_factor) {
  MemoryEstimate e;
  e.head = OutputHead::kImageClassification;
  e.params = TotalParams(units);
  for (const ModelUnit& u : units) {
    UnitMemory m{u.name, u.params, Bytes(static_cast<double>(u.params) * z.wb * unit_factor), u.tied_to};
    m.states_bytes = m.bytes;
    e.units.push_back(std::move(m));
  }
  e.breakdown.parameters_bytes = Bytes(static_cast<double>(e.params) * z.wb);
  return e;
}

MemoryEstimate Inference(const std::vector<ModelUnit>& units, const TrainingOptions& o, Dtypes z,
                         double input) {
  MemoryEstimate e = Start(units, z, 1);
  // Under autocast the 16-bit copies of the weights stay in autocast's cache until the region exits (the
  // parameters require grad even under no_grad, so they are cached).
  const double copies = z.amp && o.batch > 0 ? 2 * static_cast<double>(e.params) : 0;
  const double live = static_cast<double>(o.batch) * cal::kResNetInferenceFp32 * z.d / 4 + copies;
  e.breakdown.transient_bytes = Bytes(live);
  e.breakdown.inputs_bytes = Bytes(input);
  e.breakdown.workspace_bytes = o.batch > 0 ? cal::kWorkspaceBytes : 0;
  e.forward_backward_bytes = e.breakdown.parameters_bytes + Bytes(live + input) + e.breakdown.workspace_bytes;
  e.total_bytes = e.forward_backward_bytes;
  e.peak_phase = o.batch > 0 ? "forward" : "weights";
  for (std::size_t i = 0; i < e.units.size(); ++i)
    e.units[i].bytes += Bytes(live * cal::kResNetActivationShare[i]);
  e.units[0].bytes += Bytes(input);
  e.per_device_overhead_bytes = e.breakdown.workspace_bytes;
  return e;
}

double PerImage(Precision p) {
  return p == Precision::kFp32   ? cal::kResNetActivationFp32
         : p == Precision::kBf16 ? cal::kResNetActivationBf16
                                 : cal::kResNetActivationAmp;
}

// Saved bytes and the largest transient of a training step; checkpointing keeps kCheckpointSavedElements
// of kAllSavedElements and recomputes one block (its activations and their gradients) at a time.
void Activations(const TrainingOptions& o, double p, Dtypes z, double* saved, double* transient) {
  const double b = static_cast<double>(o.batch);
  const double per_image = PerImage(o.precision);
  const double copies = z.amp ? 2 * p : 0;
  if (!o.checkpointing) {
    *saved = b * per_image + copies;
    *transient = cal::kResNetBackwardTransient * *saved;
    return;
  }
  *saved = b * per_image * kCheckpointSavedElements / kAllSavedElements * cal::kResNetCheckpointScale;
  *transient =
      b * per_image * kLargestBlockElements / kAllSavedElements * cal::kResNetRecomputeFactor + copies;
}

}  // namespace

MemoryEstimate EstimateResNet(const std::vector<ModelUnit>& units, const TrainingOptions& o) {
  const Dtypes z = DtypesFor(o.precision);
  const double input =
      static_cast<double>(o.batch) * 3 * 224 * 224 * (o.precision == Precision::kBf16 ? 2 : 4);
  if (o.mode != RunMode::kTraining) return Inference(units, o, z, input);
  const double p = static_cast<double>(TotalParams(units));
  const ModelStates s = ModelStatesPerRank(p, p, o.precision, o.optimizer, o.parallel, true);
  MemoryEstimate e = Start(units, z, 1);
  double saved = 0;
  double transient = 0;
  Activations(o, p, z, &saved, &transient);
  MemoryBreakdown& m = e.breakdown;
  m.parameters_bytes = Bytes(s.weights);
  m.gradients_bytes = Bytes(s.gradients);
  m.optimizer_state_bytes = Bytes(s.optimizer_state);
  m.optimizer_temporaries_bytes = Bytes(s.optimizer_temporaries);
  m.ddp_buckets_bytes = Bytes(s.ddp_buckets);
  m.gathered_params_bytes = Bytes(s.gathered);
  m.activations_bytes = Bytes(saved);
  m.other_activations_bytes = m.activations_bytes;  // convolution and BatchNorm maps: none of the kinds
  m.transient_bytes = Bytes(transient);
  m.inputs_bytes = Bytes(input);
  m.workspace_bytes = cal::kWorkspaceBytes;
  const double fixed = s.weights + s.optimizer_state + s.ddp_buckets + input + cal::kWorkspaceBytes;
  e.forward_backward_bytes = Bytes(fixed + s.gathered + saved + transient);
  e.optimizer_step_bytes = Bytes(fixed + s.gradients + s.optimizer_temporaries);
  e.total_bytes = std::max(e.forward_backward_bytes, e.optimizer_step_bytes);
  e.peak_phase = e.forward_backward_bytes >= e.optimizer_step_bytes ? "forward/backward" : "optimizer step";
  const double unit_saved = o.checkpointing ? saved : static_cast<double>(o.batch) * PerImage(o.precision);
  for (std::size_t i = 0; i < e.units.size(); ++i) {
    const double up = static_cast<double>(units[i].params);
    const double act = unit_saved * cal::kResNetActivationShare[i] + (z.amp ? 2.0 * up : 0.0);
    const ModelStates us = ModelStatesPerRank(up, up, o.precision, o.optimizer, o.parallel, true);
    e.units[i].states_bytes = Bytes(us.weights + us.gradients + us.optimizer_state);
    e.units[i].temporaries_bytes = Bytes(us.optimizer_temporaries);
    e.units[i].activation_bytes = Bytes(act);
    e.units[i].bytes =
        Bytes(us.weights + us.optimizer_state + std::max(act, us.gradients + us.optimizer_temporaries));
  }
  e.units[0].bytes += Bytes(input);
  e.per_device_overhead_bytes = Bytes(cal::kWorkspaceBytes + transient);
  return e;
}

}  // namespace memcoord::planner::internal
