// Pool operation costs on the host-side backends (no GPU needed), side by side in one run:
//   CacheHitPair/<bytes>      allocate + free of one size, every call a cache hit.
//   CacheHitPairWorkerPool/<bytes>  the same on a pool set up as the worker sets its pools up (an OOM hook,
//                             tags registered, the block tagged): what the optional layers cost a hit.
//   MixedPattern/<growth>     the shared data README's mixed pattern (200,000 operations, mt19937_64(42),
//                             <= 1,000 live blocks, sizes (2^k + r) & ~255, k in 8..26), per operation,
//                             after a warm-up pass; mapping (default) next to PyTorch-style segments.
//   MallocMixedPattern        the same pattern through glibc malloc/free, as a reference point.
//   SteadyLoop                issue 11's loop over 512 B, 4 KiB, 1 MiB, 8 MiB (one live block).
//   FreeAfterForward/<other>  a training step's frees of the forward pass's 430 blocks, per free: by the
//                             thread that allocated them (0) or by another, long-lived one (1), as PyTorch's
//                             autograd thread frees them (other_thread_frees counts them).
// The pool benchmarks count driver calls per pass after their warm-up (maps_per_pass, unmaps_per_pass).
// Run: pool_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true (medians).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <semaphore>
#include <thread>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/virtual_backend.h"
#include "bench/gpu/mixed_pattern.h"

