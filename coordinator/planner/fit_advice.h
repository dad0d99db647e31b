// FitAdvice: when a plan does not fit, what would — a lower precision, activation checkpointing, a smaller
// batch, splitting a whole model by layers, more devices — each with the bytes it saves (or the capacity it
// adds) and whether it alone makes the plan feasible. `fits` decides feasibility (the planner passes its own
// placement routine), so the advice is checked against the same algorithm that failed. Only the
// kAdvisedModels largest models are advised on (a plan may hold 1,024 models; each suggestion costs one to
// 25 calls of `fits`), so the advice costs at most about 4 × 29 + 26 placements. Deterministic; thread-safe
// if `fits` is.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/planner/plan_request.h"

namespace memcoord::planner {

struct FitSuggestion {
  std::string change;                     // "models[0] (llama2-7b): precision bf16"
  std::uint64_t saves_bytes = 0;          // drop in that model's estimated bytes
  std::uint64_t adds_capacity_bytes = 0;  // for "more devices"
  bool fits = false;                      // this change alone makes the plan feasible
};

// Whether `trial` is feasible. `changed_model`: the one model the trial changed against the request
// (precision, checkpointing, batch or split), or nullopt when it only added devices; everything else is as
// in the request, so the caller may reuse what it computed for the request (the planner reuses estimates).
using FitsFunction = std::function<bool(const PlanRequest& trial, std::optional<std::size_t> changed_model)>;

inline constexpr std::size_t kAdvisedModels = 4;

std::vector<FitSuggestion> SuggestFits(const PlanRequest& request, const FitsFunction& fits);

}  // namespace memcoord::planner
