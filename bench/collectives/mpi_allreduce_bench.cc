// Allreduce bus bandwidth of our MPI communicator next to raw MPI_Allreduce in the same run, and the
// GradientBucketer against one raw allreduce of the same total bytes. Prints one JSON object.
//   mpirun -np N mpi_allreduce_bench [--max-bytes 256MiB] [--bucketer-bytes 256MiB] [--rounds 3]
// Each size alternates raw (MPI_Allreduce) / raw nonblocking (MPI_Iallreduce + MPI_Wait, what ours is built
// on) / ours / ours with verify_arguments for `rounds` rounds and keeps each one's best
// time (the slowest rank's). Buffers hold random fp32 values, never zeros. The bucketer step (mark_ready for
// every parameter in backward order, then finish: allreduce avg) is compared with one raw blocking
// MPI_Allreduce of the same bytes, the same followed by the division, and one raw MPI_Iallreduce + MPI_Wait.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "allocator/host_backend.h"
#include "bench/collectives/bench_util.h"
#include "collectives/gradient_bucketer.h"
#include "collectives/mpi_communicator.h"
#include "collectives/mpi_environment.h"
#include "common/bytes.h"
#include "worker/pool_bucket_memory.h"

namespace memcoord::bench {
namespace {

double SlowestRank(double seconds) {
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

template <typename Op>
double TimeIt(int iterations, Op op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) op();
  return SlowestRank(Seconds(start)) / iterations;
}

void Fill(std::vector<float>& data, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (float& x : data) x = dist(rng);
}

struct Args {
  std::size_t max_bytes = std::size_t{256} << 20;
  std::size_t bucketer_bytes = std::size_t{256} << 20;
  int rounds = 3;
};

// The communicators compared: ours without and with verify_arguments, and a raw duplicate of the world.
struct Comms {
  std::unique_ptr<MpiCommunicator> ours;
  std::unique_ptr<MpiCommunicator> checked;
  MPI_Comm raw = MPI_COMM_NULL;
};

Status ParseArgs(int argc, char** argv, Args& args) {
  CLI::App app{"allreduce bus bandwidth: memcoord MPI communicator vs raw MPI_Allreduce"};
  std::string max_text = "256MiB";
  std::string bucketer_text = "256MiB";
  app.add_option("--max-bytes", max_text,
                 "largest message (1 KiB .. this, x4 steps); 1GiB for the full range");
  app.add_option("--bucketer-bytes", bucketer_text, "total gradient bytes for the bucketer comparison");
  app.add_option("--rounds", args.rounds, "alternating rounds per size; the best of each is kept");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the help or the error
    return InvalidArgument(e.get_exit_code() == 0 ? "help printed" : e.what());
  }
  MEMCOORD_ASSIGN_OR_RETURN(args.max_bytes, ParseBytes(max_text));
  MEMCOORD_ASSIGN_OR_RETURN(args.bucketer_bytes, ParseBytes(bucketer_text));
  return Status::Ok();
}

// One row of the size sweep: raw blocking / raw nonblocking / ours / ours verified, alternating for
// `rounds` rounds, the best of each kept.
nlohmann::json TimeOneSize(Comms& comms, const Args& args, std::size_t bytes, std::vector<float>& send,
                           std::vector<float>& recv, int n) {
  const std::size_t count = bytes / 4;
  const int iterations = Iterations(bytes);
  double best_raw = 1e30, best_raw_nb = 1e30, best_ours = 1e30, best_checked = 1e30;
  bool ok = true;
  auto ours = [&](MpiCommunicator& comm) {
    ok &= comm.allreduce(send.data(), recv.data(), count, DataType::kFloat32, ReduceOp::kSum).ok();
  };
  MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comms.raw);  // warm-up
  ours(*comms.ours);
  for (int round = 0; round < args.rounds; ++round) {
    best_raw = std::min(best_raw, TimeIt(iterations, [&] {
                          MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                        comms.raw);
                        }));
    best_raw_nb = std::min(best_raw_nb, TimeIt(iterations, [&] {
                             MPI_Request request;
                             MPI_Iallreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT,
                                            MPI_SUM, comms.raw, &request);
                             MPI_Wait(&request, MPI_STATUS_IGNORE);
                           }));
    best_ours = std::min(best_ours, TimeIt(iterations, [&] { ours(*comms.ours); }));
    best_checked = std::min(best_checked, TimeIt(iterations, [&] { ours(*comms.checked); }));
  }
  const double factor = BusFactor(n);
  return {{"bytes", bytes},
          {"iterations", iterations},
          {"raw_mpi_us", best_raw * 1e6},
          {"raw_mpi_iallreduce_us", best_raw_nb * 1e6},
          {"ours_us", best_ours * 1e6},
          {"ours_verified_us", best_checked * 1e6},
          {"raw_mpi_busbw_gbps", bytes / best_raw * factor / 1e9},
          {"ours_busbw_gbps", bytes / best_ours * factor / 1e9},
          {"ours_verified_busbw_gbps", bytes / best_checked * factor / 1e9},
          {"ours_over_raw_time", best_ours / best_raw},
          {"ok", ok}};
}

nlohmann::json SweepSizes(Comms& comms, const Args& args, int rank, int n) {
  nlohmann::json rows = nlohmann::json::array();
  std::vector<float> send(args.max_bytes / 4);
  std::vector<float> recv(args.max_bytes / 4);
  Fill(send, 17u + static_cast<unsigned>(rank));
  for (std::size_t bytes : Sizes(1024, args.max_bytes, 4))
    rows.push_back(TimeOneSize(comms, args, bytes, send, recv, n));
  return rows;
}

