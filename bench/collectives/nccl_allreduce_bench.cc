// NCCL allreduce on real device buffers: our NcclCommunicator next to raw ncclAllReduce on a second, plain
// NCCL communicator in the same run, and the GradientBucketer over a device pool (cuda backend) against one
// raw allreduce of the same bytes. Ranks meet through MPI (MakeMpiRendezvous): run under mpirun, one rank per
// GPU.
//   mpirun -np N nccl_allreduce_bench [--max-bytes 1GiB] [--bucketer-bytes 256MiB] [--device D]
// Prints one JSON object (rank 0); without a GPU {"skipped": "..."}; on a setup error {"error": "..."}.
// With one rank busbw is 0 by definition (2(n-1)/n), so algbw is reported too.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/cuda/cuda_backends.h"
#include "bench/collectives/bench_util.h"
#include "collectives/gradient_bucketer.h"
#include "collectives/mpi_environment.h"
#include "collectives/mpi_rendezvous.h"
#include "collectives/nccl_communicator.h"
#include "common/bytes.h"
#include "worker/pool_bucket_memory.h"

namespace memcoord::bench {
namespace {

double SlowestRank(double seconds) {
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

void FillDevice(void* data, std::size_t count, unsigned seed) {
  std::vector<float> host(count);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (float& x : host) x = dist(rng);
  cudaMemcpy(data, host.data(), count * 4, cudaMemcpyHostToDevice);
}

// Everything the measurements share: our communicator, the raw baseline (a plain blocking NCCL
// communicator, unique id through MPI_Bcast) and its stream.
struct Rig {
  int rank = 0;
  int ranks = 1;
  int device = 0;
  std::unique_ptr<NcclCommunicator> ours;
  ncclComm_t raw = nullptr;
  cudaStream_t raw_stream = nullptr;
  bool ok = true;  // every call of ours succeeded
};

template <typename F>
double TimeSteps(int steps, F&& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) f();
  return SlowestRank(Seconds(start)) / steps;
}

Status MakeRaw(Rig& rig) {
  ncclUniqueId id;
  if (rig.rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  cudaSetDevice(rig.device);
  if (ncclCommInitRank(&rig.raw, rig.ranks, id, rig.rank) != ncclSuccess) {
    return Internal("ncclCommInitRank of the raw baseline failed");
  }
  cudaStreamCreateWithFlags(&rig.raw_stream, cudaStreamNonBlocking);
  return Status::Ok();
}

// One row of the size sweep: raw ncclAllReduce, ours enqueued back to back (waited at the end, as
// nccl-tests time) and ours blocking (every call waits for its result); the best of two runs each.
nlohmann::json TimeOneSize(Rig& rig, std::size_t bytes, void* send, void* recv) {
  const std::size_t count = bytes / 4;
  const int iterations = std::min(Iterations(bytes) * 4, 2000);
  auto raw_pass = [&] {  // enqueued back to back, one synchronize at the end
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i)
      ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, rig.raw, rig.raw_stream);
    cudaStreamSynchronize(rig.raw_stream);
    return SlowestRank(Seconds(start)) / iterations;
  };
  auto pipelined = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<PendingCollective>> pending;
    pending.reserve(static_cast<std::size_t>(iterations));
    for (int i = 0; i < iterations; ++i) {
      auto p = rig.ours->start_allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum);
      rig.ok &= p.ok();
      if (p.ok()) pending.push_back(std::move(*p));
    }
    for (auto& p : pending) rig.ok &= p->wait().ok();
    return SlowestRank(Seconds(start)) / iterations;
  };
  auto blocking = [&] {
    return TimeSteps(iterations, [&] {
      rig.ok &= rig.ours->allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum).ok();
    });
  };
  raw_pass();  // warm-up
  pipelined();
  const double t_raw = std::min(raw_pass(), raw_pass());
  const double t_pipe = std::min(pipelined(), pipelined());
  const double t_block = std::min(blocking(), blocking());
  return {{"bytes", bytes},
          {"iterations", iterations},
          {"raw_nccl_us", t_raw * 1e6},
          {"ours_pipelined_us", t_pipe * 1e6},
          {"ours_blocking_us", t_block * 1e6},
          {"raw_algbw_gbps", bytes / t_raw / 1e9},
          {"ours_pipelined_algbw_gbps", bytes / t_pipe / 1e9},
          {"ours_blocking_algbw_gbps", bytes / t_block / 1e9},
          {"raw_busbw_gbps", bytes / t_raw * BusFactor(rig.ranks) / 1e9},
          {"ours_pipelined_busbw_gbps", bytes / t_pipe * BusFactor(rig.ranks) / 1e9}};
}

Result<nlohmann::json> SweepSizes(Rig& rig, std::size_t max_bytes) {
  void* send = nullptr;
  void* recv = nullptr;
  if (cudaMalloc(&send, max_bytes) != cudaSuccess || cudaMalloc(&recv, max_bytes) != cudaSuccess) {
    cudaFree(send);
    return ResourceExhausted("cudaMalloc of the sweep's buffers failed");
  }
  FillDevice(send, max_bytes / 4, 7u + static_cast<unsigned>(rig.rank));
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t bytes : Sizes(1024, max_bytes, 4)) rows.push_back(TimeOneSize(rig, bytes, send, recv));
  cudaFree(send);
  cudaFree(recv);
  return rows;
}

