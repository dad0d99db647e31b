// memcoord plan FILE.json [--json] [--coordinator ADDR [--admin-token-file F]]
// Places one model's layers (or several whole models) on devices: per-model placements, per-device loads,
// the lower bound and max_over_lb, planning time. An infeasible plan says why and what would make it fit.
// Offline by default (the file's "devices"). With --coordinator the coordinator plans instead: on the live
// devices' measured free memory when the file has no "devices" (listed after the plan: JSON key
// "live_devices"), on the file's devices otherwise. $MEMCOORD_COORDINATOR is never used implicitly here.
// Exit codes: 0 placed, 1 infeasible or the coordinator failed or is unreachable, 2 bad usage or input
// (the message names the field).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#include "common/bytes.h"
#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_report.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::cli {
namespace {

struct PlanArgs {
  std::string file;
  bool json = false;
  std::string coordinator;
  CoordinatorFlags tokens;  // --token-file, --admin-token-file (the Plan RPC needs the admin token)
  bool token_flag_given = false;
};

int RunOffline(const PlanArgs& args) {
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

#ifdef MEMCOORD_HAVE_COORDINATOR
nlohmann::json LiveDevicesJson(const std::vector<coordinator::LiveDevice>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const coordinator::LiveDevice& d : devices) {
    out.push_back({{"name", d.name},
                   {"host", d.host},
                   {"device", d.device},
                   {"ranks", d.ranks},
                   {"free_bytes", d.free_bytes},
                   {"cached_bytes", d.cached_bytes},
                   {"capacity_bytes", d.capacity_bytes},
                   {"total_bytes", d.total_bytes}});
  }
  return out;
}

int RunRemote(const PlanArgs& args) {
  std::ifstream in(args.file);
  if (!in) {
    std::fprintf(stderr, "memcoord plan: cannot read plan file \"%s\"\n", args.file.c_str());
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  CoordinatorFlags flags = args.tokens;
  flags.address = args.coordinator;
  Result<coordinator::ClientOptions> options = flags.client_options();
  if (!options.ok()) {
    std::fprintf(stderr, "memcoord plan: %s\n", options.status().message().c_str());
    return 2;
  }
  coordinator::CoordinatorClient client(*options);
  Result<coordinator::RemotePlan> plan = client.Plan(text.str());
  if (!plan.ok()) {
    std::fprintf(stderr, "memcoord plan: plan file \"%s\": %s\n", args.file.c_str(),
                 plan.status().ToString().c_str());
    return ExitCodeFor(plan.status());
  }
  if (args.json) {
    nlohmann::json j = nlohmann::json::parse(plan->plan_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      std::fprintf(stderr, "memcoord plan: the coordinator sent a plan that is not a JSON object\n");
      return 1;
    }
    if (!plan->devices.empty()) j["live_devices"] = LiveDevicesJson(plan->devices);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", plan->plan_table.c_str());
    if (!plan->devices.empty()) std::printf("live devices (capacity = measured free memory):\n");
    for (const coordinator::LiveDevice& d : plan->devices) {
      std::printf("  %-32s free %-12s cached %-12s (a trim could free it) total %s\n", d.name.c_str(),
                  FormatBytes(d.free_bytes).c_str(), FormatBytes(d.cached_bytes).c_str(),
                  FormatBytes(d.total_bytes).c_str());
    }
  }
  if (!plan->feasible) {
    std::fprintf(stderr, "memcoord plan: infeasible: %s\n", plan->reason.c_str());
    return 1;
  }
  return 0;
}
#endif

int RunPlan(const PlanArgs& args) {
  if (args.coordinator.empty()) {
    if (args.token_flag_given) {
      std::fprintf(stderr, "memcoord plan: --token-file and --admin-token-file need --coordinator ADDR\n");
      return 2;
    }
    return RunOffline(args);
  }
#ifdef MEMCOORD_HAVE_COORDINATOR
  return RunRemote(args);
#else
  std::fprintf(stderr, "memcoord plan: --coordinator: this memcoord was built without gRPC\n");
  return 2;
#endif
}

}  // namespace

Subcommand AddPlanCommand(CLI::App& root) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* app = root.add_subcommand("plan", "Place models or model layers onto devices");
  app->add_option("file", args->file, "Plan request (JSON): {\"devices\": ..., \"models\": [...]}")
      ->required();
  app->add_flag("--json", args->json, "Machine-readable JSON (bytes as integers)");
  app->add_option("--coordinator", args->coordinator,
                  "plan on this coordinator's live devices (HOST:PORT); \"devices\" becomes optional");
  args->tokens.read_token_variables();
  args->tokens.add_token_options(app);
  return {app, [args, app] {
            args->token_flag_given = app->count("--token-file") + app->count("--admin-token-file") > 0;
            return RunPlan(*args);
          }};
}

}  // namespace memcoord::cli
