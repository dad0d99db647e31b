// pool_vs_async_bench: the per-operation cost of our CachingPool on the `cuda` and `cuda-vmm` backends
// against cudaMallocAsync / cudaFreeAsync on the device's default memory pool (release threshold UINT64_MAX,
// so it caches too), on README's mixed pattern, in one process on one stream. Each allocator first runs the
// whole pattern once untimed (warm-up: caches filled, first-touch costs paid), then --reps timed repetitions
// taken in turn (cuda, cuda-vmm, async, cuda, ...) so clock drift hits all alike; ns per operation is the
// median. Blocks still live at the end of a repetition are freed untimed. Prints one JSON object on stdout.
// Target (issue 3): ours at least 4x faster than cudaMallocAsync (1.06 us an op measured on an H200).
// Without a GPU (or with --kinds host,virtual) it runs the pool on host-side backends only, without
// cudaMallocAsync, which times the pool's own bookkeeping: a smoke test CI can run. Each pool's facts give
// its driver calls (maps, unmaps) in the warm-up and in the timed passes, and their modelled H200 cost.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "allocator/backend_factory.h"
#include "allocator/caching_pool.h"
#include "allocator/cuda/cuda_backends.h"
#include "allocator/driver_cost.h"
#include "bench/gpu/mixed_pattern.h"
#include "common/cuda_status.h"

namespace memcoord::bench {
namespace {

// One allocator under test: replays the pattern once and reports the wall time of the operations only.
class Contender {
 public:
  virtual ~Contender() = default;
  virtual std::string name() const = 0;
  // Runs the pattern; returns seconds spent in the operations, or a failure naming the call.
  virtual Result<double> run(const std::vector<MixedOp>& ops) = 0;
  virtual nlohmann::json facts() const { return nlohmann::json::object(); }
  // Called once after the untimed warm-up pass: what happens later is the steady state.
  virtual void end_warm_up() {}
};

class PoolContender final : public Contender {
 public:
  PoolContender(std::string kind, std::unique_ptr<DeviceBackend> backend, cudaStream_t stream)
      : kind_(std::move(kind)),
        backend_(std::move(backend)),
        pool_(std::make_unique<CachingPool>(
            *backend_, PoolOptions{.name = "bench-" + kind_,
                                   .remap = kind_.ends_with("+every-miss") ? RemapPolicy::kEveryMiss
                                                                           : RemapPolicy::kUnderPressure})),
        stream_(reinterpret_cast<StreamId>(stream)) {}
  std::string name() const override { return "pool/" + kind_; }

