// planner_bench: how fast the planner is and how balanced its plans are.
//   - SplitChain on random layer chains: 100 layers × 8 devices (target ≤ 1 ms) and 10,000 layers ×
//     1,024 devices (target ≤ 100 ms), equal and unequal capacities; median of repeated runs;
//   - PackWhole: 12 models × 3 devices (exact search) and 200 models × 16 devices (heuristic);
//   - MakePlan on the weights-only cases Accelerate's balanced map was measured on: busiest ÷ even split.
// Prints one JSON object. Usage: planner_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "coordinator/planner/contiguous_split.h"
#include "coordinator/planner/model_packing.h"
#include "coordinator/planner/placement_planner.h"

namespace {

using memcoord::planner::MakePlan;
using memcoord::planner::PackWhole;
using memcoord::planner::ParsePlanRequest;
using memcoord::planner::SplitChain;

// Median wall time of `reps` calls, in milliseconds.
double MedianMs(int reps, const std::function<void()>& body) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Random layer sizes around 200 MB (±50%); equal capacities leave ~25% headroom, unequal ones bind.
nlohmann::json ChainCase(std::size_t layers, std::size_t devices, bool unequal, int reps) {
  std::mt19937_64 rng(layers * 31 + devices);
  std::vector<std::uint64_t> items(layers);
  std::uint64_t total = 0;
  for (auto& w : items) total += (w = 100'000'000 + rng() % 200'000'000);
  std::vector<std::uint64_t> caps(devices, total / devices * 5 / 4 + 400'000'000);
  if (unequal) {  // binding: every other device holds 85% of an even share, the others 130%
    for (std::size_t j = 0; j < devices; ++j) caps[j] = total / devices * (j % 2 == 0 ? 85 : 130) / 100;
  }
  std::uint64_t bottleneck = 0;
  const double ms = MedianMs(reps, [&] {
    auto split = SplitChain(items, caps);
    bottleneck = split.ok() ? split->bottleneck_bytes : 0;
  });
  const std::uint64_t lb = memcoord::planner::ChainLowerBound(items, caps);
  return {{"layers", layers},
          {"devices", devices},
          {"capacities", unequal ? "unequal" : "equal"},
          {"median_ms", ms},
          {"reps", reps},
          {"bottleneck_bytes", bottleneck},
          {"lower_bound_bytes", lb},
          {"max_over_lb", static_cast<double>(bottleneck) / static_cast<double>(lb)}};
}

nlohmann::json PackCase(std::size_t models, std::size_t devices, int reps) {
  std::mt19937_64 rng(models * 17 + devices);
  std::vector<std::uint64_t> items(models);
  std::uint64_t total = 0;
  for (auto& w : items) total += (w = 1'000'000'000 + rng() % 9'000'000'000);
  const std::vector<std::uint64_t> caps(devices, 80'000'000'000);
  std::uint64_t bottleneck = 0;
  bool exact = false;
  const double ms = MedianMs(reps, [&] {
    auto packing = PackWhole(items, caps);
    bottleneck = packing.ok() ? packing->bottleneck_bytes : 0;
    exact = packing.ok() && packing->exact;
  });
  const double even = static_cast<double>(total) / static_cast<double>(devices);
  return {{"models", models},
          {"devices", devices},
          {"median_ms", ms},
          {"exact", exact},
          {"max_over_even", static_cast<double>(bottleneck) / even}};
}

struct AccelerateCase {
  const char* preset;
  const char* precision;
  int devices;
  const char* capacity;
  double accelerate;
};

// A plan request parsed, then MakePlan timed on it: the median and the last plan.
struct TimedPlan {
  memcoord::planner::Plan plan;
  double median_ms = 0;
};

memcoord::Result<TimedPlan> TimeMakePlan(const std::string& request_json, int reps) {
  auto request = ParsePlanRequest(request_json);
  if (!request.ok()) return request.status();
  TimedPlan timed;
  timed.median_ms = MedianMs(reps, [&] {
    auto p = MakePlan(*request);
    if (p.ok()) timed.plan = *p;
  });
  return timed;
}

nlohmann::json SplitChainCases(bool quick) {
  return nlohmann::json::array({
      ChainCase(100, 8, false, quick ? 100 : 2000),
      ChainCase(100, 8, true, quick ? 100 : 2000),
      ChainCase(10'000, 1'024, false, quick ? 5 : 51),
      ChainCase(10'000, 1'024, true, quick ? 5 : 51),
  });
}

nlohmann::json PackWholeCases(bool quick) {
  return nlohmann::json::array({PackCase(12, 3, quick ? 3 : 21), PackCase(200, 16, quick ? 3 : 21)});
}

// MakePlan on the weights-only cases Accelerate's balanced map was measured on.
memcoord::Result<nlohmann::json> AccelerateComparison(bool quick) {
  const AccelerateCase cases[] = {
      {"gpt2", "fp32", 3, "24GB", 1.196},       {"gpt2-xl", "fp32", 3, "24GB", 1.066},
      {"llama2-7b", "bf16", 3, "24GB", 1.081},  {"llama2-13b", "bf16", 4, "24GB", 1.072},
      {"llama2-70b", "bf16", 8, "80GB", 1.092}, {"mixtral-8x7b", "bf16", 4, "80GB", 1.119},
  };
  nlohmann::json accelerate = nlohmann::json::array();
  for (const AccelerateCase& c : cases) {
    const std::string json = std::string(R"({"devices": {"count": )") + std::to_string(c.devices) +
                             R"(, "capacity": ")" + c.capacity + R"("}, "models": [{"preset": ")" + c.preset +
                             R"(", "precision": ")" + c.precision +
                             R"(", "mode": "inference", "split": "layers"}]})";
    MEMCOORD_ASSIGN_OR_RETURN(const TimedPlan timed, TimeMakePlan(json, quick ? 5 : 101));
    const memcoord::planner::Plan& plan = timed.plan;
    accelerate.push_back({{"model", c.preset},
                          {"precision", c.precision},
                          {"devices", c.devices},
                          {"capacity", c.capacity},
                          {"max_over_even", plan.max_over_even},
                          {"accelerate_max_over_even", c.accelerate},
                          {"max_over_lb", plan.max_over_lb},
                          {"device_loads_bytes", plan.device_loads_bytes},
                          {"optimal_contiguous", plan.exact},
                          {"make_plan_median_ms", timed.median_ms}});
  }
  return accelerate;
}

