// PlacementPlanner: turns a PlanRequest into a Plan — which device holds which units of which model.
//   - one model split by layers: the exactly optimal contiguous split (SplitChain) over the devices in
//     their listed order, each device's usable bytes reduced by the model's per-device overhead; with
//     "micro_batches" the devices are 1F1B pipeline stages and the split (SplitStages) balances each
//     stage's model states plus the activations of the micro-batches it holds;
//   - whole models: PackWhole (exact up to kExactPackingItems models, packing with improvement beyond);
//   - mixtures: whole models first, then each layer-split model optimally over what they left (each step
//     optimal; the combination is a heuristic).
// Tied units go with the unit they share weights with and are counted once. The same request always
// gives the same plan. An infeasible request returns a Plan with feasible == false, the reason and
// advice (FitAdvice) rather than an error: errors are for bad input only. Time: about devices × models
// steps times a log factor, plus about 0.2-0.3 µs per layer per estimate; a request at the limits
// (limits.h: 65,536 devices, 2^22 devices × models, 16,384 layers, 256 devices with a pipeline) is
// planned, advised and reported in 0.05-0.19 s (release, tests/planner/plan_scale_test.cc).
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "coordinator/planner/fit_advice.h"
#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::planner {

struct UnitRange {
  std::size_t device = 0;
  std::size_t first_unit = 0;  // chain range [first_unit, last_unit] in the model's unit order
  std::size_t last_unit = 0;
  std::vector<std::string> units;  // names, tied units included
  std::uint64_t bytes = 0;         // this model's bytes on that device (overhead included)
};

struct ModelPlacement {
  std::string name;
  std::uint64_t total_bytes = 0;  // the estimator's peak for the whole model on one device
  std::vector<UnitRange> ranges;  // in device order
  // Pipelines ("micro_batches"): per-stage peaks of the 1F1B-aware split without capacities, and of the
  // split a weights-only balance would choose (its peaks with the micro-batches' activations).
  std::vector<StagePeak> stages;
  std::vector<StagePeak> weights_only_stages;
  std::vector<std::string> unit_names;  // pipelines: the model's units, which the stages index
};

struct Plan {
  bool feasible = false;
  std::string reason;                      // why not, when infeasible
  std::vector<FitSuggestion> suggestions;  // what would make it fit, when infeasible
  std::vector<ModelPlacement> models;
  std::vector<std::uint64_t> device_loads_bytes;
  std::uint64_t lower_bound_bytes = 0;
  std::uint64_t max_load_bytes = 0;
  double max_over_lb = 0;
  double max_over_even = 0;  // busiest load ÷ (total load ÷ devices), the figure Accelerate is judged by
  double planning_ms = 0;
  bool exact = false;  // proven optimal for its class (contiguous split, or small packing)
};

// INVALID_ARGUMENT when the options do not fit a model (EstimateMemory's checks, naming the model), and for
// a request past limits.h (a device above 2^60 bytes or with reserve >= capacity, more than 1024 models or
// 65,536 devices, devices × models above 2^22, more than 16,384 layers, a pipeline over more than 256
// devices): the parser checks those too, but a request built in memory, as the Plan RPC builds one, skips the
// parser.
Result<Plan> MakePlan(const PlanRequest& request);

}  // namespace memcoord::planner