  Result<double> run(const std::vector<MixedOp>& ops) override {
    Status failure;
    const auto start = std::chrono::steady_clock::now();
    const bool ok = ReplayMixedPattern(
        ops, live_,
        [&](std::size_t bytes) -> void* {
          Result<void*> ptr = pool_->allocate(bytes, stream_);
          if (!ptr.ok()) {
            failure = ptr.status();
            return nullptr;
          }
          return *ptr;
        },
        [&](void* ptr) { (void)pool_->deallocate(ptr); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (void* ptr : live_) (void)pool_->deallocate(ptr);
    if (!ok) return failure.WithContext(name() + ": ");
    return seconds;
  }

  void end_warm_up() override { after_warm_up_ = pool_->stats(); }

  // Driver calls (maps = backend allocations, unmaps = backend frees) in the warm-up pass and in the timed
  // passes after it, and what the timed ones would cost on an H200 (allocator/driver_cost.h): a pool that
  // caches makes none once warm.
  nlohmann::json facts() const override {
    const PoolStats stats = pool_->stats();
    PoolStats timed = stats;
    timed.backend_allocations -= after_warm_up_.backend_allocations;
    timed.backend_frees -= after_warm_up_.backend_frees;
    timed.backend_allocated_bytes -= after_warm_up_.backend_allocated_bytes;
    timed.backend_released_bytes -= after_warm_up_.backend_released_bytes;
    return {{"allocations", stats.allocations},
            {"cache_hits", stats.cache_hits},
            {"backend_allocations", stats.backend_allocations},
            {"backend_frees", stats.backend_frees},
            {"maps_warmup", after_warm_up_.backend_allocations},
            {"unmaps_warmup", after_warm_up_.backend_frees},
            {"maps_timed", timed.backend_allocations},
            {"unmaps_timed", timed.backend_frees},
            {"modeled_driver_ms_timed", ModeledDriverMs(timed)},
            {"peak_allocated_bytes", stats.peak_allocated_bytes},
            {"peak_reserved_bytes", stats.peak_reserved_bytes},
            {"reserved_bytes", stats.reserved_bytes}};
  }

 private:
  std::string kind_;
  std::unique_ptr<DeviceBackend> backend_;
  std::unique_ptr<CachingPool> pool_;
  StreamId stream_;
  std::vector<void*> live_;
  PoolStats after_warm_up_;
};

class MallocAsyncContender final : public Contender {
 public:
  explicit MallocAsyncContender(cudaStream_t stream) : stream_(stream) {}
  std::string name() const override { return "cudaMallocAsync"; }

  // Makes the device's default pool keep everything it has (as our pool does) instead of releasing at syncs.
  Status set_up() {
    MEMCOORD_RETURN_IF_ERROR(
        CudaRuntimeStatus(cudaDeviceGetDefaultMemPool(&pool_, 0), "cudaDeviceGetDefaultMemPool"));
    std::uint64_t threshold = UINT64_MAX;
    return CudaRuntimeStatus(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold),
                             "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold, UINT64_MAX)");
  }

  Result<double> run(const std::vector<MixedOp>& ops) override {
    Status failure;
    const auto start = std::chrono::steady_clock::now();
    const bool ok = ReplayMixedPattern(
        ops, live_,
        [&](std::size_t bytes) -> void* {
          void* ptr = nullptr;
          const cudaError_t error = cudaMallocAsync(&ptr, bytes, stream_);
          if (error != cudaSuccess) {
            failure = CudaRuntimeStatus(error, "cudaMallocAsync");
            return nullptr;
          }
          return ptr;
        },
        [&](void* ptr) {
          const cudaError_t error = cudaFreeAsync(ptr, stream_);
          if (error != cudaSuccess && failure.ok()) failure = CudaRuntimeStatus(error, "cudaFreeAsync");
        });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (void* ptr : live_) (void)cudaFreeAsync(ptr, stream_);
    MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    if (!ok || !failure.ok()) return failure.WithContext(name() + ": ");
    return seconds;
  }

  nlohmann::json facts() const override {
    std::uint64_t reserved = 0;
    std::uint64_t reserved_high = 0;
    (void)cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved);
    (void)cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &reserved_high);
    return {{"reserved_bytes", reserved}, {"peak_reserved_bytes", reserved_high}};
  }

 private:
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
  std::vector<void*> live_;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int Fail(const Status& status) {
  nlohmann::json out = {{"error", status.ToString()}};
  std::printf("%s\n", out.dump(2).c_str());
  return 1;
}

struct BenchArgs {
  std::size_t operations = 200000;
  int reps = 7;
  std::uint64_t seed = 42;
  std::vector<std::string> kinds;  // "KIND" or "KIND+every-miss"
  bool no_async = false;
};

// False when the program should exit with `exit_code` (help printed, or a bad argument explained).
bool ParseArgs(int argc, char** argv, BenchArgs& args, int& exit_code) {
  CLI::App app{"CachingPool (cuda, cuda-vmm) vs cudaMallocAsync on README's mixed pattern"};
  app.add_option("--ops", args.operations, "operations per repetition")->check(CLI::PositiveNumber);
  app.add_option("--reps", args.reps, "timed repetitions per allocator (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", args.seed, "std::mt19937_64 seed of the pattern");
  app.add_option("--kinds", args.kinds,
                 "pool backends to time (default: cuda,cuda-vmm,cuda-vmm+every-miss with a GPU, host and "
                 "host+every-miss without); KIND+every-miss runs RemapPolicy::kEveryMiss")
      ->delimiter(',');
  app.add_flag("--no-async", args.no_async, "leave cudaMallocAsync out");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return false;
  }
  return true;
}

// The pools under test, one per kind, plus cudaMallocAsync when there is a GPU and it is wanted.
Result<std::vector<std::unique_ptr<Contender>>> MakeContenders(const BenchArgs& args, bool gpu,
                                                               cudaStream_t stream, std::string& device) {
  std::vector<std::string> kinds = args.kinds;
  if (kinds.empty())
    kinds = gpu ? std::vector<std::string>{"cuda", "cuda-vmm", "cuda-vmm+every-miss"}
                : std::vector<std::string>{"host", "host+every-miss"};
  std::vector<std::unique_ptr<Contender>> contenders;
  for (const std::string& name : kinds) {
    const std::string kind = name.substr(0, name.find('+'));
    MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBackend> backend,
                              IsCudaBackendKind(kind) ? MakeCudaBackend(kind, 0) : MakeBackend(kind));
    if (IsCudaBackendKind(kind)) device = backend->device_info().name;
    contenders.push_back(std::make_unique<PoolContender>(name, std::move(backend), stream));
  }
  if (gpu && !args.no_async) {
    auto async = std::make_unique<MallocAsyncContender>(stream);
    MEMCOORD_RETURN_IF_ERROR(async->set_up());
    contenders.push_back(std::move(async));
  }
  return contenders;
}

