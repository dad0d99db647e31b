// Internal pieces of EstimateMemory, one file per kind of run (not a public API: use memory_estimator.h).
// Every function here takes options EstimateMemory already validated.
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/model_states.h"
#include "coordinator/planner/pipeline_split.h"

namespace memcoord::planner::internal {

// Bytes of a double count. Counts past kMaxModelBytes (only from inputs EstimateMemory then rejects) stop
// just above it: llround past int64 has no defined result, and sums of a few clamped values stay in uint64.
std::uint64_t Bytes(double v);

// The caching allocator rounds each allocation up to 512 bytes: about 256 bytes per live tensor.
double RoundingBytes(double live_tensors);

MemoryEstimate EstimateResNet(const std::vector<ModelUnit>& units, const TrainingOptions& o);
MemoryEstimate EstimateTransformerTraining(const ModelSpec& s, const std::vector<ModelUnit>& units,
                                           const TrainingOptions& o);
MemoryEstimate EstimateTransformerInference(const ModelSpec& s, const std::vector<ModelUnit>& units,
                                            const TrainingOptions& o);

// The per-stage load of a transformer's training pipeline (see PipelineStageLoad).
StageLoadFunction TransformerStageLoad(const ModelSpec& s, const TrainingOptions& o, bool states_only);

}  // namespace memcoord::planner::internal
