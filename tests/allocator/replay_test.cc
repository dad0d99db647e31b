// The headline figure as a regression test: on each shared real trace, the default pool on the `virtual`
// backend reserves no more than the best of PyTorch's three allocator configurations.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "allocator/caching_pool.h"
#include "allocator/lagging_streams_adaptor.h"
#include "allocator/trace.h"
#include "allocator/trace_replay.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

struct Anchor {
  const char* trace;
  double pytorch_best_ratio;  // shared data README: best of native, expandable_segments, cudaMallocAsync
};

constexpr Anchor kAnchors[] = {
    {"gpt2_fp32", 1.0043},
    {"gpt2_bf16_varlen", 1.0717},
    {"resnet50_amp", 1.0100},
    {"gpt2_generate", 1.0737},
};

// The default pool at or below PyTorch's best configuration on each: at it on GPT-2 fp32 and generation
// (1.00433 and 1.07372 against anchors rounded to 4 decimals), where expandable segments' rule, which the
// default shares (grow_to_unit_end), sets the peak; below it on GPT-2 bf16 and ResNet-50.
TEST(Replay, DefaultPoolMatchesOrBeatsPyTorchOnEveryRealTrace) {
  double log_sum = 0;
  for (const Anchor& a : kAnchors) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + a.trace + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    VirtualBackend backend;
    CachingPool pool(backend);
    Result<ReplayResult> r = Replay(*trace, pool);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->events, trace->allocations + trace->frees);
    EXPECT_LE(r->ratio, a.pytorch_best_ratio + 5e-5) << a.trace;
    EXPECT_GE(r->ratio, 1.0) << a.trace;
    log_sum += std::log(r->ratio);
    EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
    EXPECT_EQ(pool.stats().allocated_bytes, 0u);  // the replay frees what it allocated
  }
  // 1.0236 (README's table): GPT-2 generation's 1.0737 weighs most. With grow_to_unit_end off it was 1.0208
  // (generation 1.0686); before Arena::fit ranked a block before a hole by its reach, 1.0123.
  EXPECT_LE(std::exp(log_sum / 4), 1.025);
}

// `trace` replayed on a fresh default pool with `set` applied to its options; the pool's invariants hold
// after.
template <typename Set>
ReplayResult ReplayWith(const Trace& trace, Set set) {
  VirtualBackend backend;
  PoolOptions options;
  set(options);
  CachingPool pool(backend, options);
  Result<ReplayResult> r = Replay(trace, pool);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  return r.ok() ? *r : ReplayResult{};
}

// PoolOptions::merge_unit_ends on the shared traces, with 20 MiB units: a fifth fewer driver allocations or
// more where misses start or end between multiples of the unit (GPT-2 fp32 646 against 827, bf16 788 against
// 1,010, ResNet-50 330 against 442); generation's misses are mostly single units (488 against 490). Its cost
// is the footprint, within 1% of the peak request of the grid's here (bf16: 1.0107 against 1.0088);
// pool_options.h says why it is off.
TEST(Replay, MergedUnitEndsMapFewerUnits) {
  for (const Anchor& a : kAnchors) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + a.trace + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    auto replay = [&](bool merge) {
      const ReplayResult r = ReplayWith(*trace, [merge](PoolOptions& o) {
        o.merge_unit_ends = merge;
        o.grow_to_unit_end = false;  // merging's own effect; growing to the unit's end cuts fewer pieces
        o.large_map_unit_bytes =
            20 << 20;  // and the grid it was measured on (the default's units are coarser)
      });
      return std::make_tuple(r.ratio, r.backend_allocations);
    };
    const auto [grid_ratio, grid_units] = replay(false);
    const auto [merged_ratio, merged_units] = replay(true);
    EXPECT_LE(merged_ratio, grid_ratio + 0.01) << a.trace;
    if (std::string(a.trace) == "gpt2_generate") {
      EXPECT_LE(merged_units, grid_units) << a.trace;
    } else {
      EXPECT_LE(merged_units * 100, grid_units * 80)
          << a.trace << ": " << merged_units << " of " << grid_units;
    }
  }
}

