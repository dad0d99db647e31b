// memcoord quota set --coordinator ADDR --rank R [--pool P] LIMIT [--json]
// With --pool: that pool's quota on rank R (0 removes it). Without: the budget of rank R's device, which the
// coordinator splits between every pool on that device and rebalances under pressure.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#include "cli/name_flags.h"
#include "common/bytes.h"

namespace memcoord::cli {

Subcommand AddQuotaCommand(CLI::App& root) {
  struct Args {
    CoordinatorFlags coordinator;
    int rank = -1;
    std::string pool;
    std::string limit;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand("quota", "pool quotas and device budgets");
  app->require_subcommand(1);
  CLI::App* set = app->add_subcommand("set", "set a pool quota or a device budget");
  args->coordinator.add_to(set);
  set->add_option("--rank", args->rank, "the worker's rank")->required();
  set->add_option("--pool", args->pool, "the pool (default: the device budget, split between its pools)")
      ->check(NameCheck("pool name"));
  set->add_option("limit", args->limit, "bytes: 123, 4KiB, 2GiB, 80GB; 0 removes it")->required();
  set->add_flag("--json", args->json, "machine-readable output");
  return {app, [args]() -> int {
#ifdef MEMCOORD_HAVE_COORDINATOR
            auto options = args->coordinator.client_options();
            Result<std::uint64_t> limit = ParseBytes(args->limit);
            if (!options.ok() || !limit.ok()) {
              const Status& bad = options.ok() ? limit.status() : options.status();
              std::fprintf(stderr, "memcoord quota set: %s\n", bad.ToString().c_str());
              return 2;
            }
            if (*limit > static_cast<std::uint64_t>(INT64_MAX)) {
              std::fprintf(stderr, "memcoord quota set: limit %s is absurd\n", args->limit.c_str());
              return 2;
            }
            coordinator::CoordinatorClient client(*options);
            auto assigned = client.SetQuota(args->rank, args->pool, static_cast<std::int64_t>(*limit));
            if (!assigned.ok()) {
              std::fprintf(stderr, "memcoord quota set: %s\n", assigned.status().ToString().c_str());
              return ExitCodeFor(assigned.status());
            }
            if (args->json) {
              nlohmann::json out = nlohmann::json::array();
              for (const auto& a : *assigned) {
                out.push_back({{"rank", a.rank}, {"pool", a.pool}, {"limit_bytes", a.limit_bytes}});
              }
              std::cout << nlohmann::json{{"assignments", out}}.dump(2) << std::endl;
            } else {
              for (const auto& a : *assigned) {
                std::cout << fmt::format("rank {} pool '{}': limit {}\n", a.rank, a.pool,
                                         a.limit_bytes ? FormatBytes(a.limit_bytes) : std::string("none"));
              }
            }
            return 0;
#else
            std::fprintf(stderr, "memcoord quota: this build has no gRPC\n");
            return 1;
#endif
          }};
}

}  // namespace memcoord::cli
