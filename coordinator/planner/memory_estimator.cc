#include "coordinator/planner/memory_estimator.h"

#include <cmath>

#include "coordinator/planner/estimate_explain.h"
#include "coordinator/planner/estimator_parts.h"
#include "coordinator/planner/limits.h"
#include "coordinator/planner/output_head.h"
#include "coordinator/planner/parallelism.h"

namespace memcoord::planner {
namespace internal {

std::uint64_t Bytes(double v) {
  if (!(v > 0)) return 0;
  if (v > static_cast<double>(kMaxModelBytes)) return kMaxModelBytes + 1;
  return static_cast<std::uint64_t>(std::llround(v));
}

double RoundingBytes(double live_tensors) { return 256 * live_tensors; }

}  // namespace internal

namespace {

using internal::Bytes;

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

Status ValidateSizes(const ModelSpec& s, const TrainingOptions& o) {
  const bool training = o.mode == RunMode::kTraining;
  const std::int64_t min_size = training ? 1 : 0;
  if (o.batch < min_size || o.batch > (std::int64_t{1} << 24)) {
    return InvalidArgument("batch must be between " + std::to_string(min_size) + " and 16777216" +
                           (training ? " in training" : " (0: weights only)") + ", got " +
                           std::to_string(o.batch));
  }
  if (o.mode == RunMode::kGenerate ? (o.new_tokens < 0 || o.new_tokens > (1 << 24)) : o.new_tokens != 0) {
    return InvalidArgument("new_tokens " + std::to_string(o.new_tokens) +
                           (o.mode == RunMode::kGenerate ? " must be between 0 and 16777216"
                                                         : " is only for mode generate; accepted here: 0"));
  }
  if (s.family == ModelFamily::kResNet50) {
    if (o.mode == RunMode::kGenerate)
      return InvalidArgument("mode generate needs a causal LM; resnet50 accepts: training, inference");
    return Status::Ok();
  }
  if (o.seq < min_size || o.seq > (std::int64_t{1} << 24)) {
    return InvalidArgument("seq must be between " + std::to_string(min_size) + " and 16777216, got " +
                           std::to_string(o.seq));
  }
  const std::int64_t positions = o.seq + o.new_tokens;
  if (s.max_positions > 0 && positions > s.max_positions) {
    return InvalidArgument(std::string(o.new_tokens > 0 ? "seq + new_tokens " : "seq ") +
                           std::to_string(positions) + " exceeds the " + s.name + " position table (" +
                           std::to_string(s.max_positions) + " positions); accepted: 1.." +
                           std::to_string(s.max_positions));
  }
  return Status::Ok();
}

Status Validate(const ModelSpec& s, const TrainingOptions& o) {
  MEMCOORD_RETURN_IF_ERROR(ValidateSizes(s, o));
  MEMCOORD_ASSIGN_OR_RETURN(const OutputHead head, ResolveHead(s.family, o.head));
  if (o.mode == RunMode::kGenerate && head != OutputHead::kCausalLm) {
    return InvalidArgument("mode generate needs head causal-lm, got " + std::string(OutputHeadName(head)));
  }
  const std::int64_t heads = s.family == ModelFamily::kResNet50 ? 0 : s.heads;
  return CheckParallelism(o.parallel, s.layers, heads, o.mode == RunMode::kTraining);
}

}  // namespace

Result<MemoryEstimate> EstimateMemory(const ModelSpec& spec, const TrainingOptions& options) {
  MEMCOORD_RETURN_IF_ERROR(Validate(spec, options));
  const std::vector<ModelUnit> units = BuildUnits(spec, options.head);
  MemoryEstimate estimate;
  if (spec.family == ModelFamily::kResNet50) {
    estimate = internal::EstimateResNet(units, options);
  } else if (options.mode == RunMode::kTraining) {
    estimate = internal::EstimateTransformerTraining(spec, units, options);
  } else {
    estimate = internal::EstimateTransformerInference(spec, units, options);
  }
  estimate.assumptions = EstimateAssumptions(spec, options, estimate);
  MEMCOORD_RETURN_IF_ERROR(CheckInRange(estimate, spec, options));
  return estimate;
}

Result<StageLoadFunction> PipelineStageLoad(const ModelSpec& spec, const TrainingOptions& options,
                                            bool states_only) {
  MEMCOORD_RETURN_IF_ERROR(Validate(spec, options));
  if (spec.family == ModelFamily::kResNet50 || options.mode != RunMode::kTraining) {
    return InvalidArgument("pipelines are modelled for transformers in training only");
  }
  return internal::TransformerStageLoad(spec, options, states_only);
}

}  // namespace memcoord::planner
