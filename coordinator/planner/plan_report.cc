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

}  // namespace

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
  for (std::size_t d = 0; d < request.devices.size(); ++d) {
    std::string units;
    for (std::size_t i = 0; i < plan.models.size(); ++i) {
      for (const UnitRange& r : plan.models[i].ranges) {
        if (r.device != d) continue;
        if (!units.empty()) units += "; ";
        units += plan.models[i].name + " " + r.units.front() +
                 (r.units.size() > 1 ? " .. " + r.units.back() : "") + " (" + std::to_string(r.units.size()) +
                 " units)";
      }
    }
    out += Pad(request.devices[d].name, name_width) +
           Pad(FormatBytes(request.devices[d].capacity_bytes), 14) +
           Pad(FormatBytes(plan.device_loads_bytes[d]), 14) + (units.empty() ? "-" : units) + "\n";
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
  j["batch"] = o.batch;
  if (spec.family != ModelFamily::kResNet50) j["seq"] = o.seq;
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
                    {"activations_bytes", b.activations_bytes},
                    {"logits_bytes", b.logits_bytes},
                    {"transient_bytes", b.transient_bytes},
                    {"inputs_bytes", b.inputs_bytes},
                    {"workspace_bytes", b.workspace_bytes}};
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
  out += "\n";
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
    row("kv cache", b.activations_bytes);
    row("output logits", b.logits_bytes);
  }
  row("transient", b.transient_bytes);
  row("inputs", b.inputs_bytes);
  row("workspace", b.workspace_bytes);
  out += "  " + Pad("peak (" + e.peak_phase + ")", 24) + Pad(FormatBytes(e.total_bytes), 12) +
         FormatBytesBinary(e.total_bytes) + "\n";
  if (o.mode == RunMode::kTraining) {
    out += "  the peak is the larger of forward/backward (" + FormatBytes(e.forward_backward_bytes) +
           ") and the optimizer step (" + FormatBytes(e.optimizer_step_bytes) +
           "), not the sum of the rows\n";
  }
  return out;
}

}  // namespace memcoord::planner
