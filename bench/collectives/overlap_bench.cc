// How much of the bucketed gradient allreduce hides behind backward, in the configuration users get (the
// communicator's default verify_arguments on) next to the old per-launch check and no check at all.
//   mpirun -np 2 collectives_overlap_bench [--backend mpi|nccl] [--layers 24] [--layer-bytes 1MiB]
//          [--compute-us 1500] [--jitter-us 0] [--steps 15] [--first-bucket-cap 1MiB] [--bucket-cap 4MiB]
// Backward is `layers` layers, each computing one fp32 gradient of layer_bytes directly into its bucket view
// (as memcoord-train does): on the host (mpi) a loop that rewrites the gradient until compute_us passed; on
// the GPU (nccl, one rank per GPU, device = local rank) a kernel busy for compute_us that then writes it.
// --jitter-us adds that much to every other layer, alternating between ranks (each rank's total is the same,
// but at any moment one rank is behind: the per-layer imbalance real ranks show).
// Verification modes, each on its own bucketer (and communicator where the option differs):
//   every_launch  verify_arguments on, one cross-rank check per bucket launch (the default before: each
//                 launch waits on the host for every rank and, on NCCL, for all queued work);
//   layout_once   verify_arguments on, the layout checked once at creation (the default now);
//   off           verify_arguments off.
// For each mode, per step (the slowest rank's wall time; median over `steps`, modes interleaved step by
// step):
//   compute_ms     backward alone; comm_ms  the bucketed allreduce alone (mark all ready, finish);
//   serialized_ms  backward, then the allreduce; overlapped_ms  each gradient marked ready when computed;
//   hidden_fraction = (serialized - overlapped) / min(compute, comm): 1 = communication fully hidden.
// Prints one JSON object (rank 0); {"skipped": ...} when --backend nccl finds no GPU.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/host_backend.h"
#include "bench/collectives/bench_util.h"
#include "collectives/gradient_bucketer.h"
#include "collectives/mpi_communicator.h"
#include "collectives/mpi_environment.h"
#include "common/bytes.h"
#include "worker/pool_bucket_memory.h"
#ifdef MEMCOORD_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "allocator/cuda/cuda_backends.h"
#include "bench/collectives/overlap_kernel.h"
#include "collectives/mpi_rendezvous.h"
#include "collectives/nccl_communicator.h"
#include "common/cuda_status.h"
#endif

namespace memcoord::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::string backend = "mpi";
  int layers = 24;
  std::size_t layer_bytes = std::size_t{1} << 20;
  double compute_us = 1500;
  double jitter_us =
      0;  // extra compute on layer l of rank r when (l + r) is even: equal totals, uneven layers
  int steps = 15;
  std::size_t first_bucket_cap = std::size_t{1} << 20;
  std::size_t bucket_cap = std::size_t{4} << 20;
};

// One layer's backward: writes `count` floats of `gradient` (host or device, per backend).
using ComputeLayer = std::function<void(float* gradient, std::size_t count, int layer)>;

// What the modes share on one backend: two communicators (verify_arguments on and off), the memory the
// buckets come from, the compute, and how to wait for compute queued so far (GPU; no-op on the host).
struct Rig {
  std::unique_ptr<Communicator> verified;
  std::unique_ptr<Communicator> unverified;
  std::unique_ptr<DeviceBackend> backend;
  std::unique_ptr<CachingPool> pool;
  std::unique_ptr<PoolBucketMemory> memory;  // over pool
  ComputeLayer compute;
  std::function<void()> wait_compute = [] {};
  StreamId compute_stream = kDefaultStream;
  std::string skipped;  // set when this backend cannot run here
};

struct Mode {
  std::string name;
  std::unique_ptr<GradientBucketer> bucketer;
  std::map<std::string, std::vector<double>> samples;  // phase -> per-step seconds (slowest rank)
};

