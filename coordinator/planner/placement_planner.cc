#include "coordinator/planner/placement_planner.h"

#include <algorithm>
#include <chrono>

#include "common/bytes.h"
#include "coordinator/planner/contiguous_split.h"
#include "coordinator/planner/limits.h"
#include "coordinator/planner/model_packing.h"

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

// The placement without advice. Infeasible plans come back with feasible == false and a reason.
Result<Plan> Place(const PlanRequest& request) {
  Plan plan;
  const std::size_t n_devices = request.devices.size();
  std::vector<std::uint64_t> usable(n_devices);
  for (std::size_t j = 0; j < n_devices; ++j) usable[j] = request.devices[j].usable_bytes();
  const std::uint64_t usable_total = Sum(usable);
  std::vector<std::uint64_t> loads(n_devices, 0);

  std::vector<MemoryEstimate> estimates;
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    const ModelRequest& m = request.models[i];
    Result<MemoryEstimate> e = EstimateMemory(m.spec, m.options);
    if (!e.ok()) return e.status().WithContext("models[" + std::to_string(i) + "] (" + m.name + "): ");
    estimates.push_back(*std::move(e));
    plan.models.push_back({m.name, estimates.back().total_bytes, {}});
  }
  // A model larger than every device together can never fit: say so before any search.
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    const MemoryEstimate& e = estimates[i];
    std::uint64_t need = e.total_bytes;
    if (request.models[i].split == SplitKind::kLayers) {
      need = 0;
      for (const UnitMemory& u : e.units) need += u.bytes;
    }
    if (need > usable_total) {
      plan.reason = "models[" + std::to_string(i) + "] (" + Describe(request.models[i]) + ") needs " +
                    FormatBytes(need) + ", more than all " + std::to_string(n_devices) +
                    " devices together (" + FormatBytes(usable_total) + " usable)";
      return plan;
    }
  }

  // Whole models first.
  std::vector<std::size_t> whole;
  std::vector<std::uint64_t> whole_items;
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    if (request.models[i].split == SplitKind::kWhole) {
      whole.push_back(i);
      whole_items.push_back(estimates[i].total_bytes);
    }
  }
  const std::uint64_t largest_device = *std::max_element(usable.begin(), usable.end());
  for (std::size_t k = 0; k < whole.size(); ++k) {
    if (whole_items[k] > largest_device) {
      plan.reason = "models[" + std::to_string(whole[k]) + "] (" + Describe(request.models[whole[k]]) +
                    ") is placed whole and needs " + FormatBytes(whole_items[k]) +
                    ", more than the largest device (" + FormatBytes(largest_device) +
                    " usable); \"split\": \"layers\" spreads it over several";
      return plan;
    }
  }
  bool exact = true;
  if (!whole.empty()) {
    Result<Packing> packing = PackWhole(whole_items, usable);
    if (!packing.ok()) {
      plan.reason = "whole models do not fit: " + packing.status().message();
      return plan;
    }
    exact = packing->exact;
    for (std::size_t k = 0; k < whole.size(); ++k) {
      const std::size_t i = whole[k];
      UnitRange r;
      r.device = packing->device_of[k];
      r.first_unit = 0;
      r.last_unit = estimates[i].units.size() - 1;
      for (const UnitMemory& u : estimates[i].units) r.units.push_back(u.name);
      r.bytes = whole_items[k];
      plan.models[i].ranges.push_back(std::move(r));
    }
    loads = packing->loads;
  }

  // Then each layer-split model, optimally over what is left.
  std::size_t chains = 0;
  std::uint64_t chain_lower_bound = 0;
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    if (request.models[i].split != SplitKind::kLayers) continue;
    ++chains;
    const MemoryEstimate& e = estimates[i];
    const Chain chain = BuildChain(e);
    const std::uint64_t overhead = e.per_device_overhead_bytes;
    std::vector<std::uint64_t> caps(n_devices);
    for (std::size_t j = 0; j < n_devices; ++j) caps[j] = usable[j] > overhead ? usable[j] - overhead : 0;
    Result<ChainSplit> split = SplitChain(chain.items, caps, loads);
    if (!split.ok()) {
      plan.reason = "models[" + std::to_string(i) + "] (" + Describe(request.models[i]) +
                    "): " + split.status().message() +
                    (overhead > 0 ? " (each device also needs " + FormatBytes(overhead) +
                                        " of workspace and transients)"
                                  : "");
      return plan;
    }
    chain_lower_bound = ChainLowerBound(chain.items, caps) + overhead;
    for (std::size_t j = 0; j < n_devices; ++j) {
      const std::size_t a = split->first[j];
      const std::size_t b = split->first[j + 1];
      if (a == b) continue;
      UnitRange r;
      r.device = j;
      r.first_unit = chain.unit_of_item[a];
      r.last_unit = b < chain.unit_of_item.size() ? chain.unit_of_item[b] - 1 : e.units.size() - 1;
      while (r.last_unit > r.first_unit && e.units[r.last_unit].tied_to)
        --r.last_unit;  // followers listed below
      for (std::size_t item = a; item < b; ++item) {
        const std::size_t u = chain.unit_of_item[item];
        r.units.push_back(e.units[u].name);
        r.bytes += chain.items[item];
        for (std::size_t f : chain.followers[item])
          r.units.push_back(e.units[f].name + " (tied to " + e.units[u].name + ")");
      }
      r.bytes += overhead;
      loads[j] += r.bytes;
      plan.models[i].ranges.push_back(std::move(r));
    }
  }

  plan.feasible = true;
  plan.device_loads_bytes = loads;
  plan.max_load_bytes = *std::max_element(loads.begin(), loads.end());
  if (chains == 1 && whole.empty()) {
    plan.lower_bound_bytes = chain_lower_bound;
    plan.exact = true;
  } else {
    std::vector<std::uint64_t> atoms = whole_items;
    for (std::size_t i = 0; i < request.models.size(); ++i) {
      if (request.models[i].split != SplitKind::kLayers) continue;
      for (std::uint64_t x : BuildChain(estimates[i]).items) atoms.push_back(x);
    }
    plan.lower_bound_bytes = ChainLowerBound(atoms, usable);
    plan.exact = chains == 0 && exact;
  }
  const std::uint64_t total = Sum(loads);
  plan.max_over_lb = plan.lower_bound_bytes > 0 ? static_cast<double>(plan.max_load_bytes) /
                                                      static_cast<double>(plan.lower_bound_bytes)
                                                : 1.0;
  plan.max_over_even = total > 0 ? static_cast<double>(plan.max_load_bytes) * static_cast<double>(n_devices) /
                                       static_cast<double>(total)
                                 : 1.0;
  return plan;
}

// The parser's limits again, for requests built in memory (the Plan RPC fills devices from workers' reports).
Status CheckRequest(const PlanRequest& request) {
  if (request.devices.empty()) return InvalidArgument("devices: at least one device is required");
  if (request.models.empty()) return InvalidArgument("models: at least one model is required");
  MEMCOORD_RETURN_IF_ERROR(CheckModelCount(request.models.size()));
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
  MEMCOORD_ASSIGN_OR_RETURN(Plan plan, Place(request));
  if (!plan.feasible) {
    plan.suggestions = SuggestFits(request, [](const PlanRequest& trial) {
      Result<Plan> p = Place(trial);
      return p.ok() && p->feasible;
    });
  }
  plan.planning_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace memcoord::planner
