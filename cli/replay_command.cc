// memcoord replay TRACE... [--backend virtual|host|cuda|cuda-vmm] [--json] [--timeline OUT.svg
// [--timeline-native]]
//                         [--snapshot OUT.pickle] [--chrome-trace OUT.json]
// Replays allocation traces, each through a fresh pool, and reports fragmentation and speed. --timeline
// draws requested against reserved bytes over the trace (one trace); --timeline-native adds the reserved
// bytes of a pool growing by whole segments (--growth segments, as PyTorch's native allocator grows).
// --snapshot and --chrome-trace export the trace's history (e.g. a worker's recorded one) for PyTorch's
// memory viewer and for Perfetto (cli/snapshot_export.h). --gpu-lag N replays as if the device ran N
// events behind the host (LaggingStreamsAdaptor): freed blocks stay busy for N events, as on a GPU in
// training, where the plain replay sees every stream idle.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "allocator/backend_factory.h"
#include "allocator/caching_pool.h"
#include "allocator/driver_cost.h"
#include "allocator/pool_conf.h"
#include "allocator/trace.h"
#include "allocator/trace_replay.h"
#include "allocator/trace_timeline.h"
#include "cli/command.h"
#include "cli/pickle_writer.h"
#include "cli/snapshot_export.h"
#include "cli/timeline_svg.h"
#include "common/bytes.h"

