#include "coordinator/planner/placement_planner.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "common/bytes.h"
#include "coordinator/planner/contiguous_split.h"
#include "coordinator/planner/limits.h"
#include "coordinator/planner/model_packing.h"
#include "coordinator/planner/pipeline_split.h"

namespace memcoord::planner {
namespace {

// A model's units as chain items: a tied unit's bytes join the unit it shares weights with.
struct Chain {
  std::vector<std::uint64_t> items;
  std::vector<std::size_t> unit_of_item;            // first unit index of each item
  std::vector<std::vector<std::size_t>> followers;  // tied units riding on each item
};

Chain BuildChain(const MemoryEstimate& e) {
  Chain c;
  std::vector<std::size_t> item_of_unit(e.units.size(), 0);
  for (std::size_t u = 0; u < e.units.size(); ++u) {
    if (e.units[u].tied_to) continue;
    item_of_unit[u] = c.items.size();
    c.items.push_back(e.units[u].bytes);
    c.unit_of_item.push_back(u);
    c.followers.emplace_back();
  }
  for (std::size_t u = 0; u < e.units.size(); ++u) {
    if (!e.units[u].tied_to) continue;
    const std::size_t owner = item_of_unit[*e.units[u].tied_to];
    c.items[owner] += e.units[u].bytes;
    c.followers[owner].push_back(u);
  }
  return c;
}

// Saturating: 2^20 devices of up to 2^60 bytes can hold more than 2^64 together.
std::uint64_t Sum(const std::vector<std::uint64_t>& v) {
  std::uint64_t s = 0;
  for (std::uint64_t x : v) s = AddSaturated(s, x);
  return s;
}

std::string Describe(const ModelRequest& m) {
  std::string s = m.name + ", " + std::string(RunModeName(m.options.mode)) + " " +
                  std::string(PrecisionName(m.options.precision));
  if (m.options.batch > 0) s += ", batch " + std::to_string(m.options.batch);
  if (m.options.batch > 0 && m.spec.family != ModelFamily::kResNet50)
    s += ", seq " + std::to_string(m.options.seq);
  return s;
}

// Each model's estimate, shared: the advice's trial placements reuse those of the models they leave alone.
using Estimates = std::vector<std::shared_ptr<const MemoryEstimate>>;

// What every placement step reads: the request, each model's estimate, each device's usable bytes.
struct PlacementInput {
  const PlanRequest& request;
  Estimates estimates;                // per model
  std::vector<std::uint64_t> usable;  // per device
};

// The running placement: the plan being filled and the bytes placed on each device so far.
struct PlacementState {
  Plan plan;
  std::vector<std::uint64_t> loads;
};

// Whole models (split "whole") with the bytes each needs on its one device.
struct WholeModels {
  std::vector<std::size_t> models;  // indices into the request
  std::vector<std::uint64_t> items;
  bool exact = true;  // the packing was proven optimal
};

// A pipelined model's stages are the request's devices.
TrainingOptions PlannedOptions(const ModelRequest& m, std::size_t devices) {
  TrainingOptions o = m.options;
  if (m.pipeline) o.parallel.pipeline_stages = static_cast<std::int64_t>(devices);
  return o;
}

// What an advice trial changed against the request whose estimates it may reuse: one model
// (`changed_model`), or only the devices (a pipelined model's stages follow the device count).
struct Reuse {
  const Estimates& estimates;
  std::size_t devices = 0;  // the request's device count
  std::optional<std::size_t> changed_model;
};

Result<PlacementInput> EstimateModels(const PlanRequest& request, const std::optional<Reuse>& reuse) {
  PlacementInput in{request, {}, std::vector<std::uint64_t>(request.devices.size())};
  for (std::size_t j = 0; j < request.devices.size(); ++j) in.usable[j] = request.devices[j].usable_bytes();
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    const ModelRequest& m = request.models[i];
    if (reuse && i != reuse->changed_model && (!m.pipeline || request.devices.size() == reuse->devices)) {
      in.estimates.push_back(reuse->estimates[i]);
      continue;
    }
    Result<MemoryEstimate> e = EstimateMemory(m.spec, PlannedOptions(m, request.devices.size()));
    if (!e.ok()) return e.status().WithContext("models[" + std::to_string(i) + "] (" + m.name + "): ");
    in.estimates.push_back(std::make_shared<const MemoryEstimate>(*std::move(e)));
  }
  return in;
}

// A model larger than every device together can never fit: said before any search.
std::optional<std::string> LargerThanAllDevices(const PlacementInput& in) {
  const std::uint64_t usable_total = Sum(in.usable);
  for (std::size_t i = 0; i < in.request.models.size(); ++i) {
    const MemoryEstimate& e = *in.estimates[i];
    std::uint64_t need = e.total_bytes;
    if (in.request.models[i].split == SplitKind::kLayers) {
      need = 0;
      for (const UnitMemory& u : e.units) need += u.bytes;
    }
    if (need > usable_total) {
      return "models[" + std::to_string(i) + "] (" + Describe(in.request.models[i]) + ") needs " +
             FormatBytes(need) + ", more than all " + std::to_string(in.usable.size()) +
             " devices together (" + FormatBytes(usable_total) + " usable)";
    }
  }
  return std::nullopt;
}

WholeModels CollectWholeModels(const PlacementInput& in) {
  WholeModels whole;
  for (std::size_t i = 0; i < in.request.models.size(); ++i) {
    if (in.request.models[i].split == SplitKind::kWhole) {
      whole.models.push_back(i);
      whole.items.push_back(in.estimates[i]->total_bytes);
    }
  }
  return whole;
}

std::optional<std::string> WholeModelLargerThanAnyDevice(const PlacementInput& in, const WholeModels& whole) {
  const std::uint64_t largest_device = *std::max_element(in.usable.begin(), in.usable.end());
  for (std::size_t k = 0; k < whole.models.size(); ++k) {
    if (whole.items[k] > largest_device) {
      return "models[" + std::to_string(whole.models[k]) + "] (" +
             Describe(in.request.models[whole.models[k]]) + ") is placed whole and needs " +
             FormatBytes(whole.items[k]) + ", more than the largest device (" + FormatBytes(largest_device) +
             " usable); \"split\": \"layers\" spreads it over several";
    }
  }
  return std::nullopt;
}

// Whole models first, packed by PackWhole; each becomes one range covering all its units.
std::optional<std::string> PlaceWholeModels(const PlacementInput& in, WholeModels& whole,
                                            PlacementState& state) {
  if (whole.models.empty()) return std::nullopt;
  Result<Packing> packing = PackWhole(whole.items, in.usable);
  if (!packing.ok()) return "whole models do not fit: " + packing.status().message();
  whole.exact = packing->exact;
  for (std::size_t k = 0; k < whole.models.size(); ++k) {
    const std::size_t i = whole.models[k];
    UnitRange r;
    r.device = packing->device_of[k];
    r.first_unit = 0;
    r.last_unit = in.estimates[i]->units.size() - 1;
    for (const UnitMemory& u : in.estimates[i]->units) r.units.push_back(u.name);
    r.bytes = whole.items[k];
    state.plan.models[i].ranges.push_back(std::move(r));
  }
  state.loads = packing->loads;
  return std::nullopt;
}

// The units of `chain` items [a, b) as one device's range; tied units follow the unit they share with.
UnitRange ChainRange(const MemoryEstimate& e, const Chain& chain, std::size_t device, std::size_t a,
                     std::size_t b) {
  UnitRange r;
  r.device = device;
  r.first_unit = chain.unit_of_item[a];
  r.last_unit = b < chain.unit_of_item.size() ? chain.unit_of_item[b] - 1 : e.units.size() - 1;
  while (r.last_unit > r.first_unit && e.units[r.last_unit].tied_to) --r.last_unit;  // followers listed below
  for (std::size_t item = a; item < b; ++item) {
    const std::size_t u = chain.unit_of_item[item];
    r.units.push_back(e.units[u].name);
    r.bytes += chain.items[item];
    for (std::size_t f : chain.followers[item])
      r.units.push_back(e.units[f].name + " (tied to " + e.units[u].name + ")");
  }
  return r;
}

// A 1F1B pipeline over all devices, each stage within what the device has left; the estimate's
// weights-only split is kept for comparison. `lower_bound` is the unbounded optimum of the same split.
std::optional<std::string> SplitPipeline(const PlacementInput& in, std::size_t i, PlacementState& state,
                                         std::uint64_t& lower_bound) {
  const ModelRequest& m = in.request.models[i];
  const MemoryEstimate& e = *in.estimates[i];
  const TrainingOptions o = PlannedOptions(m, in.usable.size());
  Result<StageLoadFunction> load = PipelineStageLoad(m.spec, o, false);
  if (!load.ok())
    return "models[" + std::to_string(i) + "] (" + Describe(m) + "): " + load.status().message();
  std::vector<std::uint64_t> caps(in.usable.size());
  for (std::size_t j = 0; j < caps.size(); ++j)
    caps[j] = in.usable[j] > state.loads[j] ? in.usable[j] - state.loads[j] : 0;
  Result<StageSplit> split = SplitStages(e.units.size(), caps.size(), *load, caps);
  if (!split.ok()) {
    std::string why = "models[" + std::to_string(i) + "] (" + Describe(m) + "): " + split.status().message();
    if (!e.weights_only_stages.empty())
      why += "; the busiest stage needs at least " + FormatBytes(e.total_bytes);
    return why;
  }
  lower_bound = e.total_bytes;
  ModelPlacement& placed = state.plan.models[i];
  placed.weights_only_stages = e.weights_only_stages;
  const StageLoadFunction states_only = *PipelineStageLoad(m.spec, o, true);
  for (const UnitMemory& u : e.units) placed.unit_names.push_back(u.name);
  for (std::size_t j = 0; j < caps.size(); ++j) {
    UnitRange r;
    r.device = j;
    r.first_unit = split->first[j];
    r.last_unit = split->first[j + 1] - 1;
    for (std::size_t u = r.first_unit; u <= r.last_unit; ++u) r.units.push_back(e.units[u].name);
    r.bytes = split->loads[j];
    state.loads[j] += r.bytes;
    placed.stages.push_back({r.first_unit, r.last_unit, o.parallel.in_flight(static_cast<std::int64_t>(j)),
                             r.bytes, states_only(r.first_unit, r.last_unit, j)});
    placed.ranges.push_back(std::move(r));
  }
  return std::nullopt;
}

// One layer-split model, optimally over what is left; sets `lower_bound` to its chain's bound.
std::optional<std::string> SplitModelByLayers(const PlacementInput& in, std::size_t i, PlacementState& state,
                                              std::uint64_t& lower_bound) {
  if (in.request.models[i].pipeline) return SplitPipeline(in, i, state, lower_bound);
  const std::size_t n_devices = in.usable.size();
  const MemoryEstimate& e = *in.estimates[i];
  const Chain chain = BuildChain(e);
  const std::uint64_t overhead = e.per_device_overhead_bytes;
  std::vector<std::uint64_t> caps(n_devices);
  for (std::size_t j = 0; j < n_devices; ++j) caps[j] = in.usable[j] > overhead ? in.usable[j] - overhead : 0;
  Result<ChainSplit> split = SplitChain(chain.items, caps, state.loads);
  if (!split.ok()) {
    return "models[" + std::to_string(i) + "] (" + Describe(in.request.models[i]) +
           "): " + split.status().message() +
           (overhead > 0
                ? " (each device also needs " + FormatBytes(overhead) + " of workspace and transients)"
                : "");
  }
  lower_bound = ChainLowerBound(chain.items, caps) + overhead;
  for (std::size_t j = 0; j < n_devices; ++j) {
    if (split->first[j] == split->first[j + 1]) continue;
    UnitRange r = ChainRange(e, chain, j, split->first[j], split->first[j + 1]);
    r.bytes += overhead;
    state.loads[j] += r.bytes;
    state.plan.models[i].ranges.push_back(std::move(r));
  }
  return std::nullopt;
}

// The feasible plan's balance figures: the lower bound (exact for a lone chain, else over all atoms) and
// the busiest load against it and against an even spread.
void SetBalanceFigures(const PlacementInput& in, const WholeModels& whole, std::size_t chains,
                       std::uint64_t chain_lower_bound, PlacementState& state) {
  Plan& plan = state.plan;
  const std::vector<std::uint64_t>& loads = state.loads;
  plan.feasible = true;
  plan.device_loads_bytes = loads;
  plan.max_load_bytes = *std::max_element(loads.begin(), loads.end());
  if (chains == 1 && whole.models.empty()) {
    plan.lower_bound_bytes = chain_lower_bound;
    plan.exact = true;
  } else {
    std::vector<std::uint64_t> atoms = whole.items;
    for (std::size_t i = 0; i < in.request.models.size(); ++i) {
      if (in.request.models[i].split != SplitKind::kLayers) continue;
      for (std::uint64_t x : BuildChain(*in.estimates[i]).items) atoms.push_back(x);
    }
    plan.lower_bound_bytes = ChainLowerBound(atoms, in.usable);
    plan.exact = chains == 0 && whole.exact;
  }
  const std::uint64_t total = Sum(loads);
  plan.max_over_lb = plan.lower_bound_bytes > 0 ? static_cast<double>(plan.max_load_bytes) /
                                                      static_cast<double>(plan.lower_bound_bytes)
                                                : 1.0;
  plan.max_over_even = total > 0 ? static_cast<double>(plan.max_load_bytes) *
                                       static_cast<double>(in.usable.size()) / static_cast<double>(total)
                                 : 1.0;
}

// The placement without advice. Infeasible plans come back with feasible == false and a reason.
Result<Plan> Place(const PlacementInput& in) {
  const PlanRequest& request = in.request;
  PlacementState state;
  state.loads.assign(in.usable.size(), 0);
  for (std::size_t i = 0; i < request.models.size(); ++i)
    state.plan.models.push_back({request.models[i].name, in.estimates[i]->total_bytes, {}, {}, {}, {}});
  const auto infeasible = [&state](std::string reason) {
    state.plan.reason = std::move(reason);
    return std::move(state.plan);
  };
  if (std::optional<std::string> reason = LargerThanAllDevices(in)) return infeasible(*std::move(reason));
  WholeModels whole = CollectWholeModels(in);
  if (std::optional<std::string> reason = WholeModelLargerThanAnyDevice(in, whole))
    return infeasible(*std::move(reason));
  if (std::optional<std::string> reason = PlaceWholeModels(in, whole, state))
    return infeasible(*std::move(reason));

  std::size_t chains = 0;
  std::uint64_t chain_lower_bound = 0;
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    if (request.models[i].split != SplitKind::kLayers) continue;
    ++chains;
    if (std::optional<std::string> reason = SplitModelByLayers(in, i, state, chain_lower_bound))
      return infeasible(*std::move(reason));
  }
  SetBalanceFigures(in, whole, chains, chain_lower_bound, state);
  return std::move(state.plan);
}

