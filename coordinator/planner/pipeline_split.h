// Pipeline splits: a model's units, in order, cut into S contiguous non-empty stages whose loads depend on
// the stage they land on (1F1B: stage i holds activations of min(S - i, M) micro-batches, so the same
// layers weigh more on early stages). The split minimises the busiest stage's load, within each stage's
// capacity.
//
// Method: a bottleneck T is feasible iff the greedy fill (each stage, from the last backwards, takes the
// longest run of the remaining units that keeps its load within min(T, capacity) and leaves one unit for
// each earlier stage) places every unit. This is exact when a stage's load never decreases as its range
// grows, a range never costs more on a later stage than on an earlier one (1F1B: fewer micro-batches in
// flight), and the capacities are equal (or none): then a unit pushed later never hurts, and the greedy's
// frontier stays behind any feasible split's. With unequal capacities it is a heuristic that may miss a fit.
// Binary search over integer T finds the optimum. Deterministic: among optimal splits it returns the
// greedy one (later stages filled first). Pure functions; thread-safe if `load` is.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/result.h"
#include "coordinator/planner/memory_estimator.h"

namespace memcoord::planner {

// Bytes of units [first, last] (inclusive) as stage `stage` (0-based). REQUIRES: non-decreasing as the
// range grows, for every stage.
using StageLoadFunction =
    std::function<std::uint64_t(std::size_t first, std::size_t last, std::size_t stage)>;

struct StageSplit {
  std::vector<std::size_t> first;  // size stages + 1; first[stages] == units
  std::vector<std::uint64_t> loads;
  std::uint64_t bottleneck_bytes = 0;
};

// RESOURCE_EXHAUSTED when no split fits the capacities (empty: unbounded); INVALID_ARGUMENT when there
// are fewer units than stages or no stage. REQUIRES: capacities empty or of size `stages`.
Result<StageSplit> SplitStages(std::size_t units, std::size_t stages, const StageLoadFunction& load,
                               const std::vector<std::uint64_t>& capacities = {});

// The split balancing `load` and the one balancing `states_only` (model states alone, what a weights-only
// split sees), each with both figures per stage; no capacity. REQUIRES: 1 <= stages <= units.size().
struct PipelineComparison {
  std::vector<StagePeak> aware;
  std::vector<StagePeak> weights_only;
};
PipelineComparison ComparePipelineSplits(std::size_t units, std::size_t stages, std::int64_t micro_batches,
                                         const StageLoadFunction& load, const StageLoadFunction& states_only);

// The load of a stage of `options.parallel`'s 1F1B pipeline for a transformer in training: units
// [first, last] of BuildUnits(spec, options.head) as stage `stage`, with (states_only == false) the
// micro-batches it holds, or its model states alone. INVALID_ARGUMENT when EstimateMemory would refuse the
// options, or for resnet50 and non-training modes.
Result<StageLoadFunction> PipelineStageLoad(const ModelSpec& spec, const TrainingOptions& options,
                                            bool states_only);

}  // namespace memcoord::planner
