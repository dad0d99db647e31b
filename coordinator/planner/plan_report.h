// Reports for the CLI: a plan or an estimate as machine-first JSON (bytes as integers) or as a human table.
// Pure formatting of values the planner and estimator computed; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/placement_planner.h"

namespace memcoord::planner {

nlohmann::json PlanToJson(const PlanRequest& request, const Plan& plan);
std::string PlanToTable(const PlanRequest& request, const Plan& plan);

nlohmann::json EstimateToJson(const ModelSpec& spec, const TrainingOptions& options, const MemoryEstimate& e);
// Per-stage lines of a pipeline split; a stage above its device's capacity (when given) is marked.
std::string StagesToTable(const std::vector<StagePeak>& stages, const std::vector<std::string>& unit_names,
                          const std::vector<std::uint64_t>& capacities);

std::string EstimateToTable(const ModelSpec& spec, const TrainingOptions& options, const MemoryEstimate& e);

}  // namespace memcoord::planner