// PoolOptions::grow_to_unit_end (the default) on the shared traces, with 20 MiB units (the step it grows by
// by default): a miss that grows maps on to the step's multiple, so the requests after it take the slack:
// fewer misses (one cuMemSetAccess call each on a GPU) and fewer units than mapping each miss's exact
// shortfall, at a footprint still under PyTorch's best on each (pool_options.h has the figures).
TEST(Replay, GrowingToTheUnitEndMissesLessWithinPyTorchsBest) {
  for (const Anchor& a : kAnchors) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + a.trace + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    const ReplayResult exact = ReplayWith(*trace, [](PoolOptions& o) {
      o.grow_to_unit_end = false;
      o.large_map_unit_bytes = 20 << 20;
    });
    const ReplayResult grown = ReplayWith(*trace, [](PoolOptions& o) { o.large_map_unit_bytes = 20 << 20; });
    // The anchors are rounded to 4 decimals: GPT-2 fp32 and generation replay at PyTorch's best (1.00433,
    // 1.07372), as expandable segments' own rule would.
    EXPECT_LE(grown.ratio, a.pytorch_best_ratio + 5e-5) << a.trace;
    EXPECT_LE(grown.misses * 100, exact.misses * 85)
        << a.trace << ": " << grown.misses << " of " << exact.misses;
    EXPECT_LE(grown.backend_allocations * 100, exact.backend_allocations * 80)
        << a.trace << ": " << grown.backend_allocations << " of " << exact.backend_allocations;
  }
}

// The default's 40 MiB units against 20 MiB ones, growing by the same 20 MiB step: a quarter fewer driver
// allocations (GPT-2 fp32 459 against 603, bf16 599 against 778, ResNet-50 228 against 328; generation's
// misses are mostly single units, 83 against 87) at the same peak on GPT-2 fp32 and generation, 18 MiB lower
// on ResNet-50. GPT-2 bf16's varying lengths pack under pressure, where a unit is unmapped only whole: 60 MiB
// higher here (24,104,665,088 bytes against 24,041,750,528, still 1.0717 of the peak request: PyTorch's best
// is checked above), 18 MiB lower replayed at --gpu-lag 200.
TEST(Replay, FortyMiBUnitsMapFewerAtNoHigherPeak) {
  for (const Anchor& a : kAnchors) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + a.trace + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    const ReplayResult twenty = ReplayWith(*trace, [](PoolOptions& o) { o.large_map_unit_bytes = 20 << 20; });
    const ReplayResult forty = ReplayWith(*trace, [](PoolOptions&) {});
    const bool packs = std::string(a.trace) == "gpt2_bf16_varlen";
    EXPECT_LE(forty.peak_reserved_bytes, twenty.peak_reserved_bytes + (packs ? 64 << 20 : 0)) << a.trace;
    if (std::string(a.trace) == "gpt2_generate") {
      EXPECT_LT(forty.backend_allocations, twenty.backend_allocations) << a.trace;
    } else {
      EXPECT_LE(forty.backend_allocations * 100, twenty.backend_allocations * 80)
          << a.trace << ": " << forty.backend_allocations << " of " << twenty.backend_allocations;
    }
  }
}

// Robustness: the same traces with every allocation's size perturbed by up to +-10% (the workloads people
// run are not these exact ones). The ratio stays in PyTorch's range and the driver calls stay few: a
// footprint that depended on one trace's exact sizes, or remapping that came back with other sizes, shows
// here.
TEST(Replay, PerturbedSizesKeepTheRatioAndFewDriverCalls) {
  for (const Anchor& a : kAnchors) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + a.trace + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    for (std::uint64_t seed : {1, 2}) {
      Trace perturbed = *trace;
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<double> factor(0.9, 1.1);
      std::vector<std::uint64_t> slot_bytes(perturbed.slots, 0);
      std::uint64_t live = 0;
      perturbed.peak_live_bytes = 0;
      for (TraceEvent& e : perturbed.events) {
        if (e.kind == TraceEvent::Kind::kAlloc) {
          e.bytes = std::max<std::uint64_t>(
              1, static_cast<std::uint64_t>(static_cast<double>(e.bytes) * factor(rng)));
          slot_bytes[e.slot] = e.bytes;
          live += e.bytes;
          perturbed.peak_live_bytes = std::max(perturbed.peak_live_bytes, live);
        } else {
          live -= slot_bytes[e.slot];
        }
      }
      VirtualBackend backend;
      CachingPool pool(backend);
      Result<ReplayResult> r = Replay(perturbed, pool);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      // Measured (20 MiB units): ratio 1.0034-1.0100 on the training traces, 1.0545-1.0594 on gpt2_generate;
      // units unmapped up to 285 (gpt2_fp32, 9,467 events).
      EXPECT_LE(r->ratio, 1.08) << a.trace << " seed " << seed;
      EXPECT_LE(r->backend_frees, r->events / 25) << a.trace << " seed " << seed;
      EXPECT_TRUE(pool.check_invariants().ok());
    }
  }
}

