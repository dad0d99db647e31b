// memcoord trim --coordinator ADDR [--target BYTES] [--now] [--pool P] [--group G] [--deadline-ms N] [--json]
// A synchronized cache trim: every live rank trims at the end of the same step S (or at once with --now).
// Exit code 0 when every rank acked, 1 for a partial result (the missing ranks are named) or an error.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#include "common/bytes.h"

namespace memcoord::cli {

Subcommand AddTrimCommand(CLI::App& root) {
  struct Args {
    CoordinatorFlags coordinator;
    std::string target = "0";
    bool now = false;
    std::string pool;
    std::string group;
    std::uint32_t deadline_ms = 5000;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand("trim", "release cached memory on every rank at the same step");
  args->coordinator.add_to(app);
  app->add_option("--target", args->target, "trim each pool down to this many reserved bytes (default 0)");
  app->add_flag("--now", args->now, "trim at once instead of at a common step");
  app->add_option("--pool", args->pool, "only this pool");
  app->add_option("--group", args->group, "only the workers of this group");
  app->add_option("--deadline-ms", args->deadline_ms, "give up on silent ranks after this long");
  app->add_flag("--json", args->json, "machine-readable output");
  return {app, [args]() -> int {
#ifdef MEMCOORD_HAVE_COORDINATOR
            auto options = args->coordinator.client_options();
            Result<std::uint64_t> target = ParseBytes(args->target);
            if (!options.ok() || !target.ok()) {
              const Status& bad = options.ok() ? target.status() : options.status();
              std::fprintf(stderr, "memcoord trim: %s\n", bad.ToString().c_str());
              return 2;
            }
            coordinator::CoordinatorClient client(*options);
            coordinator::TrimSpec spec;
            spec.target_bytes = *target;
            spec.now = args->now;
            spec.pool = args->pool;
            spec.deadline = std::chrono::milliseconds(args->deadline_ms);
            Result<coordinator::TrimOutcome> outcome = client.Trim(spec, args->group);
            if (!outcome.ok()) {
              std::fprintf(stderr, "memcoord trim: %s\n", outcome.status().ToString().c_str());
              return ExitCodeFor(outcome.status());
            }
            if (args->json) {
              nlohmann::json acks = nlohmann::json::array();
              for (const auto& a : outcome->acks) {
                acks.push_back({{"rank", a.rank},
                                {"step", a.step},
                                {"released_bytes", a.released_bytes},
                                {"duration_ms", a.duration_ms},
                                {"code", a.code},
                                {"message", a.message}});
              }
              std::cout << nlohmann::json{{"step", outcome->step},
                                          {"now", args->now},
                                          {"complete", outcome->complete},
                                          {"released_bytes", outcome->released_bytes},
                                          {"fanout_ms", outcome->fanout_ms},
                                          {"total_ms", outcome->total_ms},
                                          {"missing_ranks", outcome->missing_ranks},
                                          {"acks", acks}}
                               .dump(2)
                        << std::endl;
            } else {
              std::cout << (args->now ? std::string("trimmed now")
                                      : fmt::format("trimmed at the end of step {}", outcome->step))
                        << fmt::format(": released {} on {} ranks in {:.1f} ms\n",
                                       FormatBytes(outcome->released_bytes), outcome->acks.size(),
                                       outcome->total_ms);
              for (const auto& a : outcome->acks) {
                std::cout << fmt::format("  rank {:>4}: step {:>8}  released {:>12}  {:.2f} ms{}\n", a.rank,
                                         a.step, FormatBytes(a.released_bytes), a.duration_ms,
                                         a.code == 0 ? std::string() : "  error: " + a.message);
              }
              if (!outcome->complete) {
                std::string missing;
                for (int r : outcome->missing_ranks)
                  missing += (missing.empty() ? "" : ", ") + std::to_string(r);
                std::cout << "partial: no ack from ranks " << missing << " before the deadline\n";
              }
            }
            return outcome->complete ? 0 : 1;
#else
            std::fprintf(stderr, "memcoord trim: this build has no gRPC\n");
            return 1;
#endif
          }};
}

}  // namespace memcoord::cli