double SlowestRank(double seconds) {
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void HostCompute(float* gradient, std::size_t count, int layer, double compute_us) {
  const auto until = Clock::now() + std::chrono::duration<double, std::micro>(compute_us);
  float value = static_cast<float>(layer) + 1.0f;
  do {  // at least one full pass, as a real layer writes its whole gradient
    for (std::size_t i = 0; i < count; ++i) gradient[i] = gradient[i] * 0.5f + value;
    value *= 0.999f;
  } while (Clock::now() < until);
}

Status MakeMpiRig(const Config& config, Rig& rig) {
  MEMCOORD_ASSIGN_OR_RETURN(rig.verified,
                            MpiCommunicator::Create(MPI_COMM_WORLD, {std::chrono::minutes(2), true}));
  MEMCOORD_ASSIGN_OR_RETURN(rig.unverified,
                            MpiCommunicator::Create(MPI_COMM_WORLD, {std::chrono::minutes(2), false}));
  rig.backend = std::make_unique<HostBackend>(std::uint64_t{8} << 30);
  rig.pool = std::make_unique<CachingPool>(*rig.backend, PoolOptions{});
  const double us = config.compute_us, jitter = config.jitter_us;
  rig.compute = [us, jitter, rank = rig.verified->rank()](float* gradient, std::size_t count, int layer) {
    HostCompute(gradient, count, layer, us + ((layer + rank) % 2 == 0 ? jitter : 0));
  };
  return Status::Ok();
}

#ifdef MEMCOORD_HAVE_NCCL
Status MakeNcclRig(const Config& config, Rig& rig) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int device = local != nullptr ? std::atoi(local) : 0;
  for (bool verify : {true, false}) {
    MEMCOORD_ASSIGN_OR_RETURN(auto rendezvous, MakeMpiRendezvous(MPI_COMM_WORLD, std::chrono::seconds(60)));
    NcclCommunicatorOptions options;
    options.device = device;
    options.communicator = {std::chrono::minutes(2), verify};
    Result<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(*rendezvous, options);
    if (!comm.ok() && comm.status().code() == StatusCode::kUnavailable) {
      rig.skipped = comm.status().ToString();
      return Status::Ok();
    }
    MEMCOORD_RETURN_IF_ERROR(comm.status());
    (verify ? rig.verified : rig.unverified) = std::move(*comm);
  }
  MEMCOORD_ASSIGN_OR_RETURN(rig.backend, MakeCudaBackend("cuda", device));
  rig.pool = std::make_unique<CachingPool>(*rig.backend, PoolOptions{});
  cudaStream_t stream = nullptr;
  MEMCOORD_RETURN_IF_ERROR(
      CudaRuntimeStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  rig.compute_stream = reinterpret_cast<StreamId>(stream);
  const auto busy_ns = static_cast<long long>(config.compute_us * 1e3);
  const auto jitter_ns = static_cast<long long>(config.jitter_us * 1e3);
  rig.compute = [stream, busy_ns, jitter_ns, rank = rig.verified->rank()](float* gradient, std::size_t count,
                                                                          int layer) {
    LaunchBusyWrite(gradient, count, static_cast<float>(layer) + 1.0f,
                    busy_ns + ((layer + rank) % 2 == 0 ? jitter_ns : 0), stream);
  };
  rig.wait_compute = [stream] { cudaStreamSynchronize(stream); };
  return Status::Ok();
}
#endif

Status MakeRig(const Config& config, Rig& rig) {
  if (config.backend == "mpi") return MakeMpiRig(config, rig);
#ifdef MEMCOORD_HAVE_NCCL
  if (config.backend == "nccl") return MakeNcclRig(config, rig);
#else
  if (config.backend == "nccl") {
    rig.skipped = "this build has no NCCL";
    return Status::Ok();
  }
#endif
  return InvalidArgument("--backend must be mpi or nccl, got '" + config.backend + "'");
}

Result<std::vector<Mode>> MakeModes(const Config& config, Rig& rig) {
  MEMCOORD_ASSIGN_OR_RETURN(rig.memory, PoolBucketMemory::Create(*rig.pool));
  std::vector<ParameterSpec> model(static_cast<std::size_t>(config.layers),
                                   ParameterSpec{config.layer_bytes / sizeof(float), DataType::kFloat32});
  std::vector<Mode> modes;
  for (const char* name : {"every_launch", "layout_once", "off"}) {
    BucketerOptions options;
    options.first_bucket_cap_bytes = config.first_bucket_cap;
    options.bucket_cap_bytes = config.bucket_cap;
    options.compute_stream = rig.compute_stream;
    options.verify_every_launch = std::string(name) == "every_launch";
    Communicator& comm = std::string(name) == "off" ? *rig.unverified : *rig.verified;
    MEMCOORD_ASSIGN_OR_RETURN(auto bucketer, GradientBucketer::Create(comm, *rig.memory, model, options));
    modes.push_back(Mode{name, std::move(bucketer), {}});
  }
  return modes;
}

// Backward: every layer's compute into its gradient view, last layer first; with `mark_each` each gradient
// is marked ready as soon as it is computed (its bucket's allreduce may start while later layers compute).
Status Backward(GradientBucketer& bucketer, const Rig& rig, const Config& config, bool mark_each) {
  const std::size_t count = config.layer_bytes / sizeof(float);
  for (int layer = config.layers; layer-- > 0;) {
    const auto p = static_cast<std::size_t>(layer);
    MEMCOORD_ASSIGN_OR_RETURN(void* gradient, bucketer.gradient(p));
    rig.compute(static_cast<float*>(gradient), count, layer);
    if (mark_each) MEMCOORD_RETURN_IF_ERROR(bucketer.mark_ready(p));
  }
  return Status::Ok();
}

Status Communicate(GradientBucketer& bucketer, const Config& config) {
  for (int layer = config.layers; layer-- > 0;) {
    MEMCOORD_RETURN_IF_ERROR(bucketer.mark_ready(static_cast<std::size_t>(layer)));
  }
  return bucketer.finish();
}

// One phase of one step, timed between a barrier and the end of the slowest rank.
Status TimePhase(Mode& mode, const std::string& phase, const Rig& rig, const Config& config) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  Status s;
  if (phase == "compute") {
    s = Backward(*mode.bucketer, rig, config, false);
    rig.wait_compute();
  } else if (phase == "comm") {
    s = Communicate(*mode.bucketer, config);
  } else if (phase == "serialized") {
    s = Backward(*mode.bucketer, rig, config, false);
    rig.wait_compute();
    if (s.ok()) s = Communicate(*mode.bucketer, config);
  } else {  // overlapped
    s = Backward(*mode.bucketer, rig, config, true);
    if (s.ok()) s = mode.bucketer->finish();
  }
  const double slowest = SlowestRank(Seconds(start));
  MEMCOORD_RETURN_IF_ERROR(s.WithContext(mode.name + " " + phase + ": "));
  mode.samples[phase].push_back(slowest);
  return Status::Ok();
}

