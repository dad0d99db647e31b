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
  if (!environment.ok()) return 1;
  const int rank = (*environment)->world_rank();
  const int n = (*environment)->world_size();
  if (device < 0) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    device = local != nullptr ? std::atoi(local) : 0;
  }
  auto print = [&](const nlohmann::json& j) {
    if (rank == 0) std::printf("%s\n", j.dump(2).c_str());
  };

  auto rendezvous = MakeMpiRendezvous(MPI_COMM_WORLD, std::chrono::seconds(60));
  if (!rendezvous.ok()) return 1;
  NcclCommunicatorOptions options;
  options.device = device;
  options.communicator = {std::chrono::seconds(120), false};
  auto ours = NcclCommunicator::Create(**rendezvous, options);
  if (!ours.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, ours.status().ToString().c_str());
    print(
        {{ours.status().code() == StatusCode::kUnavailable ? "skipped" : "error", ours.status().ToString()}});
    return ours.status().code() == StatusCode::kUnavailable ? 0 : 1;
  }
  // The raw baseline: a plain blocking NCCL communicator, unique id through MPI_Bcast.
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t raw = nullptr;
  cudaSetDevice(device);
  if (ncclCommInitRank(&raw, n, id, rank) != ncclSuccess) return 1;
  cudaStream_t raw_stream = nullptr;
  cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking);

  auto max_bytes = ParseBytes(max_text);
  auto bucketer_bytes = ParseBytes(bucketer_text);
  if (!max_bytes.ok() || !bucketer_bytes.ok()) return 1;
  void* send = nullptr;
  void* recv = nullptr;
  if (cudaMalloc(&send, *max_bytes) != cudaSuccess || cudaMalloc(&recv, *max_bytes) != cudaSuccess) return 1;
  FillDevice(send, *max_bytes / 4, 7u + static_cast<unsigned>(rank));
  auto ours_stream = reinterpret_cast<cudaStream_t>((*ours)->stream());

  nlohmann::json rows = nlohmann::json::array();
  bool ok = true;
  for (std::size_t bytes : Sizes(1024, *max_bytes, 4)) {
    const std::size_t count = bytes / 4;
    const int iterations = std::min(Iterations(bytes) * 4, 2000);
    auto time_raw = [&] {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i)
        ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, raw, raw_stream);
      cudaStreamSynchronize(raw_stream);
      return SlowestRank(Seconds(start)) / iterations;
    };
    auto time_ours_pipelined = [&] {  // enqueue back to back, wait at the end (as nccl-tests time)
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::unique_ptr<PendingCollective>> pending;
      pending.reserve(static_cast<std::size_t>(iterations));
      for (int i = 0; i < iterations; ++i) {
        auto p = (*ours)->start_allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum);
        ok &= p.ok();
        if (p.ok()) pending.push_back(std::move(*p));
      }
      for (auto& p : pending) ok &= p->wait().ok();
      return SlowestRank(Seconds(start)) / iterations;
    };
    auto time_ours_blocking = [&] {  // every call waits for its result
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i) {
        ok &= (*ours)->allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum).ok();
      }
      return SlowestRank(Seconds(start)) / iterations;
    };
    time_raw();
    time_ours_pipelined();
    const double t_raw = std::min(time_raw(), time_raw());
    const double t_pipe = std::min(time_ours_pipelined(), time_ours_pipelined());
    const double t_block = std::min(time_ours_blocking(), time_ours_blocking());
    rows.push_back({{"bytes", bytes},
                    {"iterations", iterations},
                    {"raw_nccl_us", t_raw * 1e6},
                    {"ours_pipelined_us", t_pipe * 1e6},
                    {"ours_blocking_us", t_block * 1e6},
                    {"raw_algbw_gbps", bytes / t_raw / 1e9},
                    {"ours_pipelined_algbw_gbps", bytes / t_pipe / 1e9},
                    {"ours_blocking_algbw_gbps", bytes / t_block / 1e9},
                    {"raw_busbw_gbps", bytes / t_raw * BusFactor(n) / 1e9},
                    {"ours_pipelined_busbw_gbps", bytes / t_pipe * BusFactor(n) / 1e9}});
  }
  (void)ours_stream;
  cudaFree(send);
  cudaFree(recv);

  // Bucketer over a device pool.
  nlohmann::json bucketer_json;
  {
    auto backend = MakeCudaBackend("cuda", device);
    if (!backend.ok()) {
      bucketer_json = {{"error", backend.status().ToString()}};
    } else {
      CachingPool pool(**backend, PoolOptions{});
      auto memory = PoolBucketMemory::Create(pool);
      std::vector<ParameterSpec> model;
      const std::size_t pattern[] = {(2u << 20) + 4, 512u << 10,      3u << 20,
                                     64u << 10,      (1u << 20) + 12, 8u << 20};
      std::size_t total = 0;
      for (std::size_t i = 0; total < *bucketer_bytes; ++i) {
        const std::size_t bytes = std::min(pattern[i % 6], *bucketer_bytes - total) / 4 * 4;
        if (bytes == 0) break;
        model.push_back({bytes / 4, DataType::kFloat32});
        total += bytes;
      }
      auto bucketer = memory.ok() ? GradientBucketer::Create(**ours, **memory, model)
                                  : Result<std::unique_ptr<GradientBucketer>>(memory.status());
      if (!bucketer.ok()) {
        bucketer_json = {{"error", bucketer.status().ToString()}};
      } else {
        for (std::size_t p = 0; p < model.size(); ++p) {
          FillDevice(*(*bucketer)->gradient(p), model[p].count, static_cast<unsigned>(p));
        }
        void* flat = nullptr;
        cudaMalloc(&flat, total);
        FillDevice(flat, total / 4, 3u);
        const int steps = 20;
        auto step = [&] {
          for (std::size_t p = model.size(); p-- > 0;) ok &= (*bucketer)->mark_ready(p).ok();
          ok &= (*bucketer)->finish().ok();
        };
        auto raw_step = [&] {
          ncclAllReduce(flat, flat, total / 4, ncclFloat32, ncclAvg, raw, raw_stream);
          cudaStreamSynchronize(raw_stream);
        };
        auto time_steps = [&](auto&& f) {
          MPI_Barrier(MPI_COMM_WORLD);
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < steps; ++i) f();
          return SlowestRank(Seconds(start)) / steps;
        };
        step();
        raw_step();
        double t_bucketer = 1e30, t_raw = 1e30;
        for (int round = 0; round < 3; ++round) {
          t_raw = std::min(t_raw, time_steps(raw_step));
          t_bucketer = std::min(t_bucketer, time_steps(step));
        }
        cudaFree(flat);
        bucketer_json = {{"total_bytes", total},
                         {"parameters", model.size()},
                         {"buckets", (*bucketer)->buckets().size()},
                         {"pool_backend", "cuda"},
                         {"bucketer_ms", t_bucketer * 1e3},
                         {"raw_nccl_allreduce_avg_ms", t_raw * 1e3},
                         {"bucketer_over_raw", t_bucketer / t_raw}};
      }
    }
  }
  int gpu_count = 0;
  cudaGetDeviceCount(&gpu_count);
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, device);
  print({{"ranks", n},
         {"device", props.name},
         {"nccl_version", NCCL_VERSION_CODE},
         {"dtype", "fp32"},
         {"op", "sum"},
         {"ok", ok},
         {"allreduce", rows},
         {"bucketer", bucketer_json}});
  ncclCommDestroy(raw);
  cudaStreamDestroy(raw_stream);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace memcoord::bench

int main(int argc, char** argv) { return memcoord::bench::Run(argc, argv); }
