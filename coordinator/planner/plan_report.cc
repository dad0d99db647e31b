#include "coordinator/planner/plan_report.h"

#include <algorithm>
#include <cstdio>

#include "common/bytes.h"

namespace memcoord::planner {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

nlohmann::json SuggestionsJson(const Plan& plan) {
  nlohmann::json out = nlohmann::json::array();
  for (const FitSuggestion& s : plan.suggestions) {
    out.push_back({{"change", s.change},
                   {"saves_bytes", s.saves_bytes},
                   {"adds_capacity_bytes", s.adds_capacity_bytes},
                   {"fits", s.fits}});
  }
  return out;
}

nlohmann::json StagesJson(const std::vector<StagePeak>& stages, const std::vector<std::string>& names) {
  nlohmann::json out = nlohmann::json::array();
  for (const StagePeak& p : stages) {
    out.push_back({{"first_unit", names[p.first_unit]},
                   {"last_unit", names[p.last_unit]},
                   {"units", p.last_unit - p.first_unit + 1},
                   {"micro_batches_in_flight", p.in_flight},
                   {"peak_bytes", p.bytes},
                   {"states_only_bytes", p.states_only_bytes}});
  }
  return out;
}

}  // namespace

std::vector<std::string> UnitNames(const std::vector<UnitMemory>& units) {
  std::vector<std::string> names;
  for (const UnitMemory& u : units) names.push_back(u.name);
  return names;
}

std::string StagesToTable(const std::vector<StagePeak>& stages, const std::vector<std::string>& units,
                          const std::vector<std::uint64_t>& capacities) {
  std::string out;
  for (std::size_t j = 0; j < stages.size(); ++j) {
    const StagePeak& p = stages[j];
    const std::uint64_t capacity = j < capacities.size() ? capacities[j] : 0;
    out += "    stage " + std::to_string(j) + ": " +
           Pad(units[p.first_unit] + " .. " + units[p.last_unit], 24) +
           Pad("(" + std::to_string(p.last_unit - p.first_unit + 1) + " units)", 12) + "peak " +
           Pad(FormatBytes(p.bytes), 11) + "with " + std::to_string(p.in_flight) +
           " micro-batches; states only " + FormatBytes(p.states_only_bytes) +
           (capacity > 0 && p.bytes > capacity ? "  EXCEEDS " + FormatBytes(capacity) : "") + "\n";
  }
  return out;
}

nlohmann::json PlanToJson(const PlanRequest& request, const Plan& plan) {
  nlohmann::json j;
  j["feasible"] = plan.feasible;
  if (!plan.feasible) {
    j["reason"] = plan.reason;
    j["suggestions"] = SuggestionsJson(plan);
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceSpec& d : request.devices) {
    devices.push_back(
        {{"name", d.name}, {"capacity_bytes", d.capacity_bytes}, {"reserve_bytes", d.reserve_bytes}});
  }
  j["devices"] = devices;
  nlohmann::json models = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.models.size(); ++i) {
    const ModelPlacement& m = plan.models[i];
    const ModelRequest& r = request.models[i];
    nlohmann::json placements = nlohmann::json::array();
    for (const UnitRange& u : m.ranges) {
      placements.push_back({{"device", request.devices[u.device].name},
                            {"device_index", u.device},
                            {"first_unit", u.first_unit},
                            {"last_unit", u.last_unit},
                            {"units", u.units},
                            {"bytes", u.bytes}});
    }
    models.push_back({{"name", m.name},
                      {"model", r.spec.name},
                      {"precision", PrecisionName(r.options.precision)},
                      {"mode", RunModeName(r.options.mode)},
                      {"split", r.split == SplitKind::kLayers ? "layers" : "whole"},
                      {"total_bytes", m.total_bytes},
                      {"placements", placements}});
    if (!m.stages.empty()) {
      models.back()["micro_batches"] = r.options.parallel.micro_batches;
      models.back()["stages"] = StagesJson(m.stages, m.unit_names);
      models.back()["weights_only_stages"] = StagesJson(m.weights_only_stages, m.unit_names);
    }
  }
  j["models"] = models;
  if (plan.feasible) {
    j["device_loads_bytes"] = plan.device_loads_bytes;
    j["max_load_bytes"] = plan.max_load_bytes;
    j["lower_bound_bytes"] = plan.lower_bound_bytes;
    j["max_over_lb"] = plan.max_over_lb;
    j["max_over_even"] = plan.max_over_even;
    j["exact"] = plan.exact;
  }
  j["planning_ms"] = plan.planning_ms;
  return j;
}