// One untimed pass each (fills every cache, pays first-touch costs); returns ns per operation of each.
Result<nlohmann::json> WarmUp(std::vector<std::unique_ptr<Contender>>& contenders,
                              const std::vector<MixedOp>& ops) {
  nlohmann::json warmup = nlohmann::json::object();
  for (auto& contender : contenders) {
    MEMCOORD_ASSIGN_OR_RETURN(double seconds, contender->run(ops));
    contender->end_warm_up();
    warmup[contender->name()] = seconds * 1e9 / static_cast<double>(ops.size());
  }
  return warmup;
}

// `reps` timed passes, taken in turn (a, b, c, a, b, c, ...) so that clock drift hits all alike.
Result<std::vector<std::vector<double>>> TimeRepetitions(std::vector<std::unique_ptr<Contender>>& contenders,
                                                         const std::vector<MixedOp>& ops, int reps) {
  std::vector<std::vector<double>> ns_per_op(contenders.size());
  for (int rep = 0; rep < reps; ++rep) {
    for (std::size_t c = 0; c < contenders.size(); ++c) {
      MEMCOORD_ASSIGN_OR_RETURN(double seconds, contenders[c]->run(ops));
      ns_per_op[c].push_back(seconds * 1e9 / static_cast<double>(ops.size()));
    }
  }
  return ns_per_op;
}

nlohmann::json Report(const BenchArgs& args, const std::string& device, bool with_async,
                      const std::vector<std::unique_ptr<Contender>>& contenders, const nlohmann::json& warmup,
                      const std::vector<std::vector<double>>& ns_per_op, std::size_t operations) {
  nlohmann::json results = nlohmann::json::object();
  for (std::size_t c = 0; c < contenders.size(); ++c) {
    results[contenders[c]->name()] = {
        {"ns_per_op_median", Median(ns_per_op[c])},
        {"ns_per_op_min", *std::min_element(ns_per_op[c].begin(), ns_per_op[c].end())},
        {"ns_per_op_reps", ns_per_op[c]},
        {"ns_per_op_warmup", warmup[contenders[c]->name()]},
        {"facts", contenders[c]->facts()}};
  }
  nlohmann::json out = {
      {"bench", "pool_vs_async"},
      {"device", device},
      {"pattern",
       {{"operations", operations}, {"seed", args.seed}, {"max_live", 1000}, {"size_log2", {8, 26}}}},
      {"reps", args.reps},
      {"results", results}};
  if (with_async) {
    const double async_ns = Median(ns_per_op.back());
    bool met = true;
    nlohmann::json speedup = nlohmann::json::object();
    for (std::size_t c = 0; c + 1 < contenders.size(); ++c) {
      const double ratio = async_ns / Median(ns_per_op[c]);
      speedup[contenders[c]->name()] = ratio;
      met = met && ratio >= 4.0;
    }
    out["speedup_vs_async"] = speedup;
    out["target_4x_met"] = met;
  }
  return out;
}

int Main(int argc, char** argv) {
  BenchArgs args;
  if (int exit_code = 0; !ParseArgs(argc, argv, args, exit_code)) return exit_code;
  const bool gpu = CudaGpuAvailable();
  cudaStream_t stream = nullptr;
  if (gpu) {
    Status s =
        CudaRuntimeStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!s.ok()) return Fail(s);
  }
  std::string device = "host";
  Result<std::vector<std::unique_ptr<Contender>>> contenders = MakeContenders(args, gpu, stream, device);
  if (!contenders.ok()) return Fail(contenders.status());
  const std::vector<MixedOp> ops = MakeMixedPattern(args.operations, args.seed);
  Result<nlohmann::json> warmup = WarmUp(*contenders, ops);
  if (!warmup.ok()) return Fail(warmup.status());
  Result<std::vector<std::vector<double>>> ns_per_op = TimeRepetitions(*contenders, ops, args.reps);
  if (!ns_per_op.ok()) return Fail(ns_per_op.status());
  const bool with_async = gpu && !args.no_async;
  const nlohmann::json out = Report(args, device, with_async, *contenders, *warmup, *ns_per_op, ops.size());
  std::printf("%s\n", out.dump(2).c_str());
  contenders->clear();
  if (stream != nullptr) (void)cudaStreamDestroy(stream);
  return 0;
}

}  // namespace
}  // namespace memcoord::bench

int main(int argc, char** argv) { return memcoord::bench::Main(argc, argv); }