// The parser's limits again, for requests built in memory (the Plan RPC fills devices from workers' reports).
Status CheckRequest(const PlanRequest& request) {
  if (request.devices.empty()) return InvalidArgument("devices: at least one device is required");
  if (request.models.empty()) return InvalidArgument("models: at least one model is required");
  MEMCOORD_RETURN_IF_ERROR(CheckDeviceCount(request.devices.size()));
  MEMCOORD_RETURN_IF_ERROR(CheckModelCount(request.models.size()));
  MEMCOORD_RETURN_IF_ERROR(CheckPlanSize(request.devices.size(), request.models.size()));
  MEMCOORD_RETURN_IF_ERROR(CheckPlanModels(request));
  for (std::size_t j = 0; j < request.devices.size(); ++j) {
    MEMCOORD_RETURN_IF_ERROR(CheckDevice(
        request.devices[j], "devices[" + std::to_string(j) + "] (" + request.devices[j].name + ")"));
  }
  return Status::Ok();
}

}  // namespace

Result<Plan> MakePlan(const PlanRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  MEMCOORD_RETURN_IF_ERROR(CheckRequest(request));
  MEMCOORD_ASSIGN_OR_RETURN(const PlacementInput in, EstimateModels(request, std::nullopt));
  MEMCOORD_ASSIGN_OR_RETURN(Plan plan, Place(in));
  if (!plan.feasible) {
    plan.suggestions =
        SuggestFits(request, [&in, &request](const PlanRequest& trial, std::optional<std::size_t> changed) {
          Result<PlacementInput> trial_in =
              EstimateModels(trial, Reuse{in.estimates, request.devices.size(), changed});
          if (!trial_in.ok()) return false;
          Result<Plan> p = Place(*trial_in);
          return p.ok() && p->feasible;
        });
  }
  plan.planning_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace memcoord::planner