std::string PlanToTable(const PlanRequest& request, const Plan& plan) {
  std::string out;
  if (!plan.feasible) {
    out += "infeasible: " + plan.reason + "\n";
    if (!plan.suggestions.empty()) out += "what would make it fit:\n";
    for (const FitSuggestion& s : plan.suggestions) {
      out += "  " + Pad(s.change, 56) +
             (s.adds_capacity_bytes > 0 ? "adds " + FormatBytes(s.adds_capacity_bytes)
                                        : "saves " + FormatBytes(s.saves_bytes)) +
             (s.fits ? "  (fits)" : "  (not enough alone)") + "\n";
    }
    return out;
  }
  std::size_t name_width = 12;  // live devices have long names ("host:gpu0 (ranks 0,1)")
  for (const DeviceSpec& d : request.devices) name_width = std::max(name_width, d.name.size() + 2);
  out += Pad("device", name_width) + Pad("capacity", 14) + Pad("load", 14) + "units\n";
  // Each device's ranges, in model order: one pass over the ranges, not one per device.
  std::vector<std::string> units_on(request.devices.size());
  for (const ModelPlacement& m : plan.models) {
    for (const UnitRange& r : m.ranges) {
      std::string& units = units_on[r.device];
      if (!units.empty()) units += "; ";
      units += m.name + " " + r.units.front() + (r.units.size() > 1 ? " .. " + r.units.back() : "") + " (" +
               std::to_string(r.units.size()) + " units)";
    }
  }
  for (std::size_t d = 0; d < request.devices.size(); ++d) {
    const std::string& units = units_on[d];
    out += Pad(request.devices[d].name, name_width) +
           Pad(FormatBytes(request.devices[d].capacity_bytes), 14) +
           Pad(FormatBytes(plan.device_loads_bytes[d]), 14) + (units.empty() ? "-" : units) + "\n";
  }
  std::vector<std::uint64_t> usable;
  for (const DeviceSpec& d : request.devices) usable.push_back(d.usable_bytes());
  for (std::size_t i = 0; i < plan.models.size(); ++i) {
    const ModelPlacement& m = plan.models[i];
    if (m.stages.empty()) continue;
    out += m.name + ": 1F1B pipeline, " + std::to_string(request.models[i].options.parallel.micro_batches) +
           " micro-batches; per-stage peaks of the split balancing micro-batch activations:\n" +
           StagesToTable(m.stages, m.unit_names, usable) +
           "  and of the split balancing model states only (weights-only), with the same activations:\n" +
           StagesToTable(m.weights_only_stages, m.unit_names, usable);
  }
  out += "busiest " + FormatBytes(plan.max_load_bytes) + ", lower bound " +
         FormatBytes(plan.lower_bound_bytes) + ", max/lb " + Fixed(plan.max_over_lb, 4) + ", max/even " +
         Fixed(plan.max_over_even, 4) + (plan.exact ? " (optimal)" : "") + ", planned in " +
         Fixed(plan.planning_ms, 3) + " ms\n";
  return out;
}

