// memcoord replay TRACE [--backend virtual|host|cuda|cuda-vmm] [--json]
// Replays an allocation trace through a fresh pool and reports fragmentation and speed.
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocator/backend_factory.h"
#include "allocator/caching_pool.h"
#include "allocator/trace.h"
#include "allocator/trace_replay.h"
#include "cli/command.h"
#include "common/bytes.h"

namespace memcoord::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::string backend = "virtual";
  std::string capacity;
  std::string growth = "auto";
  bool json = false;
};

int RunReplay(const ReplayArgs& args) {
  BackendOptions backend_options;
  if (!args.capacity.empty()) {
    Result<std::uint64_t> capacity = ParseBytes(args.capacity);
    if (!capacity.ok()) {
      std::fprintf(stderr, "memcoord replay: --capacity: %s\n", capacity.status().message().c_str());
      return 2;
    }
    backend_options.capacity_bytes = *capacity;
  }
  Result<Trace> trace = ReadTrace(args.trace);
  if (!trace.ok()) {
    std::fprintf(stderr, "memcoord replay: %s\n", trace.status().ToString().c_str());
    return 2;
  }
  Result<std::unique_ptr<DeviceBackend>> backend = MakeBackend(args.backend, backend_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "memcoord replay: %s\n", backend.status().ToString().c_str());
    return backend.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  PoolOptions options;
  options.name = "replay";
  options.growth = args.growth == "segments" ? PoolGrowth::kSegments
                   : args.growth == "mapping" ? PoolGrowth::kMapping
                                              : PoolGrowth::kAuto;
  Result<ReplayResult> result = [&]() -> Result<ReplayResult> {
    CachingPool pool(**backend, options);
    return Replay(*trace, pool);
  }();
  if (!result.ok()) {
    std::fprintf(stderr, "memcoord replay: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const ReplayResult& r = *result;
  if (args.json) {
    nlohmann::json j = {
        {"trace", args.trace},
        {"workload", trace->workload},
        {"format", trace->format},
        {"backend", args.backend},
        {"events", r.events},
        {"allocations", r.allocations},
        {"frees", r.frees},
        {"peak_requested_bytes", r.peak_requested_bytes},
        {"peak_reserved_bytes", r.peak_reserved_bytes},
        {"ratio", r.ratio},
        {"ns_per_event", r.ns_per_event},
        {"cache_hits", r.cache_hits},
        {"backend_allocations", r.backend_allocations},
        {"backend_frees", r.backend_frees},
    };
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format(
        "trace {} ({}, {} events) on {}:\n  peak requested {}\n  peak reserved  {}\n  ratio          {:.4f}\n"
        "  cost           {:.1f} ns per event\n  cache hits     {} of {} allocations; {} backend allocations, {} "
        "frees\n",
        args.trace, trace->workload, r.events, args.backend, FormatBytes(r.peak_requested_bytes),
        FormatBytes(r.peak_reserved_bytes), r.ratio, r.ns_per_event, r.cache_hits, r.allocations,
        r.backend_allocations, r.backend_frees);
  }
  return 0;
}

}  // namespace

Subcommand AddReplayCommand(CLI::App& root) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* app = root.add_subcommand("replay", "Replay an allocation trace through a memcoord pool");
  app->add_option("trace", args->trace, "trace file (memcoord/PyTorch format, .gz or plain, or an RMM CSV log)")
      ->required();
  app->add_option("--backend", args->backend, "virtual | host | cuda | cuda-vmm | pinned-host | auto")
      ->capture_default_str();
  app->add_option("--capacity", args->capacity, "simulated device size for virtual/host (e.g. 80GB)");
  app->add_option("--growth", args->growth, "auto | mapping | segments")->capture_default_str();
  app->add_flag("--json", args->json, "print JSON");
  return {app, [args] { return RunReplay(*args); }};
}

}  // namespace memcoord::cli