constexpr const char* kPhases[] = {"compute", "comm", "serialized", "overlapped"};

// Two warm-up steps, then `steps` steps; within a step every mode runs every phase, so drift on a shared
// machine hits all modes alike.
Status Measure(std::vector<Mode>& modes, const Rig& rig, const Config& config) {
  for (int step = 0; step < config.steps + 2; ++step) {
    for (Mode& mode : modes) {
      for (const char* phase : kPhases) MEMCOORD_RETURN_IF_ERROR(TimePhase(mode, phase, rig, config));
    }
    if (step < 2) {
      for (Mode& mode : modes) mode.samples.clear();
    }
  }
  return Status::Ok();
}

nlohmann::json Report(const std::vector<Mode>& modes, const Config& config, int ranks) {
  nlohmann::json out = {{"backend", config.backend},
                        {"ranks", ranks},
                        {"layers", config.layers},
                        {"layer_bytes", config.layer_bytes},
                        {"compute_us_per_layer", config.compute_us},
                        {"jitter_us", config.jitter_us},
                        {"first_bucket_cap_bytes", config.first_bucket_cap},
                        {"bucket_cap_bytes", config.bucket_cap},
                        {"buckets", modes.front().bucketer->buckets().size()},
                        {"steps", config.steps},
                        {"statistic", "median over steps of the slowest rank's wall time, ms"},
                        {"default_mode", "layout_once"}};
  for (const Mode& mode : modes) {
    nlohmann::json row;
    for (const char* phase : kPhases) row[std::string(phase) + "_ms"] = Median(mode.samples.at(phase)) * 1e3;
    const double compute = row["compute_ms"], comm = row["comm_ms"];
    const double serialized = row["serialized_ms"], overlapped = row["overlapped_ms"];
    row["hidden_fraction"] = (serialized - overlapped) / std::max(1e-9, std::min(compute, comm));
    row["overlapped_over_serialized"] = overlapped / serialized;
    out["modes"][mode.name] = row;
  }
  return out;
}