nlohmann::json EstimateToJson(const ModelSpec& spec, const TrainingOptions& o, const MemoryEstimate& e) {
  const MemoryBreakdown& b = e.breakdown;
  nlohmann::json j;
  j["model"] = spec.name;
  j["family"] = ModelFamilyName(spec.family);
  j["params"] = e.params;
  j["precision"] = PrecisionName(o.precision);
  j["mode"] = RunModeName(o.mode);
  j["head"] = OutputHeadName(e.head);
  j["head_assumed"] = o.head == OutputHead::kDefault;
  j["batch"] = o.batch;
  if (spec.family != ModelFamily::kResNet50) j["seq"] = o.seq;
  if (o.mode == RunMode::kGenerate) j["new_tokens"] = o.new_tokens;
  j["parallel"] = {{"data_ranks", o.parallel.data_ranks},
                   {"sharding", ShardingName(o.parallel.sharding)},
                   {"tensor_ranks", o.parallel.tensor_ranks},
                   {"pipeline_stages", o.parallel.pipeline_stages},
                   {"micro_batches", o.parallel.micro_batches}};
  if (o.mode == RunMode::kTraining) {
    j["optimizer"] = OptimizerName(o.optimizer);
    j["checkpointing"] = o.checkpointing ? "full" : "none";
  }
  j["total_bytes"] = e.total_bytes;
  j["peak_phase"] = e.peak_phase;
  j["forward_backward_bytes"] = e.forward_backward_bytes;
  j["optimizer_step_bytes"] = e.optimizer_step_bytes;
  j["breakdown"] = {{"parameters_bytes", b.parameters_bytes},
                    {"gradients_bytes", b.gradients_bytes},
                    {"optimizer_state_bytes", b.optimizer_state_bytes},
                    {"optimizer_temporaries_bytes", b.optimizer_temporaries_bytes},
                    {"ddp_buckets_bytes", b.ddp_buckets_bytes},
                    {"gathered_params_bytes", b.gathered_params_bytes},
                    {"activations_bytes", b.activations_bytes},
                    {"attention_bytes", b.attention_bytes},
                    {"mlp_bytes", b.mlp_bytes},
                    {"norms_bytes", b.norms_bytes},
                    {"other_activations_bytes", b.other_activations_bytes},
                    {"kv_cache_bytes", b.kv_cache_bytes},
                    {"logits_bytes", b.logits_bytes},
                    {"transient_bytes", b.transient_bytes},
                    {"backward_gradients_bytes", b.backward_gradients_bytes},
                    {"inputs_bytes", b.inputs_bytes},
                    {"workspace_bytes", b.workspace_bytes},
                    {"rounding_bytes", b.rounding_bytes}};
  if (!e.stages.empty()) {
    j["stages"] = StagesJson(e.stages, UnitNames(e.units));
    j["weights_only_stages"] = StagesJson(e.weights_only_stages, UnitNames(e.units));
  }
  j["assumptions"] = e.assumptions;
  return j;
}

std::string EstimateToTable(const ModelSpec& spec, const TrainingOptions& o, const MemoryEstimate& e) {
  const MemoryBreakdown& b = e.breakdown;
  std::string out = spec.name + " (" + std::to_string(e.params) + " parameters), " +
                    std::string(RunModeName(o.mode)) + " " + std::string(PrecisionName(o.precision));
  if (o.mode == RunMode::kTraining) {
    out += ", " + std::string(OptimizerName(o.optimizer)) + ", checkpointing " +
           (o.checkpointing ? "full" : "none");
  }
  out += ", batch " + std::to_string(o.batch);
  if (spec.family != ModelFamily::kResNet50) out += ", seq " + std::to_string(o.seq);
  if (o.mode == RunMode::kGenerate) out += " + " + std::to_string(o.new_tokens) + " new tokens";
  out +=
      "\n  head: " + std::string(OutputHeadName(e.head)) +
      (o.head == OutputHead::kDefault ? " (assumed: the family's pretraining head; --head to change)" : "") +
      "\n";
  const auto row = [&](const std::string& name, std::uint64_t v) {
    out += "  " + Pad(name, 24) + Pad(FormatBytes(v), 12) + FormatBytesBinary(v) + "\n";
  };
  row("parameters", b.parameters_bytes);
  if (o.mode == RunMode::kTraining) {
    row("gradients", b.gradients_bytes);
    row("optimizer state", b.optimizer_state_bytes);
    row("optimizer temporaries", b.optimizer_temporaries_bytes);
    row("activations (saved)", b.activations_bytes);
    row("logits and loss", b.logits_bytes);
  } else {
    row("kv cache", b.kv_cache_bytes);
    row("output logits", b.logits_bytes);
  }
  row("transient", b.transient_bytes);
  if (b.backward_gradients_bytes > 0) row("gradients so far", b.backward_gradients_bytes);
  row("inputs", b.inputs_bytes);
  row("workspace", b.workspace_bytes);
  out += "  " + Pad("peak (" + e.peak_phase + ")", 24) + Pad(FormatBytes(e.total_bytes), 12) +
         FormatBytesBinary(e.total_bytes) + "\n";
  if (o.mode == RunMode::kTraining && e.stages.empty()) {
    out += "  the peak is the larger of forward/backward (" + FormatBytes(e.forward_backward_bytes) +
           ") and the optimizer step (" + FormatBytes(e.optimizer_step_bytes) +
           "), not the sum of the rows\n";
  }
  if (!e.stages.empty()) {
    out += "  1F1B pipeline, " + std::to_string(o.parallel.micro_batches) +
           " micro-batches; split balancing stage peaks with the micro-batches in flight:\n" +
           StagesToTable(e.stages, UnitNames(e.units), {}) +
           "  split balancing model states only (weights-only):\n" +
           StagesToTable(e.weights_only_stages, UnitNames(e.units), {});
  }
  return out;
}

}  // namespace memcoord::planner
