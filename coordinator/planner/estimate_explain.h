// --explain for `memcoord estimate`: the breakdown by kind and the assumptions behind each figure, so a
// person can check the estimate term by term. Pure formatting of values EstimateMemory computed, plus the
// list of assumptions it records; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "coordinator/planner/memory_estimator.h"

namespace memcoord::planner {

// What the figures of `e` assume (head, loop, attention kernel, precision layout, sharding, pipeline...).
std::vector<std::string> EstimateAssumptions(const ModelSpec& spec, const TrainingOptions& options,
                                             const MemoryEstimate& e);

// The human-readable explanation: every term with its bytes, which phase holds it, and the assumptions.
std::string ExplainEstimate(const ModelSpec& spec, const TrainingOptions& options, const MemoryEstimate& e);

}  // namespace memcoord::planner
