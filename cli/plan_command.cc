// memcoord plan FILE.json [--json]
// Places one model's layers (or several whole models) on devices: per-model placements, per-device loads,
// the lower bound and max_over_lb, planning time. An infeasible plan says why and what would make it fit.
// Exit codes: 0 placed, 1 infeasible, 2 bad usage or input (the message names the field).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_report.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::cli {
namespace {

struct PlanArgs {
  std::string file;
  bool json = false;
};

int RunPlan(const PlanArgs& args) {
  Result<planner::PlanRequest> request = planner::LoadPlanRequest(args.file);
  if (!request.ok()) {
    std::fprintf(stderr, "memcoord plan: %s\n", request.status().message().c_str());
    return 2;
  }
  Result<planner::Plan> plan = planner::MakePlan(*request);
  if (!plan.ok()) {
    std::fprintf(stderr, "memcoord plan: %s\n", plan.status().message().c_str());
    return 2;
  }
  if (args.json) {
    std::printf("%s\n", planner::PlanToJson(*request, *plan).dump(2).c_str());
  } else {
    std::printf("%s", planner::PlanToTable(*request, *plan).c_str());
  }
  if (!plan->feasible) {
    std::fprintf(stderr, "memcoord plan: infeasible: %s\n", plan->reason.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

Subcommand AddPlanCommand(CLI::App& root) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* app = root.add_subcommand("plan", "Place models or model layers onto devices");
  app->add_option("file", args->file, "Plan request (JSON): {\"devices\": ..., \"models\": [...]}")
      ->required();
  app->add_flag("--json", args->json, "Machine-readable JSON (bytes as integers)");
  return {app, [args] { return RunPlan(*args); }};
}

}  // namespace memcoord::cli
