// memcoord trim --coordinator ADDR [--target BYTES] [--now] [--pool P] [--group G] [--deadline-ms N] [--json]
// A synchronized cache trim: every live rank should trim at the end of the same step S (or at once with
// --now). S is a prediction, so the output reports what happened: the step each rank trimmed at, and, when
// not every rank trimmed at S, which ranks did, which were late (and where), which failed and which never
// answered. Exit code 0 only when every rank trimmed at S (with --now: every rank acked OK), 1 otherwise
// or on an error. Without --deadline-ms the coordinator scales the deadline with the slowest rank's step.
//
// Human output, complete: "trimmed at the end of step 42: released 96.0 MiB on 4 ranks in 30.1 ms (deadline
// 5000 ms)" and a line per rank. A late rank:
//   NOT synchronized: asked for the end of step 42; trimmed there: ranks 0, 1, 3; late: rank 2 at step 44
//   released 96.0 MiB on 4 ranks in 812.4 ms (deadline 5000 ms)
//     rank    2: step       44  released      32.0 MiB  1.20 ms  late by 2 steps
// --json: {"step": 42, "now": false, "complete": false, "ranks_at_step": [0, 1, 3],
//          "late_ranks": [{"rank": 2, "step": 44}], "failed_ranks": [], "missing_ranks": [],
//          "deadline_ms": 5000, "released_bytes": ..., "fanout_ms": ..., "total_ms": ...,
//          "acks": [{"rank": 0, "step": 42, "at_step": true, "released_bytes": ..., ...}, ...]}
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#include "cli/name_flags.h"
#include "common/bytes.h"
#ifdef MEMCOORD_HAVE_COORDINATOR
#include "coordinator/service/saturating.h"
#endif

namespace memcoord::cli {

#ifdef MEMCOORD_HAVE_COORDINATOR
namespace {

using coordinator::RankAck;
using coordinator::TrimOutcome;

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

const RankAck* AckOf(const TrimOutcome& outcome, int rank) {
  for (const RankAck& a : outcome.acks) {
    if (a.rank == rank) return &a;
  }
  return nullptr;
}

bool AtStep(const TrimOutcome& outcome, const RankAck& a) {
  return a.code == 0 && (outcome.step < 0 || a.step == outcome.step);
}

nlohmann::json TrimJson(const TrimOutcome& outcome) {
  nlohmann::json acks = nlohmann::json::array(), at_step = nlohmann::json::array(),
                 late = nlohmann::json::array(), failed = nlohmann::json::array();
  for (const RankAck& a : outcome.acks) {
    acks.push_back({{"rank", a.rank},
                    {"step", a.step},
                    {"at_step", AtStep(outcome, a)},
                    {"released_bytes", a.released_bytes},
                    {"duration_ms", a.duration_ms},
                    {"code", a.code},
                    {"message", a.message}});
    if (AtStep(outcome, a)) at_step.push_back(a.rank);
  }
  for (int r : outcome.late_ranks) late.push_back({{"rank", r}, {"step", AckOf(outcome, r)->step}});
  for (int r : outcome.failed_ranks) {
    failed.push_back(
        {{"rank", r}, {"code", AckOf(outcome, r)->code}, {"message", AckOf(outcome, r)->message}});
  }
  return {{"step", outcome.step},
          {"now", outcome.step < 0},
          {"complete", outcome.complete},
          {"ranks_at_step", at_step},
          {"late_ranks", late},
          {"failed_ranks", failed},
          {"missing_ranks", outcome.missing_ranks},
          {"deadline_ms", outcome.deadline.count()},
          {"released_bytes", outcome.released_bytes},
          {"fanout_ms", outcome.fanout_ms},
          {"total_ms", outcome.total_ms},
          {"acks", acks}};
}

// The headline of a trim that was not complete: what happened, never just what was asked.
std::string Headline(const TrimOutcome& outcome) {
  const bool now = outcome.step < 0;
  std::vector<int> at_step;
  for (const RankAck& a : outcome.acks) {
    if (AtStep(outcome, a)) at_step.push_back(a.rank);
  }
  std::string text = now ? std::string("partial: asked to trim now")
                         : fmt::format("NOT synchronized: asked for the end of step {}", outcome.step);
  text += at_step.empty() ? std::string("; no rank trimmed there")
                          : fmt::format("; trimmed{}: ranks {}", now ? "" : " there", RankList(at_step));
  if (!outcome.late_ranks.empty()) {
    std::string late;
    for (int r : outcome.late_ranks) {
      late += fmt::format("{}rank {} at step {}", late.empty() ? "" : ", ", r, AckOf(outcome, r)->step);
    }
    text += "; late: " + late;
  }
  if (!outcome.failed_ranks.empty()) text += "; failed: ranks " + RankList(outcome.failed_ranks);
  if (!outcome.missing_ranks.empty()) {
    text += fmt::format("; no ack before the deadline: ranks {}", RankList(outcome.missing_ranks));
  }
  return text;
}

std::string TrimText(const TrimOutcome& outcome) {
  // Complete: one line, "trimmed at the end of step S: released X on N ranks in T ms" (scripts match it).
  const std::string totals = fmt::format("released {} on {} ranks in {:.1f} ms (deadline {} ms)",
                                         FormatBytes(outcome.released_bytes), outcome.acks.size(),
                                         outcome.total_ms, outcome.deadline.count());
  const std::string where = outcome.step < 0 ? std::string("trimmed now")
                                             : fmt::format("trimmed at the end of step {}", outcome.step);
  std::string out =
      outcome.complete ? where + ": " + totals + "\n" : Headline(outcome) + "\n" + totals + "\n";
  for (const RankAck& a : outcome.acks) {
    std::string note;
    if (a.code != 0) {
      note = "  error: " + a.message;
    } else if (!AtStep(outcome, a)) {
      note = a.step > outcome.step
                 ? fmt::format("  late by {} steps", coordinator::SatAdd(a.step, -outcome.step))
                 : fmt::format("  not at step {}", outcome.step);
    }
    out += fmt::format("  rank {:>4}: step {:>8}  released {:>12}  {:.2f} ms{}\n", a.rank, a.step,
                       FormatBytes(a.released_bytes), a.duration_ms, note);
  }
  return out;
}

}  // namespace
#endif

Subcommand AddTrimCommand(CLI::App& root) {
  struct Args {
    CoordinatorFlags coordinator;
    std::string target = "0";
    bool now = false;
    std::string pool;
    std::string group;
    std::uint32_t deadline_ms = 0;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand("trim", "release cached memory on every rank at the same step");
  args->coordinator.add_to(app);
  app->add_option("--target", args->target, "trim each pool down to this many reserved bytes (default 0)");
  app->add_flag("--now", args->now, "trim at once instead of at a common step");
  app->add_option("--pool", args->pool, "only this pool")->check(NameCheck("pool name"));
  app->add_option("--group", args->group, "only the workers of this group")->check(NameCheck("group name"));
  app->add_option("--deadline-ms", args->deadline_ms,
                  "give up on silent ranks after this long (default: scaled with the slowest rank's step "
                  "time, at least 5000)");
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
            coordinator::JudgeTrim(*outcome);  // late and failed ranks, also from an older coordinator
            if (args->json) {
              std::cout << TrimJson(*outcome).dump(2) << std::endl;
            } else {
              std::cout << TrimText(*outcome);
            }
            return outcome->complete ? 0 : 1;
#else
            std::fprintf(stderr, "memcoord trim: this build has no gRPC\n");
            return 1;
#endif
          }};
}

}  // namespace memcoord::cli