namespace memcoord {
namespace {

// The mixed pattern, generated once so the timed loop measures the allocator only.
const std::vector<bench::MixedOp>& MixedPattern() {
  static const std::vector<bench::MixedOp> ops = bench::MakeMixedPattern(200'000, 42);
  return ops;
}

template <typename Alloc, typename Free>
void RunMixed(Alloc&& alloc, Free&& free) {
  std::vector<void*> live;
  live.reserve(1000);
  bench::ReplayMixedPattern(MixedPattern(), live, alloc, free);
  for (void* p : live) free(p);
}

// Driver calls made while the benchmark loop ran (after its warm-up), per pass over the pattern.
void CountDriverCalls(benchmark::State& state, const PoolStats& before, const PoolStats& after) {
  const auto passes = static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
  state.counters["maps_per_pass"] =
      static_cast<double>(after.backend_allocations - before.backend_allocations) / passes;
  state.counters["unmaps_per_pass"] =
      static_cast<double>(after.backend_frees - before.backend_frees) / passes;
}

void BM_CacheHitPair(benchmark::State& state) {
  VirtualBackend backend;
  CachingPool pool(backend);
  const auto bytes = static_cast<std::size_t>(state.range(0));
  (void)pool.deallocate(*pool.allocate(bytes));  // warm
  for (auto _ : state) {
    void* p = *pool.allocate(bytes);
    benchmark::DoNotOptimize(p);
    (void)pool.deallocate(p);
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_CacheHitPair)->Arg(512)->Arg(1 << 20)->Arg(64 << 20);

void BM_CacheHitPairWorkerPool(benchmark::State& state) {
  VirtualBackend backend;
  CachingPool pool(backend);
  pool.set_oom_hook([](const OomEvent&) { return false; });
  const TagId tag = *pool.tag("activations");
  const auto bytes = static_cast<std::size_t>(state.range(0));
  (void)pool.deallocate(*pool.allocate(bytes, kDefaultStream, tag));  // warm
  for (auto _ : state) {
    void* p = *pool.allocate(bytes, kDefaultStream, tag);
    benchmark::DoNotOptimize(p);
    (void)pool.deallocate(p);
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_CacheHitPairWorkerPool)->Arg(512)->Arg(1 << 20);

void BM_MixedPattern(benchmark::State& state) {
  VirtualBackend backend;
  const PoolGrowth growth = state.range(0) == 0 ? PoolGrowth::kMapping : PoolGrowth::kSegments;
  CachingPool pool(backend, PoolOptions{.growth = growth});
  auto alloc = [&](std::size_t n) { return *pool.allocate(n); };
  auto free = [&](void* p) { (void)pool.deallocate(p); };
  RunMixed(alloc, free);  // warm-up pass fills the cache
  const PoolStats warm = pool.stats();
  for (auto _ : state) RunMixed(alloc, free);
  CountDriverCalls(state, warm, pool.stats());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(MixedPattern().size() + 0));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations() * MixedPattern().size()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["peak_reserved_GB"] = static_cast<double>(pool.stats().peak_reserved_bytes) / 1e9;
  state.SetLabel(growth == PoolGrowth::kMapping ? "mapping (default)" : "segments (PyTorch-style)");
}
BENCHMARK(BM_MixedPattern)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Issue 11's steady loop: 512 B, 4 KiB, 1 MiB, 8 MiB, one block live at a time. After the warm-up round
// every call is a cache hit: maps_per_pass and unmaps_per_pass are 0.
void BM_SteadyLoop(benchmark::State& state) {
  VirtualBackend backend;
  CachingPool pool(backend);
  constexpr std::size_t kSizes[] = {512, 4 << 10, 1 << 20, 8 << 20};
  auto round = [&] {
    for (std::size_t bytes : kSizes) (void)pool.deallocate(*pool.allocate(bytes));
  };
  round();
  const PoolStats warm = pool.stats();
  for (auto _ : state) round();
  CountDriverCalls(state, warm, pool.stats());
  state.SetItemsProcessed(state.iterations() * 8);
}
BENCHMARK(BM_SteadyLoop);

// A thread that allocates a step's forward blocks whenever asked, and lives as long as the benchmark (as
// PyTorch's Python thread does beside its autograd thread).
class ForwardThread {
 public:
  explicit ForwardThread(std::function<void()> forward)
      : forward_(std::move(forward)), thread_([this] { Loop(); }) {}
  ~ForwardThread() {
    stop_ = true;
    go_.release();
    thread_.join();
  }
  void RunOnce() {
    go_.release();
    done_.acquire();
  }

 private:
  void Loop() {
    while (true) {
      go_.acquire();
      if (stop_) return;
      forward_();
      done_.release();
    }
  }
  std::function<void()> forward_;
  std::binary_semaphore go_{0}, done_{0};
  bool stop_ = false;   // written before go_.release(), read after go_.acquire()
  std::thread thread_;  // last: it starts once the rest exists
};

// 430 blocks, as ResNet-50 AMP b128's step frees of another thread's block (2026-12-07b, an H200), in sizes
// from 512 B to 8 MiB: half of them small enough for a thread cache (at most 1 MiB).
void BM_FreeAfterForward(benchmark::State& state) {
  VirtualBackend backend;
  CachingPool pool(backend);
  constexpr std::size_t kBlocks = 430;
  constexpr std::size_t kSizes[] = {512, 64 << 10, 1 << 20, 8 << 20};
  std::vector<void*> blocks(kBlocks);
  auto forward = [&] {
    for (std::size_t i = 0; i < kBlocks; ++i) blocks[i] = *pool.allocate(kSizes[i % 4]);
  };
  auto backward = [&] {
    for (std::size_t i = kBlocks; i-- > 0;) (void)pool.deallocate(blocks[i]);
  };
  const bool other = state.range(0) == 1;
  ForwardThread forward_thread(forward);
  auto run_forward = [&] { other ? forward_thread.RunOnce() : forward(); };
  run_forward();  // warm: the pool holds the step's memory from here on
  backward();
  const PoolStats warm = pool.stats();
  for (auto _ : state) {
    state.PauseTiming();
    run_forward();
    state.ResumeTiming();
    backward();
  }
  const PoolStats after = pool.stats();
  const auto passes = static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
  state.counters["ns_per_free"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBlocks),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["other_thread_frees_per_pass"] =
      static_cast<double>(after.other_thread_frees - warm.other_thread_frees) / passes;
  CountDriverCalls(state, warm, after);
  state.SetLabel(other ? "freed by another thread (autograd)" : "freed by the allocating thread");
}
BENCHMARK(BM_FreeAfterForward)->Arg(0)->Arg(1);

void BM_MallocMixedPattern(benchmark::State& state) {
  auto alloc = [](std::size_t n) { return std::malloc(n); };
  auto free = [](void* p) { std::free(p); };
  for (auto _ : state) RunMixed(alloc, free);
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations() * MixedPattern().size()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel("glibc malloc (reference)");
}
BENCHMARK(BM_MallocMixedPattern)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memcoord

BENCHMARK_MAIN();