// The replay as a GPU in training sees it: the device 1,000 events behind the host (a GPT-2 step is ~2,200
// events), so blocks freed in the last 1,000 events are busy and can be packed only after a wait for their
// marker. The pool still packs as on idle streams (same peak, within 0.1%), waiting for markers and never
// synchronizing a stream. Before markers were kept up to 1024 per stream (64 before), gpt2_fp32 reserved
// 1.0410 here and alternating (recorded on the H200) 1.0356, as the real runs did.
TEST(Replay, WithTheDeviceBehindTheHostThePoolPacksByWaitingForMarkers) {
  for (const char* name : {"gpt2_fp32", "alternating"}) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + name + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    VirtualBackend idle_device;
    CachingPool idle_pool(idle_device);
    Result<ReplayResult> idle = Replay(*trace, idle_pool);
    ASSERT_TRUE(idle.ok()) << idle.status().ToString();

    // mark_waits on: packing at the high-water mark waits for the markers the GPU has not yet passed.
    VirtualBackend device;
    LaggingStreamsAdaptor lagging(device, 1000);
    PoolOptions waits_at_mark;
    waits_at_mark.pack_waits_at_mark = true;
    CachingPool pool(lagging, ForLaggedReplay(waits_at_mark));
    Result<ReplayResult> lagged = Replay(*trace, pool, &lagging);
    ASSERT_TRUE(lagged.ok()) << lagged.status().ToString();
    EXPECT_LE(lagged->ratio, idle->ratio + 0.001) << name;
    EXPECT_GT(lagged->pack_waits, 0u) << name;
    EXPECT_GT(lagged->waited_events, 0u) << name;
    EXPECT_EQ(lagged->pack_stream_syncs, 0u) << name;
    EXPECT_EQ(lagged->lag_events, 1000u);
    EXPECT_GT(lagged->backend_frees, 0u) << name;  // units unmapped: it packed
    EXPECT_TRUE(pool.check_invariants().ok());

    // The default (mark_waits off): no wait on these two traces, at the idle replay's peak all the same.
    VirtualBackend device_b;
    LaggingStreamsAdaptor lagging_b(device_b, 1000);
    CachingPool default_pool(lagging_b, ForLaggedReplay(PoolOptions{}));
    Result<ReplayResult> by_default = Replay(*trace, default_pool, &lagging_b);
    ASSERT_TRUE(by_default.ok()) << by_default.status().ToString();
    EXPECT_LE(by_default->ratio, idle->ratio + 0.001) << name;
    EXPECT_EQ(by_default->pack_waits, 0u) << name;
    EXPECT_EQ(by_default->pack_stream_syncs, 0u) << name;
    EXPECT_TRUE(default_pool.check_invariants().ok());
  }
}