// Whole MakePlan calls (parse result to plan: estimator, units, split, lower bound) on spec models.
memcoord::Result<nlohmann::json> WholeMakePlanCases(bool quick) {
  nlohmann::json whole_plans = nlohmann::json::array();
  for (const auto& [layers, devices] : {std::pair<int, int>{100, 8}, std::pair<int, int>{10'000, 1'024}}) {
    const std::string json =
        std::string(R"({"devices": {"count": )") + std::to_string(devices) +
        R"(, "capacity": "80GB"}, "models": [{"spec": {"family": "llama", "hidden": 8192, "layers": )" +
        std::to_string(layers) +
        R"(, "heads": 64, "kv_heads": 8, "ffn": 28672, "vocab": 32000}, "precision": "bf16",
                             "mode": "inference", "split": "layers"}]})";
    MEMCOORD_ASSIGN_OR_RETURN(const TimedPlan timed,
                              TimeMakePlan(json, quick ? 3 : (layers > 1000 ? 21 : 201)));
    whole_plans.push_back({{"layers", layers},
                           {"devices", devices},
                           {"median_ms", timed.median_ms},
                           {"feasible", timed.plan.feasible},
                           {"max_over_lb", timed.plan.max_over_lb}});
  }
  return whole_plans;
}

int Fail(const memcoord::Status& status) {
  std::fprintf(stderr, "planner_bench: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  nlohmann::json out;
  out["split_chain"] = SplitChainCases(quick);
  out["pack_whole"] = PackWholeCases(quick);
  memcoord::Result<nlohmann::json> accelerate = AccelerateComparison(quick);
  if (!accelerate.ok()) return Fail(accelerate.status());
  out["weights_only_vs_accelerate"] = *accelerate;
  memcoord::Result<nlohmann::json> whole_plans = WholeMakePlanCases(quick);
  if (!whole_plans.ok()) return Fail(whole_plans.status());
  out["make_plan"] = *whole_plans;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