Status ParseArgs(int argc, char** argv, Config& config) {
  CLI::App app{"overlap of backward compute and the bucketed allreduce, by verification mode"};
  std::string layer_bytes = "1MiB", first_cap = "1MiB", cap = "4MiB";
  app.add_option("--backend", config.backend, "mpi (host compute) or nccl (a kernel per layer)");
  app.add_option("--layers", config.layers, "layers, one fp32 gradient each")->check(CLI::Range(1, 100000));
  app.add_option("--layer-bytes", layer_bytes, "gradient bytes per layer");
  app.add_option("--compute-us", config.compute_us, "backward compute per layer, microseconds");
  app.add_option("--jitter-us", config.jitter_us, "extra compute on alternate layers, alternating by rank");
  app.add_option("--steps", config.steps, "measured steps per mode and phase")->check(CLI::Range(1, 100000));
  app.add_option("--first-bucket-cap", first_cap, "the bucketer's first bucket cap");
  app.add_option("--bucket-cap", cap, "the bucketer's bucket cap");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the help or the error
    return InvalidArgument(e.get_exit_code() == 0 ? "help printed" : e.what());
  }
  MEMCOORD_ASSIGN_OR_RETURN(config.layer_bytes, ParseBytes(layer_bytes));
  MEMCOORD_ASSIGN_OR_RETURN(config.first_bucket_cap, ParseBytes(first_cap));
  MEMCOORD_ASSIGN_OR_RETURN(config.bucket_cap, ParseBytes(cap));
  if (config.layer_bytes < sizeof(float)) return InvalidArgument("--layer-bytes must be at least 4");
  return Status::Ok();
}

int Run(int argc, char** argv) {
  Config config;
  auto environment = MpiEnvironment::Init(&argc, &argv);
  if (!environment.ok()) {
    std::fprintf(stderr, "%s\n", environment.status().ToString().c_str());
    return 1;
  }
  const int rank = (*environment)->world_rank();
  auto print = [rank](const nlohmann::json& j) {
    if (rank == 0) std::printf("%s\n", j.dump(2).c_str());
  };
  Rig rig;
  Status s = ParseArgs(argc, argv, config);
  if (s.ok()) s = MakeRig(config, rig);
  if (s.ok() && !rig.skipped.empty()) {
    print({{"skipped", rig.skipped}});
    return 0;
  }
  Result<std::vector<Mode>> modes = s.ok() ? MakeModes(config, rig) : Result<std::vector<Mode>>(s);
  if (modes.ok()) s = Measure(*modes, rig, config);
  if (!modes.ok() || !s.ok()) {
    const Status error = modes.ok() ? s : modes.status();
    std::fprintf(stderr, "rank %d: %s\n", rank, error.ToString().c_str());
    print({{"error", error.ToString()}});
    return 1;
  }
  print(Report(*modes, config, (*environment)->world_size()));
  return 0;
}

}  // namespace
}  // namespace memcoord::bench

int main(int argc, char** argv) { return memcoord::bench::Run(argc, argv); }