namespace memcoord::cli {
namespace {

struct ReplayArgs {
  std::vector<std::string> traces;
  std::string backend = "virtual";
  std::string capacity;
  std::string growth = "auto";
  std::string remap = "under-pressure";
  std::string map_unit;  // PoolOptions::large_map_unit_bytes; empty: the default
  std::uint64_t map_unit_bytes = 0;
  std::string alloc_conf;    // allocator/pool_conf.h, applied over the three options above
  bool one_thread = false;   // every event on one thread, whatever threads the trace names
  PoolOptions pool_options;  // growth, remap, map unit, then the conf over them: made once by RunReplay
  int repeat = 3;
  bool json = false;
  std::string timeline;  // SVG path; empty: none
  bool timeline_native = false;
  std::string snapshot;      // PyTorch snapshot pickle path; empty: none
  std::string chrome_trace;  // Chrome trace JSON path; empty: none
  std::size_t snapshot_max_events = 100000;
  std::uint64_t gpu_lag_events = 0;  // 0: the backend's own streams (idle on virtual)
};

PoolGrowth GrowthOf(const std::string& growth) {
  return growth == "segments"  ? PoolGrowth::kSegments
         : growth == "mapping" ? PoolGrowth::kMapping
                               : PoolGrowth::kAuto;
}

// PyTorch's best of its three allocator configurations on the shared traces (peak reserved / peak
// requested, measured on an H200), shown next to ours when a trace's workload is one of them.
double PyTorchBestRatio(const std::string& workload) {
  if (workload == "gpt2_fp32") return 1.0043;
  if (workload == "gpt2_bf16_varlen") return 1.0717;
  if (workload == "resnet50_amp") return 1.0100;
  if (workload == "gpt2_generate") return 1.0737;
  if (workload == "alternating") return 1.0050;  // expandable_segments (bench/traces/README.md)
  return 0.0;
}

struct TraceOutcome {
  std::string path;
  Trace trace;
  ReplayResult result;
};

int ReplayOne(const ReplayArgs& args, const std::string& path, const BackendOptions& backend_options,
              TraceOutcome* out) {
  Result<Trace> trace = ReadTrace(path);
  if (!trace.ok()) {
    std::fprintf(stderr, "memcoord replay: %s\n", trace.status().ToString().c_str());
    return 2;
  }
  Result<std::unique_ptr<DeviceBackend>> backend = MakeBackend(args.backend, backend_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "memcoord replay: %s\n", backend.status().ToString().c_str());
    return backend.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  PoolOptions options = args.pool_options;
  options.name = "replay";
  const ReplayThreads threads = args.one_thread ? ReplayThreads::kOne : ReplayThreads::kRecorded;
  // Each repetition replays through a fresh pool; the figures are deterministic except the timings, whose
  // median is reported.
  std::vector<ReplayResult> runs;
  for (int i = 0; i < args.repeat; ++i) {
    Result<ReplayResult> result = [&]() -> Result<ReplayResult> {
      if (args.gpu_lag_events > 0) {
        LaggingStreamsAdaptor lagging(**backend, args.gpu_lag_events);
        CachingPool pool(lagging, ForLaggedReplay(options));
        return Replay(*trace, pool, &lagging, threads);
      }
      CachingPool pool(**backend, options);
      return Replay(*trace, pool, nullptr, threads);
    }();
    if (!result.ok()) {
      std::fprintf(stderr, "memcoord replay: %s\n", result.status().ToString().c_str());
      return 1;
    }
    runs.push_back(*result);
  }
  ReplayResult median = runs[0];
  std::vector<double> cpu, wall;
  for (const ReplayResult& r : runs) {
    cpu.push_back(r.ns_per_event);
    wall.push_back(r.wall_ns_per_event);
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  median.ns_per_event = cpu[cpu.size() / 2];
  median.wall_ns_per_event = wall[wall.size() / 2];
  *out = TraceOutcome{path, std::move(*trace), median};
  return 0;
}

nlohmann::json ToJson(const ReplayArgs& args, const TraceOutcome& o) {
  const ReplayResult& r = o.result;
  nlohmann::json j = {
      {"trace", o.path},
      {"workload", o.trace.workload},
      {"format", o.trace.format},
      {"backend", args.backend},
      {"remap", args.remap},
      {"alloc_conf", args.alloc_conf},
      {"threads", r.threads},
      {"trace_threads", o.trace.threads},
      {"events", r.events},
      {"allocations", r.allocations},
      {"frees", r.frees},
      {"peak_requested_bytes", r.peak_requested_bytes},
      {"peak_reserved_bytes", r.peak_reserved_bytes},
      {"ratio", r.ratio},
      {"ns_per_event", r.ns_per_event},
      {"wall_ns_per_event", r.wall_ns_per_event},
      {"repeat", args.repeat},
      {"cache_hits", r.cache_hits},
      {"idle_cache_flushes", r.idle_cache_flushes},
      {"peak_sums", r.peak_sums},
      {"backend_allocations", r.backend_allocations},
      {"backend_frees", r.backend_frees},
      // Driver calls: map (or segment allocation) and unmap (or segment release) calls, the bytes they
      // covered, and what they would cost on an H200 (driver_model names the model).
      {"maps", r.backend_allocations},
      {"unmaps", r.backend_frees},
      {"misses", r.misses},
      {"mapped_bytes", r.backend_allocated_bytes},
      {"unmapped_bytes", r.backend_released_bytes},
      {"modeled_driver_ms", r.modeled_driver_ms},
      {"driver_model", DriverCostModelSummary()},
      // --gpu-lag: the lag, packing's host waits for busy blocks and the GPU events they covered.
      {"gpu_lag_events", r.lag_events},
      {"pack_waits", r.pack_waits},
      {"pack_stream_syncs", r.pack_stream_syncs},
      {"waited_events", r.waited_events},
      // Mapped at the end, by arena (the small-block arena: requests up to 1 MiB, as PyTorch's small pool).
      {"small_arena_bytes", r.small_arena_bytes},
      {"large_arena_bytes", r.large_arena_bytes},
  };
  if (PyTorchBestRatio(o.trace.workload) > 0) j["pytorch_best_ratio"] = PyTorchBestRatio(o.trace.workload);
  return j;
}

void PrintTable(const ReplayArgs& args, const std::vector<TraceOutcome>& outcomes) {
  std::cout << fmt::format(
      "memcoord pool on the {} backend: peak reserved / peak requested (lower is better)\n\n", args.backend);
  std::cout << fmt::format("{:<20} {:>9} {:>15} {:>15} {:>9} {:>13} {:>7} {:>7} {:>10} {:>10}\n", "trace",
                           "events", "peak requested", "peak reserved", "ratio", "PyTorch best", "maps",
                           "unmaps", "driver ms", "ns/event");
  double log_sum = 0;
  for (const TraceOutcome& o : outcomes) {
    const ReplayResult& r = o.result;
    const double anchor = PyTorchBestRatio(o.trace.workload);
    std::cout << fmt::format("{:<20} {:>9} {:>15} {:>15} {:>9.4f} {:>13} {:>7} {:>7} {:>10.1f} {:>10.1f}\n",
                             o.trace.workload.empty() ? o.path : o.trace.workload, r.events,
                             FormatBytes(r.peak_requested_bytes), FormatBytes(r.peak_reserved_bytes), r.ratio,
                             anchor > 0 ? fmt::format("{:.4f}", anchor) : std::string("-"),
                             r.backend_allocations, r.backend_frees, r.modeled_driver_ms, r.ns_per_event);
    log_sum += std::log(r.ratio);
  }
  if (args.gpu_lag_events > 0) {
    std::cout << fmt::format("\nwith the device {} events behind the host:\n", args.gpu_lag_events);
    for (const TraceOutcome& o : outcomes) {
      const ReplayResult& r = o.result;
      std::cout << fmt::format(
          "  {}: {} packing waits for a busy block ({} events of GPU work waited for), "
          "{} stream synchronizations\n",
          o.trace.workload.empty() ? o.path : o.trace.workload, r.pack_waits, r.waited_events,
          r.pack_stream_syncs);
    }
  }
  if (outcomes.size() > 1) {
    std::cout << fmt::format("{:<20} {:>9} {:>15} {:>15} {:>9.4f}\n", "geometric mean", "", "", "",
                             std::exp(log_sum / static_cast<double>(outcomes.size())));
  }
  std::cout << "\nmaps, unmaps: units mapped and unmapped, one driver allocation each (2 MiB chunks for "
               "small blocks,\n"
            << "up to the large arena's unit for large ones); driver ms: what they would cost on an H200,\n"
            << "modelled from measured costs: " << DriverCostModelSummary() << ".\n"
            << "ns/event: pool operations only, thread CPU time, median of the repetitions.\n";
}

// Writes the --timeline SVG of `trace`: this replay's pool, and with --timeline-native one growing by
// segments. Returns the exit code.
int WriteTimeline(const ReplayArgs& args, const TraceOutcome& outcome,
                  const BackendOptions& backend_options) {
  std::vector<std::pair<bool, std::string>> runs = {{false, "memcoord (--growth " + args.growth + ")"}};
  if (args.timeline_native)
    runs.emplace_back(true, "segments, as PyTorch's native allocator (--growth segments)");
  std::vector<TraceTimeline> timelines;
  for (const auto& [native, label] : runs) {
    Result<std::unique_ptr<DeviceBackend>> backend = MakeBackend(args.backend, backend_options);
    if (!backend.ok()) {
      std::fprintf(stderr, "memcoord replay: %s\n", backend.status().ToString().c_str());
      return 1;
    }
    PoolOptions options = args.pool_options;
    options.name = "timeline";
    if (native) options.growth = PoolGrowth::kSegments;  // whatever --alloc-conf says
    CachingPool pool(**backend, options);
    Result<TraceTimeline> timeline = ReplayTimeline(outcome.trace, pool);
    if (!timeline.ok()) {
      std::fprintf(stderr, "memcoord replay: --timeline: %s\n", timeline.status().ToString().c_str());
      return 1;
    }
    timeline->label = label;
    timelines.push_back(*std::move(timeline));
  }
  const std::string name = outcome.trace.workload.empty() ? outcome.path : outcome.trace.workload;
  const std::string svg =
      TimelineSvg(timelines, fmt::format("{}: requested vs reserved ({} backend, {} events)", name,
                                         args.backend, outcome.result.events));
  std::ofstream out(args.timeline, std::ios::binary);
  out << svg;
  if (!out.flush()) {
    std::fprintf(stderr, "memcoord replay: cannot write the timeline to '%s'\n", args.timeline.c_str());
    return 1;
  }
  return 0;
}

bool WriteFile(const std::string& path, const std::string& bytes, const char* what) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out.flush()) {
    std::fprintf(stderr, "memcoord replay: cannot write the %s to '%s'\n", what, path.c_str());
    return false;
  }
  return true;
}

// --snapshot / --chrome-trace: the trace's history through a segment-growing pool (snapshot_export.h).
int WriteSnapshots(const ReplayArgs& args, const TraceOutcome& outcome,
                   const BackendOptions& backend_options) {
  Result<std::unique_ptr<DeviceBackend>> backend = MakeBackend(args.backend, backend_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "memcoord replay: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  Result<PoolHistory> history = ReplayHistory(outcome.trace, **backend);
  if (!history.ok()) {
    std::fprintf(stderr, "memcoord replay: snapshot: %s\n", history.status().ToString().c_str());
    return 1;
  }
  if (!args.snapshot.empty() &&
      !WriteFile(args.snapshot, ToPickle(SnapshotJson(*history, args.snapshot_max_events)), "snapshot")) {
    return 1;
  }
  if (!args.chrome_trace.empty() &&
      !WriteFile(args.chrome_trace, ChromeTraceJson(*history).dump(), "Chrome trace")) {
    return 1;
  }
  return 0;
}

int RunReplay(ReplayArgs args) {
  if (!args.map_unit.empty()) {
    Result<std::uint64_t> unit = ParseBytes(args.map_unit);
    if (!unit.ok() || *unit == 0) {
      std::fprintf(stderr, "memcoord replay: --map-unit: %s\n",
                   unit.ok() ? "must be positive (e.g. 2MiB, 32MiB)" : unit.status().message().c_str());
      return 2;
    }
    args.map_unit_bytes = *unit;
  }
  PoolOptions flags;
  flags.growth = GrowthOf(args.growth);
  flags.remap = args.remap == "every-miss" ? RemapPolicy::kEveryMiss : RemapPolicy::kUnderPressure;
  flags.large_map_unit_bytes = args.map_unit_bytes;
  Result<PoolOptions> conf = ApplyPoolConf(args.alloc_conf, flags);
  if (!conf.ok()) {
    std::fprintf(stderr, "memcoord replay: --alloc-conf: %s\n", conf.status().message().c_str());
    return 2;
  }
  args.pool_options = *std::move(conf);
  const bool exports = !args.timeline.empty() || !args.snapshot.empty() || !args.chrome_trace.empty();
  if (exports && args.traces.size() != 1) {
    std::fprintf(stderr,
                 "memcoord replay: --timeline, --snapshot and --chrome-trace take one trace; got %zu\n",
                 args.traces.size());
    return 2;
  }
  if (args.timeline_native && args.timeline.empty()) {
    std::fprintf(stderr,
                 "memcoord replay: --timeline-native adds to a --timeline OUT.svg; give --timeline too\n");
    return 2;
  }
  BackendOptions backend_options;
  if (!args.capacity.empty()) {
    Result<std::uint64_t> capacity = ParseBytes(args.capacity);
    if (!capacity.ok()) {
      std::fprintf(stderr, "memcoord replay: --capacity: %s\n", capacity.status().message().c_str());
      return 2;
    }
    backend_options.capacity_bytes = *capacity;
  }
  std::vector<TraceOutcome> outcomes(args.traces.size());
  for (std::size_t i = 0; i < args.traces.size(); ++i) {
    const int rc = ReplayOne(args, args.traces[i], backend_options, &outcomes[i]);
    if (rc != 0) return rc;
  }
  if (!args.timeline.empty()) {
    const int rc = WriteTimeline(args, outcomes[0], backend_options);
    if (rc != 0) return rc;
  }
  if (!args.snapshot.empty() || !args.chrome_trace.empty()) {
    const int rc = WriteSnapshots(args, outcomes[0], backend_options);
    if (rc != 0) return rc;
  }
  if (args.json) {
    if (outcomes.size() == 1) {
      std::cout << ToJson(args, outcomes[0]).dump() << "\n";
    } else {
      nlohmann::json all = nlohmann::json::array();
      for (const TraceOutcome& o : outcomes) all.push_back(ToJson(args, o));
      std::cout << all.dump() << "\n";
    }
  } else {
    PrintTable(args, outcomes);
  }
  return 0;
}

}  // namespace

Subcommand AddReplayCommand(CLI::App& root) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* app = root.add_subcommand("replay", "Replay an allocation trace through a memcoord pool");
  app->add_option(
         "trace", args->traces,
         "trace files (memcoord/PyTorch format, .gz or plain, or an RMM CSV log; a PyTorch memory snapshot "
         "pickle converts with `python3 -m memcoord.snapshot_trace`); one JSON object for one trace, an "
         "array "
         "for several")
      ->required();
  app->add_option("--backend", args->backend, "virtual | host | cuda | cuda-vmm | pinned-host | auto")
      ->capture_default_str();
  app->add_option("--capacity", args->capacity, "simulated device size for virtual/host (e.g. 80GB)");
  app->add_option("--growth", args->growth, "auto | mapping | segments")
      ->check(CLI::IsMember({"auto", "mapping", "segments"}))
      ->capture_default_str();
  app->add_option("--remap", args->remap,
                  "when the pool packs its cache: under-pressure (default) | every-miss (the former default: "
                  "at the high-water mark on every miss, for comparison)")
      ->check(CLI::IsMember({"under-pressure", "every-miss"}))
      ->capture_default_str();
  app->add_option(
      "--map-unit", args->map_unit,
      "mapping pools: the most memory the large arena maps in one driver allocation (e.g. 32MiB; "
      "rounded up to the backend's chunk; default 40MiB), but for a miss of more than 32 such units, "
      "which maps 32 equal ones");
  app->add_option(
      "--alloc-conf", args->alloc_conf,
      "pool options as MEMCOORD_ALLOC_CONF gives them to a training process, applied over --growth, "
      "--remap and --map-unit (e.g. 'thread_cache:0,large_map_unit:40MiB'; keys: " +
          std::string(PoolConfKeys()) + ")");
  app->add_flag(
      "--one-thread", args->one_thread,
      "replay every event on one thread; by default a trace that names several threads (a TraceRecorder's "
      "5th field) is replayed by as many, each event by its own, so that their thread caches behave as "
      "in the recorded run");
  app->add_option("--repeat", args->repeat, "replays per trace (fresh pool each); timings are the median")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app->add_flag("--json", args->json, "print JSON");
  app->add_option("--timeline", args->timeline,
                  "also write an SVG of requested vs reserved bytes over the trace (one trace only)");
  app->add_flag("--timeline-native", args->timeline_native,
                "with --timeline: add the reserved bytes of a pool growing by whole segments (--growth "
                "segments), as PyTorch's native allocator grows");
  app->add_option(
      "--snapshot", args->snapshot,
      "also write PyTorch's memory snapshot (pickle) of the trace's history through a segment-growing "
      "pool: open it with torch.cuda._memory_viz or at pytorch.org/memory_viz (one trace only)");
  app->add_option(
      "--chrome-trace", args->chrome_trace,
      "also write the history as Chrome trace-event JSON (Perfetto, chrome://tracing; one trace only)");
  app->add_option("--gpu-lag", args->gpu_lag_events,
                  "replay as if the device ran N trace events behind the host (blocks freed in the last N "
                  "events are still in use, as on a GPU in training; 0: idle streams)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40))
      ->capture_default_str();
  app->add_option("--snapshot-max-events", args->snapshot_max_events,
                  "keep the last N events in the snapshot's device trace (PyTorch's max_entries)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000000}))
      ->capture_default_str();
  return {app, [args] { return RunReplay(*args); }};
}

}  // namespace memcoord::cli