// The bucketer over a device pool (cuda backend; default caps) against one raw ncclAllReduce(avg) of the
// same bytes, 20 steps a round, the best of 3 rounds.
Result<nlohmann::json> BenchBucketer(Rig& rig, std::size_t bucketer_bytes) {
  MEMCOORD_ASSIGN_OR_RETURN(auto backend, MakeCudaBackend("cuda", rig.device));
  CachingPool pool(*backend, PoolOptions{});
  MEMCOORD_ASSIGN_OR_RETURN(auto memory, PoolBucketMemory::Create(pool));
  std::vector<ParameterSpec> model;
  std::size_t total = 0;
  for (std::size_t bytes : MixedParameterBytes(bucketer_bytes)) {
    model.push_back({bytes / 4, DataType::kFloat32});
    total += bytes;
  }
  MEMCOORD_ASSIGN_OR_RETURN(auto bucketer, GradientBucketer::Create(*rig.ours, *memory, model));
  for (std::size_t p = 0; p < model.size(); ++p) {
    FillDevice(*bucketer->gradient(p), model[p].count, static_cast<unsigned>(p));
  }
  void* flat = nullptr;
  if (cudaMalloc(&flat, total) != cudaSuccess)
    return ResourceExhausted("cudaMalloc of the flat buffer failed");
  FillDevice(flat, total / 4, 3u);
  auto step = [&] {
    for (std::size_t p = model.size(); p-- > 0;) rig.ok &= bucketer->mark_ready(p).ok();
    rig.ok &= bucketer->finish().ok();
  };
  auto raw_step = [&] {
    ncclAllReduce(flat, flat, total / 4, ncclFloat32, ncclAvg, rig.raw, rig.raw_stream);
    cudaStreamSynchronize(rig.raw_stream);
  };
  step();
  raw_step();
  constexpr int kSteps = 20;
  double t_bucketer = 1e30, t_raw = 1e30;
  for (int round = 0; round < 3; ++round) {
    t_raw = std::min(t_raw, TimeSteps(kSteps, raw_step));
    t_bucketer = std::min(t_bucketer, TimeSteps(kSteps, step));
  }
  cudaFree(flat);
  return nlohmann::json{{"total_bytes", total},
                        {"parameters", model.size()},
                        {"buckets", bucketer->buckets().size()},
                        {"pool_backend", "cuda"},
                        {"bucketer_ms", t_bucketer * 1e3},
                        {"raw_nccl_allreduce_avg_ms", t_raw * 1e3},
                        {"bucketer_over_raw", t_bucketer / t_raw}};
}

// Our communicator; UNAVAILABLE (no GPU) is reported as skipped by Run.
Status MakeOurs(Rig& rig) {
  MEMCOORD_ASSIGN_OR_RETURN(auto rendezvous, MakeMpiRendezvous(MPI_COMM_WORLD, std::chrono::seconds(60)));
  NcclCommunicatorOptions options;
  options.device = rig.device;
  options.communicator = {std::chrono::seconds(120), false};
  MEMCOORD_ASSIGN_OR_RETURN(rig.ours, NcclCommunicator::Create(*rendezvous, options));
  return Status::Ok();
}

int Run(int argc, char** argv) {
  CLI::App app{"NCCL allreduce: memcoord NcclCommunicator vs raw ncclAllReduce"};
  std::string max_text = "1GiB";
  std::string bucketer_text = "256MiB";
  int device = -1;
  app.add_option("--max-bytes", max_text, "largest message (1 KiB .. this, x4 steps)");
  app.add_option("--bucketer-bytes", bucketer_text, "total gradient bytes for the bucketer comparison");
  app.add_option("--device", device, "CUDA device (default: local rank)");
  CLI11_PARSE(app, argc, argv);
  auto environment = MpiEnvironment::Init(&argc, &argv);
  auto max_bytes = ParseBytes(max_text);
  auto bucketer_bytes = ParseBytes(bucketer_text);
  if (!environment.ok() || !max_bytes.ok() || !bucketer_bytes.ok()) return 1;
  Rig rig;
  rig.rank = (*environment)->world_rank();
  rig.ranks = (*environment)->world_size();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  rig.device = device >= 0 ? device : (local != nullptr ? std::atoi(local) : 0);
  auto print = [&](const nlohmann::json& j) {
    if (rig.rank == 0) std::printf("%s\n", j.dump(2).c_str());
  };
  Status s = MakeOurs(rig);
  if (s.ok()) s = MakeRaw(rig);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rig.rank, s.ToString().c_str());
    const bool skipped = s.code() == StatusCode::kUnavailable;
    print({{skipped ? "skipped" : "error", s.ToString()}});
    return skipped ? 0 : 1;
  }
  Result<nlohmann::json> rows = SweepSizes(rig, *max_bytes);
  Result<nlohmann::json> bucketer = BenchBucketer(rig, *bucketer_bytes);
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, rig.device);
  print({{"ranks", rig.ranks},
         {"device", props.name},
         {"nccl_version", NCCL_VERSION_CODE},
         {"dtype", "fp32"},
         {"op", "sum"},
         {"ok", rig.ok && rows.ok()},
         {"allreduce", rows.ok() ? *rows : nlohmann::json{{"error", rows.status().ToString()}}},
         {"bucketer", bucketer.ok() ? *bucketer : nlohmann::json{{"error", bucketer.status().ToString()}}}});
  ncclCommDestroy(rig.raw);
  cudaStreamDestroy(rig.raw_stream);
  return rig.ok && rows.ok() ? 0 : 1;
}

}  // namespace
}  // namespace memcoord::bench

int main(int argc, char** argv) { return memcoord::bench::Run(argc, argv); }
