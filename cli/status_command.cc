// memcoord status --coordinator ADDR [--json] [--watch [--interval-ms N]]
// Every worker's pools in a table like nvidia-smi's (rank, host, device, pool, allocated, reserved, peak,
// limit, step, state: live, suspect (missed 3 report intervals; it may come back) or dead), then leak
// alerts. --json prints one machine-first object (bytes as integers);
// --watch is a live terminal view redrawn in place from the coordinator's Watch stream: per-rank memory bars
// and the latest events (cli/watch_view.h); with --json, one JSON object per line instead.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#include "common/bytes.h"
#ifdef MEMCOORD_HAVE_COORDINATOR
#include "cli/watch_view.h"
#include "coordinator/http/cluster_events.h"
#include "coordinator/service/cluster_json.h"
#endif

namespace memcoord::cli {

#ifdef MEMCOORD_HAVE_COORDINATOR
namespace {

using coordinator::ClusterView;
using coordinator::PoolUsage;
using coordinator::WorkerRecord;
using coordinator::WorkerState;

// The fields scripts read (cluster_json.h keeps their text unchanged).
nlohmann::json ToJson(const ClusterView& view) {
  return coordinator::ClusterViewJson(view, coordinator::ClusterJsonFields::kStatus);
}

// "live"; "suspect: no report for 450 ms" (it may come back); "dead: <reason>".
std::string StateText(const WorkerRecord& w) {
  switch (w.state) {
    case WorkerState::kLive:
      return "live";
    case WorkerState::kSuspect:
      return fmt::format("suspect: no report for {} ms", w.last_report_age_ms);
    case WorkerState::kDead:
      return "dead: " + w.dead_reason;
  }
  return "unknown";
}

std::string Table(const ClusterView& view) {
  std::string out =
      fmt::format("{:>5} {:<16} {:>6} {:<12} {:>12} {:>12} {:>12} {:>12} {:>8} {}\n", "RANK", "HOST",
                  "DEVICE", "POOL", "ALLOCATED", "RESERVED", "PEAK", "LIMIT", "STEP", "STATE");
  for (const WorkerRecord& w : view.workers) {
    const std::string device = w.id.device < 0 ? std::string("host") : std::to_string(w.id.device);
    const std::string state = StateText(w);
    if (w.pools.empty()) {
      out += fmt::format("{:>5} {:<16} {:>6} {:<12} {:>12} {:>12} {:>12} {:>12} {:>8} {}\n", w.id.rank,
                         w.id.host, device, "-", "-", "-", "-", "-", w.step, state);
    }
    for (const PoolUsage& p : w.pools) {
      out += fmt::format("{:>5} {:<16} {:>6} {:<12} {:>12} {:>12} {:>12} {:>12} {:>8} {}\n", w.id.rank,
                         w.id.host, device, p.name, FormatBytes(p.allocated_bytes),
                         FormatBytes(p.reserved_bytes), FormatBytes(p.peak_reserved_bytes),
                         p.limit_bytes ? FormatBytes(p.limit_bytes) : "-", w.step, state);
    }
  }
  if (view.workers.empty()) out += "(no workers attached)\n";
  for (const auto& l : view.leaks) {
    out += fmt::format("LEAK? rank {} pool '{}' tag '{}': +{} per step over steps {}..{} (now {} live)\n",
                       l.rank, l.pool, l.tag, FormatBytes(static_cast<std::uint64_t>(l.bytes_per_step)),
                       l.first_step, l.last_step, FormatBytes(l.live_bytes));
  }
  return out;
}

// The terminal's size: the tty's, else $COLUMNS/$LINES, else 160 x 50.
std::pair<int, int> TerminalSize() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    return {ws.ws_col, ws.ws_row};
  }
  const char* columns = std::getenv("COLUMNS");
  const char* lines = std::getenv("LINES");
  return {columns ? std::atoi(columns) : 160, lines ? std::atoi(lines) : 50};
}

// --watch without --json: redraws the screen in place for every snapshot, events from successive diffs.
Status WatchScreen(coordinator::CoordinatorClient& client, std::uint32_t interval_ms) {
  ClusterView previous;
  bool first = true;
  std::deque<coordinator::ClusterEvent> events;
  std::cout << "\033[2J" << std::flush;
  return client.Watch(interval_ms, [&](const ClusterView& view) {
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    if (!first) {
      for (auto& e : coordinator::DiffClusterViews(previous, view, now_ms)) events.push_back(std::move(e));
    }
    while (events.size() > 200) events.pop_front();
    first = false;
    previous = view;
    const auto [width, height] = TerminalSize();
    std::cout << RenderWatchScreen(view, events, width, height) << std::flush;
    return true;
  });
}

}  // namespace
#endif

Subcommand AddStatusCommand(CLI::App& root) {
  struct Args {
    CoordinatorFlags coordinator;
    bool json = false;
    bool watch = false;
    std::uint32_t interval_ms = 1000;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app =
      root.add_subcommand("status", "memory of every worker and pool, as the coordinator sees it");
  args->coordinator.add_to(app);
  app->add_flag("--json", args->json, "machine-readable output (bytes as integers)");
  app->add_flag("--watch", args->watch, "keep printing as the cluster changes (Ctrl-C to stop)");
  app->add_option("--interval-ms", args->interval_ms, "--watch refresh interval");
  return {app, [args]() -> int {
#ifdef MEMCOORD_HAVE_COORDINATOR
            auto options = args->coordinator.client_options();
            if (!options.ok()) {
              std::fprintf(stderr, "memcoord status: %s\n", options.status().ToString().c_str());
              return 2;
            }
            coordinator::CoordinatorClient client(*options);
            if (args->watch) {
              Status status = args->json ? client.Watch(args->interval_ms,
                                                        [&](const ClusterView& view) {
                                                          std::cout << ToJson(view).dump() << std::endl;
                                                          return true;
                                                        })
                                         : WatchScreen(client, args->interval_ms);
              if (!status.ok()) {
                std::fprintf(stderr, "memcoord status: %s\n", status.ToString().c_str());
                return ExitCodeFor(status);
              }
              return 0;
            }
            Result<ClusterView> view = client.GetCluster();
            if (!view.ok()) {
              std::fprintf(stderr, "memcoord status: %s\n", view.status().ToString().c_str());
              return ExitCodeFor(view.status());
            }
            if (args->json) {
              std::cout << ToJson(*view).dump(2) << std::endl;
            } else {
              std::cout << Table(*view);
            }
            return 0;
#else
            std::fprintf(stderr, "memcoord status: this build has no gRPC\n");
            return 1;
#endif
          }};
}

}  // namespace memcoord::cli
