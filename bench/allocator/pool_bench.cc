// Pool operation costs on the host-side backends (no GPU needed), side by side in one run:
//   CacheHitPair/<bytes>      allocate + free of one size, every call a cache hit.
//   MixedPattern/<growth>     the shared data README's mixed pattern (200,000 operations, mt19937_64(42),
//                             <= 1,000 live blocks, sizes (2^k + r) & ~255, k in 8..26), per operation,
//                             after a warm-up pass; mapping (default) next to PyTorch-style segments.
//   MallocMixedPattern        the same pattern through glibc malloc/free, as a reference point.
// Run: pool_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true (medians).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

struct MixedOp {
  bool alloc;
  std::size_t size_or_victim;  // bytes for an allocation, index into the live list for a free
};

// The mixed pattern, generated once so the timed loop measures the allocator only.
const std::vector<MixedOp>& MixedPattern() {
  static const std::vector<MixedOp> ops = [] {
    std::vector<MixedOp> out;
    std::mt19937_64 rng(42);
    std::size_t live = 0;
    for (int i = 0; i < 200'000; ++i) {
      bool alloc = live < 1000 && (live == 0 || rng() % 2 == 0);
      if (alloc) {
        const int k = std::uniform_int_distribution<int>(8, 26)(rng);
        const std::size_t r = std::uniform_int_distribution<std::size_t>(0, (std::size_t{1} << k) - 1)(rng);
        std::size_t size = ((std::size_t{1} << k) + r) & ~std::size_t{255};
        out.push_back({true, size});
        ++live;
      } else {
        out.push_back({false, std::uniform_int_distribution<std::size_t>(0, live - 1)(rng)});
        --live;
      }
    }
    return out;
  }();
  return ops;
}

template <typename Alloc, typename Free>
void RunMixed(Alloc&& alloc, Free&& free) {
  std::vector<void*> live;
  live.reserve(1000);
  for (const MixedOp& op : MixedPattern()) {
    if (op.alloc) {
      live.push_back(alloc(op.size_or_victim));
    } else {
      free(live[op.size_or_victim]);
      live[op.size_or_victim] = live.back();
      live.pop_back();
    }
  }
  for (void* p : live) free(p);
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

void BM_MixedPattern(benchmark::State& state) {
  VirtualBackend backend;
  const PoolGrowth growth = state.range(0) == 0 ? PoolGrowth::kMapping : PoolGrowth::kSegments;
  CachingPool pool(backend, PoolOptions{.growth = growth});
  auto alloc = [&](std::size_t n) { return *pool.allocate(n); };
  auto free = [&](void* p) { (void)pool.deallocate(p); };
  RunMixed(alloc, free);  // warm-up pass fills the cache
  for (auto _ : state) RunMixed(alloc, free);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(MixedPattern().size() + 0));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations() * MixedPattern().size()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["peak_reserved_GB"] = static_cast<double>(pool.stats().peak_reserved_bytes) / 1e9;
  state.SetLabel(growth == PoolGrowth::kMapping ? "mapping (default)" : "segments (PyTorch-style)");
}
BENCHMARK(BM_MixedPattern)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

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