// The bucketer step (mark_ready for every parameter in backward order, then finish: allreduce avg) next to
// one raw blocking MPI_Allreduce of the same bytes, the same followed by the division, and one raw
// MPI_Iallreduce + MPI_Wait. Default caps (25 MiB, 1 MiB first).
Result<nlohmann::json> BenchBucketer(Comms& comms, const Args& args, int rank, int n) {
  std::vector<ParameterSpec> model;
  std::size_t total = 0;
  for (std::size_t bytes : MixedParameterBytes(args.bucketer_bytes)) {
    model.push_back({bytes / 4, DataType::kFloat32});
    total += bytes;
  }
  HostBackend backend(std::uint64_t{8} << 30);
  CachingPool pool(backend, PoolOptions{});
  MEMCOORD_ASSIGN_OR_RETURN(auto memory, PoolBucketMemory::Create(pool));
  MEMCOORD_ASSIGN_OR_RETURN(auto bucketer, GradientBucketer::Create(*comms.ours, *memory, model));
  for (std::size_t p = 0; p < model.size(); ++p) {
    std::vector<float> values(model[p].count);
    Fill(values, static_cast<unsigned>(p * 131 + static_cast<std::size_t>(rank)));
    std::copy(values.begin(), values.end(), static_cast<float*>(*bucketer->gradient(p)));
  }
  std::vector<float> flat(total / 4);
  Fill(flat, 99u + static_cast<unsigned>(rank));
  const int steps = Iterations(total);
  const int length = static_cast<int>(flat.size());
  bool ok = true;
  auto step = [&] {
    for (std::size_t p = model.size(); p-- > 0;) ok &= bucketer->mark_ready(p).ok();
    ok &= bucketer->finish().ok();
  };
  step();  // warm-up
  MPI_Allreduce(MPI_IN_PLACE, flat.data(), length, MPI_FLOAT, MPI_SUM, comms.raw);
  double best_bucketer = 1e30, best_raw_sum = 1e30, best_raw_avg = 1e30, best_raw_nonblocking = 1e30;
  for (int round = 0; round < args.rounds; ++round) {
    best_raw_sum = std::min(best_raw_sum, TimeIt(steps, [&] {
                              MPI_Allreduce(MPI_IN_PLACE, flat.data(), length, MPI_FLOAT, MPI_SUM, comms.raw);
                            }));
    best_raw_avg = std::min(best_raw_avg, TimeIt(steps, [&] {
                              MPI_Allreduce(MPI_IN_PLACE, flat.data(), length, MPI_FLOAT, MPI_SUM, comms.raw);
                              for (float& x : flat) x /= static_cast<float>(n);
                            }));
    best_raw_nonblocking =
        std::min(best_raw_nonblocking, TimeIt(steps, [&] {
                   MPI_Request request;
                   MPI_Iallreduce(MPI_IN_PLACE, flat.data(), length, MPI_FLOAT, MPI_SUM, comms.raw, &request);
                   MPI_Wait(&request, MPI_STATUS_IGNORE);
                 }));
    best_bucketer = std::min(best_bucketer, TimeIt(steps, step));
  }
  return nlohmann::json{{"total_bytes", total},
                        {"parameters", model.size()},
                        {"buckets", bucketer->buckets().size()},
                        {"steps", steps},
                        {"bucketer_ms", best_bucketer * 1e3},
                        {"raw_allreduce_sum_ms", best_raw_sum * 1e3},
                        {"raw_allreduce_then_divide_ms", best_raw_avg * 1e3},
                        {"bucketer_over_raw_sum", best_bucketer / best_raw_sum},
                        {"bucketer_over_raw_avg", best_bucketer / best_raw_avg},
                        {"raw_iallreduce_wait_ms", best_raw_nonblocking * 1e3},
                        {"bucketer_over_raw_iallreduce", best_bucketer / best_raw_nonblocking},
                        {"ok", ok}};
}

int Run(int argc, char** argv) {
  Args args;
  auto environment = MpiEnvironment::Init(&argc, &argv);
  Status s = environment.ok() ? ParseArgs(argc, argv, args) : environment.status();
  Comms comms;
  if (s.ok()) {
    auto ours = MpiCommunicator::Create(MPI_COMM_WORLD, {std::chrono::minutes(2), false});
    auto checked = MpiCommunicator::Create(MPI_COMM_WORLD, {std::chrono::minutes(2), true});
    s = ours.ok() ? checked.status() : ours.status();
    if (s.ok()) {
      comms.ours = std::move(*ours);
      comms.checked = std::move(*checked);
      MPI_Comm_dup(MPI_COMM_WORLD, &comms.raw);
    }
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const int rank = (*environment)->world_rank();
  const int n = (*environment)->world_size();
  nlohmann::json out = {{"ranks", n},
                        {"dtype", "fp32"},
                        {"op", "sum"},
                        {"busbw_definition", "algbw * 2(n-1)/n, GB/s = 1e9 bytes/s"}};
  out["allreduce"] = SweepSizes(comms, args, rank, n);
  Result<nlohmann::json> bucketer = BenchBucketer(comms, args, rank, n);
  out["bucketer"] = bucketer.ok() ? *bucketer : nlohmann::json{{"error", bucketer.status().ToString()}};
  MPI_Comm_free(&comms.raw);
  if (rank == 0) std::printf("%s\n", out.dump(2).c_str());
  return bucketer.ok() ? 0 : 1;
}

}  // namespace
}  // namespace memcoord::bench

int main(int argc, char** argv) { return memcoord::bench::Run(argc, argv); }