// The same lagged replay with no marker at frees, as when a real run's frees all fell too soon after a marker
// for one of their own: only the misses' markers cover the freed blocks. The footprint must not depend on
// that. Before CorePool::drain_for_large_shortfall it did: gpt2_fp32 peaked at 15,636 MiB here against
// 15,108, alternating at 15,780 against 15,324 (the H200 saw 15,784 in one process of three), varlen at
// 24,296 against 22,830.
TEST(Replay, WithoutMarkersAtFreesTheLaggedReplayPeaksAsWithThem) {
  for (const char* name : {"gpt2_fp32", "alternating", "gpt2_bf16_varlen"}) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + name + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    auto lagged_peak = [&](PoolOptions options) -> std::uint64_t {
      VirtualBackend device;
      LaggingStreamsAdaptor lagging(device, 200);
      CachingPool pool(lagging, options);
      Result<ReplayResult> r = Replay(*trace, pool, &lagging);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(pool.check_invariants().ok());
      return r.ok() ? r->peak_reserved_bytes : 0;
    };
    PoolOptions no_free_markers;
    no_free_markers.large_free_marker_interval_us = 3'600'000'000u;  // an hour: never at a free
    const std::uint64_t with_markers = lagged_peak(ForLaggedReplay(PoolOptions{}));
    const std::uint64_t without = lagged_peak(no_free_markers);
    EXPECT_LE(without, with_markers + (64ULL << 20))
        << name << ": " << (without >> 20) << " MiB against " << (with_markers >> 20);
  }
}

TEST(Replay, AFailingAllocationIsReportedAndThePoolIsLeftClean) {
  Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/gpt2_fp32.trace.gz");
  ASSERT_TRUE(trace.ok());
  VirtualBackend backend(4ULL << 30);  // far smaller than the trace's 15.8 GB peak
  CachingPool pool(backend);
  Result<ReplayResult> r = Replay(*trace, pool);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("replay event"), std::string::npos);
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
}

// (Suite ReplayThreads, not Replay: these run under ThreadSanitizer, which leaves the long Replay suite out.)
// A trace that names two threads is replayed by two threads: thread 1's cache keeps the eight 256 KiB blocks
// it freed, so without the thread-cache fence thread 0's eight make the pool map a second chunk (4 MiB), as
// they would have in the recorded run; on one thread the cached blocks come back (2 MiB), and with the fence
// (the default) the pool takes them back before it grows (2 MiB). tests/allocator/data/two_threads.trace.
TEST(ReplayThreads, ATraceOfTwoThreadsIsReplayedByTwoThreads) {
  Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TEST_DATA_DIR) + "/two_threads.trace");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->threads, 2u);
  for (const auto& [threads, fence, want_threads, want_reserved] :
       {std::tuple{ReplayThreads::kRecorded, false, 2u, 4 * kMiB},
        std::tuple{ReplayThreads::kOne, false, 1u, 2 * kMiB},
        std::tuple{ReplayThreads::kRecorded, true, 2u, 2 * kMiB}}) {
    VirtualBackend backend;
    PoolOptions options;
    options.thread_cache_fence = fence;
    CachingPool pool(backend, options);
    Result<ReplayResult> r = Replay(*trace, pool, nullptr, threads);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->threads, want_threads);
    EXPECT_EQ(r->events, 32u);
    EXPECT_EQ(r->peak_reserved_bytes, want_reserved) << want_threads << " threads, fence " << fence;
    EXPECT_EQ(r->small_arena_bytes, want_reserved);  // 256 KiB blocks: the small-block arena's, still mapped
    EXPECT_EQ(r->large_arena_bytes, 0u);
    EXPECT_EQ(pool.stats().allocated_bytes, 0u);
    EXPECT_TRUE(pool.check_invariants().ok());
  }
}

// A refusal on one of several replaying threads ends every thread (none waits for a turn that never comes)
// and is reported with its event, the pool left clean.
TEST(ReplayThreads, AFailureOnOneOfSeveralThreadsEndsTheReplay) {
  Result<Trace> trace = ParseTrace(
      "a 1000 1048576 0 t0\n"
      "a 2000 1048576 0 t1\n"
      "a 3000 8589934592 0 t0\n"  // 8 GiB on a 1 GiB device
      "f 1000 1048576 0 t1\n"
      "f 2000 1048576 0 t0\n"
      "f 3000 8589934592 0 t1\n",
      "fails");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  VirtualBackend backend(kGiB);
  CachingPool pool(backend);
  Result<ReplayResult> r = Replay(*trace, pool);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("replay event 2"), std::string::npos) << r.status().message();
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
}

}  // namespace
}  // namespace memcoord
