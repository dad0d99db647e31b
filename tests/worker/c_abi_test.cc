// The C ABI (worker/memcoord.h) through libmemcoord_capi.so on the host backend: the basic cycle, device
// routing, statistics and cache control, and failure handling (item 7 of issue 12: every bad call gets a
// clear error and never a crash, and nothing is thrown across the boundary).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "worker/memcoord.h"

namespace {

std::string LastError() { return memcoord_last_error(); }

class CAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("MEMCOORD_BACKEND", "host", 1);
    unsetenv("MEMCOORD_COORDINATOR");
    unsetenv("MEMCOORD_DEVICES");
    unsetenv("MEMCOORD_ALLOC_CONF");
  }
  void TearDown() override { EXPECT_EQ(memcoord_shutdown(), 0); }
};

memcoord_device_stats Stats(int device) {
  memcoord_device_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(memcoord_device_stats_get(device, &s), 0) << memcoord_last_error();
  return s;
}

TEST_F(CAbi, InitAllocateStepAndShutdown) {
  EXPECT_EQ(memcoord_step(), -1);
  EXPECT_EQ(memcoord_step_end(), MEMCOORD_ERR_FAILED_PRECONDITION);  // before init
  EXPECT_NE(LastError().find("memcoord_init"), std::string::npos);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_init(), 0);  // idempotent
  EXPECT_EQ(memcoord_device_count(), 1);
  void* a = memcoord_alloc(nullptr, 1 << 20, 0);
  ASSERT_NE(a, nullptr) << memcoord_last_error();
  void* b = memcoord_alloc("kv", 4096, 0);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(memcoord_free("kv", a), MEMCOORD_ERR_NOT_FOUND);  // a belongs to "default"
  EXPECT_NE(LastError().find("NOT_FOUND"), std::string::npos);
  EXPECT_EQ(memcoord_free(nullptr, a), 0);
  EXPECT_EQ(memcoord_free("kv", b), 0);
  EXPECT_EQ(memcoord_alloc(nullptr, 0, 0), nullptr);
  EXPECT_NE(LastError().find("INVALID_ARGUMENT"), std::string::npos);
  EXPECT_EQ(memcoord_step_begin(), 0);
  EXPECT_EQ(memcoord_step_end(), 0);
  EXPECT_EQ(memcoord_step(), 1);
  void* t = memcoord_torch_malloc(256, 0, nullptr);
  ASSERT_NE(t, nullptr);
  memcoord_torch_free(t, 256, 0, nullptr);
  EXPECT_EQ(memcoord_shutdown(), 0);
  EXPECT_EQ(memcoord_step(), -1);
  EXPECT_EQ(memcoord_device_count(), -1);
}

// The torch hooks initialize memcoord on the process's first allocation only, so these run in a fresh
// process each (a death test's re-executed child): `check` returns what went wrong, "" when nothing.
void ExitWithProblems(const std::string& problems) {
  std::fputs(problems.c_str(), stderr);
  std::_Exit(problems.empty() ? 0 : 1);
}
#define MEMCOORD_FRESH_PROCESS(check)                                           \
  do {                                                                          \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                             \
    EXPECT_EXIT(ExitWithProblems(check()), ::testing::ExitedWithCode(0), "^$"); \
  } while (0)

std::string Problem(bool ok, const std::string& what) { return ok ? "" : what + ": " + LastError() + "\n"; }

std::string FirstUseThenShutdown() {
  std::string problems;
  void* p = memcoord_torch_malloc(1 << 20, 0, nullptr);  // no memcoord_init(): the first use makes it
  problems += Problem(p != nullptr, "first use");
  problems += Problem(Stats(0).allocated_bytes == 1u << 20, "allocated after the first use");
  memcoord_torch_free(p, 1 << 20, 0, nullptr);
  problems += Problem(Stats(0).allocated_bytes == 0 && Stats(0).frees == 1, "figures after the free");
  problems += Problem(memcoord_shutdown() == 0, "shutdown");
  // After a shutdown the hooks do not make a second worker (it would attach anew, unasked).
  problems += Problem(memcoord_torch_malloc(4096, 0, nullptr) == nullptr, "an allocation after shutdown");
  problems += Problem(LastError().find("memcoord_shutdown() was called") != std::string::npos,
                      "the error after shutdown");
  problems += Problem(memcoord_step() == -1, "the step after shutdown");
  problems += Problem(memcoord_init() == 0, "an explicit init after shutdown");
  void* q = memcoord_torch_malloc(4096, 0, nullptr);
  problems += Problem(q != nullptr, "an allocation after the explicit init");
  memcoord_torch_free(q, 4096, 0, nullptr);
  return problems;
}

TEST_F(CAbi, TorchHooksInitOnTheProcesssFirstAllocationOnly) { MEMCOORD_FRESH_PROCESS(FirstUseThenShutdown); }

std::string FailedFirstUseIsNotRetried() {
  std::string problems;
  setenv("MEMCOORD_ALLOC_CONF", "no_such_key:1", 1);
  problems += Problem(memcoord_torch_malloc(4096, 0, nullptr) == nullptr, "first use with a bad conf");
  problems += Problem(LastError().find("no_such_key") != std::string::npos, "the first use's error");
  unsetenv("MEMCOORD_ALLOC_CONF");
  // The failure stands (no init retried under a lock on every allocation) until the program inits.
  problems += Problem(memcoord_torch_malloc(4096, 0, nullptr) == nullptr, "a second use");
  problems += Problem(LastError().find("not retried") != std::string::npos &&
                          LastError().find("no_such_key") != std::string::npos,
                      "the second use's error");
  problems += Problem(memcoord_init() == 0, "an explicit init");
  void* p = memcoord_torch_malloc(4096, 0, nullptr);
  problems += Problem(p != nullptr, "an allocation after the explicit init");
  memcoord_torch_free(p, 4096, 0, nullptr);
  return problems;
}

TEST_F(CAbi, AFailedInitOnFirstUseIsNotRetriedByEachAllocation) {
  MEMCOORD_FRESH_PROCESS(FailedFirstUseIsNotRetried);
}

// The torch hooks' first use racing the program's own memcoord_init(): an allocation whose call began before
// the init published the worker but asked after it had is no "memcoord_shutdown() was called" failure.
std::string FirstUseRacingInit() {
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex first_error_mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      for (int i = 0; i < 200; ++i) {
        void* p = memcoord_torch_malloc(4096, 0, nullptr);
        if (p == nullptr) {
          ++failures;
          std::lock_guard lock(first_error_mu);
          if (first_error.empty()) first_error = LastError();
          continue;
        }
        memcoord_torch_free(p, 4096, 0, nullptr);
      }
    });
  }
  go.store(true, std::memory_order_release);
  const int init = memcoord_init();
  for (auto& t : threads) t.join();
  std::string problems = Problem(init == 0, "memcoord_init");
  if (failures.load() != 0) {
    problems +=
        std::to_string(failures.load()) + " allocations failed, the first with: " + first_error + "\n";
  }
  return problems;
}

TEST_F(CAbi, TorchFirstUseRacingAnExplicitInitAllocates) { MEMCOORD_FRESH_PROCESS(FirstUseRacingInit); }

TEST_F(CAbi, DevicesRouteToTheirOwnPools) {
  setenv("MEMCOORD_DEVICES", "3", 1);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_device_count(), 3);
  std::vector<void*> blocks;
  for (int d = 0; d < 3; ++d) {
    void* p = memcoord_torch_malloc((d + 1) << 20, d, nullptr);
    ASSERT_NE(p, nullptr) << memcoord_last_error();
    blocks.push_back(p);
  }
  for (int d = 0; d < 3; ++d) {
    const memcoord_device_stats s = Stats(d);
    EXPECT_EQ(s.device, d);
    EXPECT_EQ(s.allocated_bytes, static_cast<std::uint64_t>(d + 1) << 20) << "device " << d;
    EXPECT_EQ(s.live_blocks, 1u);
  }
  EXPECT_EQ(Stats(-1).device, 0);  // -1: the primary device
  // A block freed on the wrong device is not found there, and the right device still holds it.
  EXPECT_EQ(memcoord_device_free(0, blocks[1], 0), MEMCOORD_ERR_NOT_FOUND);
  EXPECT_EQ(Stats(1).live_blocks, 1u);
  for (int d = 0; d < 3; ++d) memcoord_torch_free(blocks[d], (d + 1) << 20, d, nullptr);
  for (int d = 0; d < 3; ++d) EXPECT_EQ(Stats(d).allocated_bytes, 0u);
  // memcoord_free(NULL, p) finds the device itself.
  void* on2 = memcoord_device_alloc(2, 4096, 0);
  ASSERT_NE(on2, nullptr);
  EXPECT_EQ(memcoord_free(nullptr, on2), 0) << memcoord_last_error();
  // Out of range: a clear error naming the devices there are.
  EXPECT_EQ(memcoord_torch_malloc(4096, 3, nullptr), nullptr);
  EXPECT_NE(LastError().find("device 3 is out of range"), std::string::npos) << LastError();
  EXPECT_NE(LastError().find("MEMCOORD_DEVICES"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_device_alloc(-7, 4096, 0), nullptr);
  EXPECT_NE(LastError().find("INVALID_ARGUMENT"), std::string::npos) << LastError();
}

// `b` is a small block (1 MiB: the small-block arena): were it large, it would sit in the slack of `a`'s
// 20 MiB unit (PoolOptions::grow_to_unit_end) and keep that unit mapped through empty_cache.
TEST_F(CAbi, StatsEmptyCacheAndSnapshotReportThePoolsCounters) {
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  void* a = memcoord_torch_malloc(8 << 20, 0, nullptr);
  void* b = memcoord_torch_malloc(1 << 20, 0, nullptr);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  memcoord_torch_free(a, 8 << 20, 0, nullptr);
  memcoord_device_stats s = Stats(0);
  EXPECT_EQ(s.allocated_bytes, 1u << 20);
  EXPECT_EQ(s.peak_allocated_bytes, 9u << 20);
  EXPECT_GE(s.reserved_bytes, 9u << 20);
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_GE(s.backend_allocations, 1u);
  EXPECT_GT(s.device_total_bytes, 0u);
  EXPECT_EQ(s.peak_sums, 2u);  // one thread sums at each new peak: both allocations
  uint64_t released = 0;
  ASSERT_EQ(memcoord_empty_cache(0, &released), 0) << memcoord_last_error();
  EXPECT_GE(released, 8u << 20);
  const memcoord_device_stats after = Stats(0);
  EXPECT_EQ(after.reserved_bytes, s.reserved_bytes - released);
  EXPECT_LT(after.reserved_bytes, 8u << 20);  // only the live block's chunks stay
  EXPECT_EQ(after.allocated_bytes, 1u << 20);

  char* json = memcoord_snapshot_json(0);
  ASSERT_NE(json, nullptr) << memcoord_last_error();
  const auto doc = nlohmann::json::parse(json);
  memcoord_free_string(json);
  ASSERT_EQ(doc["pools"].size(), 1u);
  EXPECT_EQ(doc["pools"][0]["name"], "default");
  EXPECT_EQ(doc["pools"][0]["stats"]["allocated_bytes"].get<std::uint64_t>(), after.allocated_bytes);
  EXPECT_EQ(doc["pools"][0]["stats"]["reserved_bytes"].get<std::uint64_t>(), after.reserved_bytes);
  EXPECT_EQ(doc["pools"][0]["stats"]["peak_sums"].get<std::uint64_t>(), after.peak_sums);
  EXPECT_EQ(after.other_thread_frees, 0u);
  // A training loop's backward thread frees what the forward pass allocated: a free of another thread's
  // block, counted.
  std::thread backward([b] { memcoord_torch_free(b, 1 << 20, 0, nullptr); });
  backward.join();
  const memcoord_device_stats freed = Stats(0);
  EXPECT_EQ(freed.other_thread_frees, 1u);
  EXPECT_EQ(freed.allocated_bytes, 0u);
}

// PyTorch's cacheInfo: the larger of the device's free memory and the largest cached block. On the virtual
// backend (an H200's 140 GiB, addresses only) a freed 100 GiB block leaves the device 40 GiB free, and the
// answer is the cached block; before it, once it is trimmed, and with the same block cached in a named pool
// (which PyTorch's allocations never use), the device's free memory.
TEST_F(CAbi, CacheInfoIsTheLargerOfTheDevicesFreeMemoryAndTheLargestCachedBlock) {
  setenv("MEMCOORD_BACKEND", "virtual", 1);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  const std::uint64_t total = Stats(0).device_total_bytes;
  std::uint64_t largest = 0;
  ASSERT_EQ(memcoord_cache_info(0, &largest), 0) << memcoord_last_error();
  EXPECT_EQ(largest, total);  // nothing mapped yet
  const std::size_t big = std::size_t{100} << 30;
  void* p = memcoord_torch_malloc(static_cast<std::ptrdiff_t>(big), 0, nullptr);
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_cache_info(-1, &largest), 0) << memcoord_last_error();
  EXPECT_LT(largest, total - big + (std::uint64_t{64} << 20));  // the device's free memory only
  memcoord_torch_free(p, static_cast<std::ptrdiff_t>(big), 0, nullptr);
  ASSERT_EQ(memcoord_cache_info(0, &largest), 0) << memcoord_last_error();
  EXPECT_GE(largest, big);
  EXPECT_LT(largest, total - (std::uint64_t{1} << 30));  // not the device's total: what is cached
  EXPECT_EQ(memcoord_empty_cache(0, nullptr), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_cache_info(0, &largest), 0) << memcoord_last_error();
  EXPECT_EQ(largest, total);
  // A named pool's cached block cannot serve PyTorch's allocations: only the device's free memory counts.
  void* named = memcoord_alloc("kv", big, 0);
  ASSERT_NE(named, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_free("kv", named), 0);
  ASSERT_EQ(memcoord_cache_info(0, &largest), 0) << memcoord_last_error();
  EXPECT_LT(largest, total - big + (std::uint64_t{64} << 20));
  // Bad calls.
  EXPECT_EQ(memcoord_cache_info(0, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("largest_bytes is NULL"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_cache_info(4, &largest), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("device 4 is out of range"), std::string::npos) << LastError();
}

// torch.cuda.set_per_process_memory_fraction: the default pool may reserve at most that share of the device.
// On the virtual backend (140 GiB): at 0.25, a 30 GiB block fits and a second does not (out of memory, as
// PyTorch's cap fails it), while a named pool is not capped; the cache is trimmed to a new cap; a cap below
// the live blocks is refused and the old one stays; 1 lifts it.
TEST_F(CAbi, AMemoryFractionCapsTheDefaultPoolAtThatShareOfTheDevice) {
  setenv("MEMCOORD_BACKEND", "virtual", 1);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  double fraction = 0;
  ASSERT_EQ(memcoord_memory_fraction(0, &fraction), 0) << memcoord_last_error();
  EXPECT_EQ(fraction, 1.0);  // no cap: PyTorch's default
  const std::uint64_t total = Stats(0).device_total_bytes;
  ASSERT_EQ(memcoord_set_memory_fraction(-1, 0.25), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_memory_fraction(0, &fraction), 0);
  EXPECT_NEAR(fraction, 0.25, 1e-9);
  EXPECT_EQ(Stats(0).limit_bytes, total / 4);
  const auto gib30 = static_cast<std::ptrdiff_t>(std::int64_t{30} << 30);
  void* first = memcoord_torch_malloc(gib30, 0, nullptr);
  ASSERT_NE(first, nullptr) << memcoord_last_error();
  EXPECT_EQ(memcoord_torch_malloc(gib30, 0, nullptr), nullptr);
  EXPECT_NE(LastError().find("RESOURCE_EXHAUSTED"), std::string::npos) << LastError();
  void* named = memcoord_alloc("kv", std::size_t{30} << 30, 0);  // another pool: not capped
  ASSERT_NE(named, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_free("kv", named), 0);
  ASSERT_EQ(memcoord_empty_cache(0, nullptr), 0);  // the kv pool's cached 30 GiB go
  // A cap below the 30 GiB live: refused, naming both; the quarter stays.
  EXPECT_EQ(memcoord_set_memory_fraction(0, 0.1), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_NE(LastError().find("below the"), std::string::npos) << LastError();
  EXPECT_EQ(Stats(0).limit_bytes, total / 4);
  // Freed and cached, the block is trimmed away by a cap it no longer fits under.
  memcoord_torch_free(first, gib30, 0, nullptr);
  ASSERT_EQ(memcoord_set_memory_fraction(0, 0.1), 0) << memcoord_last_error();
  memcoord_device_stats capped{};
  capped.struct_size = sizeof(capped);
  ASSERT_EQ(memcoord_device_stats_get(0, &capped), 0);
  EXPECT_LE(capped.reserved_bytes, total / 10);
  // 1: the whole device, so a second 30 GiB block fits again.
  ASSERT_EQ(memcoord_set_memory_fraction(0, 1.0), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_memory_fraction(0, &fraction), 0);
  EXPECT_EQ(fraction, 1.0);
  EXPECT_EQ(Stats(0).limit_bytes, 0u);  // no cap left
  void* a = memcoord_torch_malloc(gib30, 0, nullptr);
  void* b = memcoord_torch_malloc(gib30, 0, nullptr);
  EXPECT_TRUE(a != nullptr && b != nullptr) << memcoord_last_error();
  memcoord_torch_free(a, gib30, 0, nullptr);
  memcoord_torch_free(b, gib30, 0, nullptr);
  // Bad calls: the accepted range named, NaN included; a bad device; NULL.
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    EXPECT_EQ(memcoord_set_memory_fraction(0, bad), MEMCOORD_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(LastError().find("accepted: more than 0 and at most 1"), std::string::npos) << LastError();
  }
  EXPECT_EQ(memcoord_set_memory_fraction(4, 0.5), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("device 4 is out of range"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_memory_fraction(0, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("fraction is NULL"), std::string::npos) << LastError();
}

TEST_F(CAbi, ResetPeakStatsBringsEveryPoolsPeaksToTheCurrentFigures) {
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  void* big = memcoord_torch_malloc(8 << 20, 0, nullptr);
  void* named = memcoord_alloc("kv", 4 << 20, 0);  // a second pool on device 0
  void* kept = memcoord_torch_malloc(1 << 20, 0, nullptr);
  ASSERT_TRUE(big != nullptr && named != nullptr && kept != nullptr) << memcoord_last_error();
  memcoord_torch_free(big, 8 << 20, 0, nullptr);
  ASSERT_EQ(memcoord_free("kv", named), 0);
  const memcoord_device_stats before = Stats(0);
  EXPECT_EQ(before.pools, 2u);
  EXPECT_EQ(before.peak_allocated_bytes, 13u << 20);
  EXPECT_EQ(before.allocated_bytes, 1u << 20);

  ASSERT_EQ(memcoord_reset_peak_stats(0), 0) << memcoord_last_error();
  const memcoord_device_stats reset = Stats(0);
  EXPECT_EQ(reset.peak_allocated_bytes, reset.allocated_bytes);
  EXPECT_EQ(reset.peak_requested_bytes, reset.requested_bytes);
  EXPECT_EQ(reset.peak_active_bytes, reset.active_bytes);
  EXPECT_EQ(reset.peak_reserved_bytes, reset.reserved_bytes);
  EXPECT_EQ(reset.allocations, before.allocations);  // counters stay
  // The next peak is that of what runs from now on.
  void* more = memcoord_torch_malloc(2 << 20, 0, nullptr);
  ASSERT_NE(more, nullptr);
  memcoord_torch_free(more, 2 << 20, 0, nullptr);
  EXPECT_EQ(Stats(0).peak_allocated_bytes, 3u << 20);
  EXPECT_EQ(memcoord_reset_peak_stats(7), MEMCOORD_ERR_INVALID_ARGUMENT);
  memcoord_torch_free(kept, 1 << 20, 0, nullptr);
}

// The host backend maps chunks into reserved ranges, as cuda-vmm does: every segment is such a range, its
// blocks tile it, and its mapped bytes add up to what the pool reserved.
TEST_F(CAbi, SnapshotListsEverySegmentWithBlocksThatTileItAndOurLiveBlocks) {
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  void* large = memcoord_torch_malloc(3 << 20, 0, nullptr);
  void* small = memcoord_torch_malloc(1000, 0, nullptr);
  void* cached = memcoord_torch_malloc(8 << 20, 0, nullptr);
  ASSERT_TRUE(large != nullptr && small != nullptr && cached != nullptr) << memcoord_last_error();
  memcoord_torch_free(cached, 8 << 20, 0, nullptr);
  const memcoord_device_stats s = Stats(0);

  char* json = memcoord_snapshot_json(0);
  ASSERT_NE(json, nullptr) << memcoord_last_error();
  const auto doc = nlohmann::json::parse(json);
  memcoord_free_string(json);
  ASSERT_EQ(doc["pools"].size(), 1u);
  const auto& pool = doc["pools"][0];
  EXPECT_EQ(pool["segments_available"], true);
  EXPECT_EQ(pool["stats"]["maps_chunks"], true);
  EXPECT_EQ(pool["stats"]["pack_drains"], 0u);  // the packing figures the bench reads (bench_allocators.py)
  EXPECT_EQ(pool["stats"]["pack_waits"], 0u);
  EXPECT_EQ(pool["stats"]["idle_cache_flushes"], 0u);  // one thread: never idle while it calls
  EXPECT_EQ(pool["stats"]["peak_sums"], 3u);  // one thread: one sum at each new peak, its three allocations
  ASSERT_FALSE(pool["segments"].empty());
  std::uint64_t mapped = 0, allocated = 0, requested = 0, inactive = 0, unmapped = 0;
  std::map<std::uint64_t, nlohmann::json> live;  // address -> block
  bool small_segment_holds_small = false;
  for (const auto& segment : pool["segments"]) {
    std::uint64_t at = segment["address"];
    std::uint64_t segment_mapped = 0;
    for (const auto& block : segment["blocks"]) {
      EXPECT_EQ(block["address"].get<std::uint64_t>(), at) << "blocks tile the segment in address order";
      at += block["size"].get<std::uint64_t>();
      const std::string state = block["state"];
      if (state == "active_allocated") {
        allocated += block["size"].get<std::uint64_t>();
        requested += block["requested"].get<std::uint64_t>();
        live[block["address"]] = block;
        if (block["address"] == reinterpret_cast<std::uintptr_t>(small)) {
          small_segment_holds_small = segment["small"];
        }
      } else if (state == "inactive") {
        inactive += block["size"].get<std::uint64_t>();
      } else {
        EXPECT_EQ(state, "unmapped");
        unmapped += block["size"].get<std::uint64_t>();
        continue;
      }
      segment_mapped += block["size"].get<std::uint64_t>();
    }
    EXPECT_EQ(at, segment["address"].get<std::uint64_t>() + segment["size"].get<std::uint64_t>());
    EXPECT_EQ(segment["mapped_bytes"].get<std::uint64_t>(), segment_mapped);
    mapped += segment_mapped;
  }
  EXPECT_EQ(mapped, s.reserved_bytes);
  EXPECT_EQ(allocated, s.allocated_bytes);
  EXPECT_EQ(requested, s.requested_bytes);
  EXPECT_EQ(requested, (3u << 20) + 1000u);
  EXPECT_GE(inactive, 8u << 20);  // the freed block stays cached
  EXPECT_GT(unmapped, 0u);        // reserved address space with no memory behind it
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[reinterpret_cast<std::uintptr_t>(large)]["requested"], 3u << 20);
  EXPECT_EQ(live[reinterpret_cast<std::uintptr_t>(small)]["requested"], 1000u);
  EXPECT_TRUE(small_segment_holds_small);
  memcoord_torch_free(large, 3 << 20, 0, nullptr);
  memcoord_torch_free(small, 1000, 0, nullptr);
}

TEST_F(CAbi, VersionedStructsRejectTooSmallSizesAndKeepExtraBytes) {
  ASSERT_EQ(memcoord_init(), 0);
  memcoord_device_stats small{};
  small.struct_size = 8;
  EXPECT_EQ(memcoord_device_stats_get(0, &small), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("struct_size 8"), std::string::npos) << LastError();
  // A caller built against a newer header passes a larger struct: the bytes past v1 stay as it set them.
  struct Newer {
    memcoord_device_stats v1;
    std::uint64_t future = 0xabcdef;
  } newer{};
  newer.v1.struct_size = sizeof(newer);
  newer.future = 0xabcdef;
  ASSERT_EQ(memcoord_device_stats_get(0, &newer.v1), 0) << memcoord_last_error();
  EXPECT_EQ(newer.future, 0xabcdefu);
  EXPECT_EQ(newer.v1.struct_size, sizeof(newer));
  // A caller built against version 1 (192 bytes): its fields filled, nothing written past them.
  void* block = memcoord_alloc(nullptr, 4096, 0);
  ASSERT_NE(block, nullptr);
  struct Old {
    unsigned char v1[MEMCOORD_DEVICE_STATS_V1_SIZE];
    std::uint64_t guard = 0x5a5a5a5a;
  } old{};
  old.guard = 0x5a5a5a5a;
  memcoord_device_stats v1_view{};
  v1_view.struct_size = MEMCOORD_DEVICE_STATS_V1_SIZE;
  std::memcpy(old.v1, &v1_view, MEMCOORD_DEVICE_STATS_V1_SIZE);
  ASSERT_EQ(memcoord_device_stats_get(0, reinterpret_cast<memcoord_device_stats*>(old.v1)), 0)
      << memcoord_last_error();
  EXPECT_EQ(old.guard, 0x5a5a5a5au);
  std::memcpy(&v1_view, old.v1, MEMCOORD_DEVICE_STATS_V1_SIZE);
  EXPECT_EQ(v1_view.allocations, 1u);
  EXPECT_EQ(v1_view.live_blocks, 1u);
  EXPECT_GT(v1_view.device_total_bytes, 0u);
  // Version 2's packing figures are there for a current caller (none waited here: host streams are idle).
  const memcoord_device_stats v2 = Stats(0);
  EXPECT_EQ(v2.struct_size, sizeof(memcoord_device_stats));
  EXPECT_EQ(v2.pack_waits, 0u);
  EXPECT_EQ(v2.pack_stream_syncs, 0u);
  // Version 3: the block above was the pool's first allocation, a miss, and took some host time.
  EXPECT_GE(v2.misses, 1u);
  EXPECT_GT(v2.miss_ns, 0u);
  EXPECT_EQ(v2.pack_wait_ns, 0u);
  // A caller built against version 2 (208 bytes): nothing written past them.
  struct V2 {
    unsigned char fields[MEMCOORD_DEVICE_STATS_V2_SIZE];
    std::uint64_t guard = 0x5a5a5a5a;
  } v2_caller{};
  v2_caller.guard = 0x5a5a5a5a;
  const std::size_t v2_size = MEMCOORD_DEVICE_STATS_V2_SIZE;
  std::memcpy(v2_caller.fields, &v2_size, sizeof(v2_size));
  ASSERT_EQ(memcoord_device_stats_get(0, reinterpret_cast<memcoord_device_stats*>(v2_caller.fields)), 0)
      << memcoord_last_error();
  EXPECT_EQ(v2_caller.guard, 0x5a5a5a5au);
  EXPECT_EQ(memcoord_free(nullptr, block), 0);
  memcoord_abort_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(memcoord_abort_info_get(&info), 0);
  EXPECT_EQ(info.aborted, 0);
  EXPECT_EQ(info.dead_rank, -1);
  info.struct_size = 4;
  EXPECT_EQ(memcoord_abort_info_get(&info), MEMCOORD_ERR_INVALID_ARGUMENT);
}

nlohmann::json SnapshotTrace(int device) {
  char* json = memcoord_snapshot_json(device);
  EXPECT_NE(json, nullptr) << memcoord_last_error();
  if (json == nullptr) return nlohmann::json::array();
  const auto doc = nlohmann::json::parse(json);
  memcoord_free_string(json);
  return doc.at("trace");
}

// memcoord_record_history: the snapshot's "trace" lists every allocation and free while on (the thread
// cache does not hide repeated small ones), oldest first; off keeps them; bad arguments are named.
TEST_F(CAbi, RecordHistoryPutsAllocationsAndFreesInTheSnapshotTrace) {
  EXPECT_EQ(memcoord_record_history(0, 1, 10), MEMCOORD_ERR_FAILED_PRECONDITION);  // before init
  ASSERT_EQ(memcoord_init(), 0);
  EXPECT_TRUE(SnapshotTrace(0).empty());  // never on
  ASSERT_EQ(memcoord_record_history(0, 1, 100), 0) << memcoord_last_error();
  std::vector<std::uintptr_t> blocks;
  for (int i = 0; i < 3; ++i) {
    void* p = memcoord_alloc(nullptr, 1000, 0);
    ASSERT_NE(p, nullptr);
    blocks.push_back(reinterpret_cast<std::uintptr_t>(p));
    ASSERT_EQ(memcoord_free(nullptr, p), 0);
  }
  nlohmann::json trace = SnapshotTrace(0);
  ASSERT_EQ(trace.size(), 6u) << trace.dump();
  for (std::size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(trace[i]["action"], i % 2 == 0 ? "alloc" : "free") << trace.dump();
    EXPECT_EQ(trace[i]["addr"].get<std::uintptr_t>(), blocks[i / 2]);
    EXPECT_EQ(trace[i]["size"], 1000u);
    EXPECT_GE(trace[i]["time_us"].get<std::int64_t>(), trace[0]["time_us"].get<std::int64_t>());
  }
  ASSERT_EQ(memcoord_record_history(0, 0, 0), 0);  // off: kept, nothing new
  ASSERT_EQ(memcoord_free(nullptr, memcoord_alloc(nullptr, 2000, 0)), 0);
  EXPECT_EQ(SnapshotTrace(0).size(), 6u);
  ASSERT_EQ(memcoord_record_history(-1, 1, 2), 0);  // on again: a new, empty history of two
  for (int i = 0; i < 2; ++i) ASSERT_EQ(memcoord_free(nullptr, memcoord_alloc(nullptr, 3000, 0)), 0);
  trace = SnapshotTrace(0);
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[0]["action"], "alloc");
  EXPECT_EQ(trace[1]["action"], "free");
  EXPECT_EQ(memcoord_record_history(0, 1, 0), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("max_entries must be between 1 and"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_record_history(0, 1, MEMCOORD_HISTORY_MAX_ENTRIES + 1), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(memcoord_record_history(99, 1, 10), 0);
  EXPECT_NE(LastError().find("99"), std::string::npos) << LastError();
  ASSERT_EQ(memcoord_record_history(0, 0, 0), 0);
}

// PyTorch's pluggable layer allocates an empty tensor with memcoord_torch_malloc(0), and the versions whose
// DataPtr holds a deleter context free the NULL they got. Neither is an error: no message is formatted, the
// thread's last error stays the earlier failure's, and no worker is started for it.
TEST_F(CAbi, TorchEmptyTensorIsNullWithoutAnError) {
  EXPECT_EQ(memcoord_torch_malloc(0, 0, nullptr), nullptr);
  memcoord_torch_free(nullptr, 0, 0, nullptr);
  EXPECT_EQ(memcoord_step_begin(), MEMCOORD_ERR_FAILED_PRECONDITION);  // still not initialized
  ASSERT_EQ(memcoord_init(), 0);
  EXPECT_EQ(memcoord_free(nullptr, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  const std::string before = LastError();
  for (int device = 0; device < 2; ++device) {
    EXPECT_EQ(memcoord_torch_malloc(0, device, reinterpret_cast<void*>(0x10)), nullptr);
    memcoord_torch_free(nullptr, 0, device, reinterpret_cast<void*>(0x10));
  }
  EXPECT_EQ(LastError(), before);
  void* p = memcoord_torch_malloc(1, 0, nullptr);  // the smallest real block still works
  ASSERT_NE(p, nullptr);
  memcoord_torch_free(p, 1, 0, nullptr);
  EXPECT_EQ(memcoord_device_free(0, p, 0), MEMCOORD_ERR_NOT_FOUND);  // the free above reached the pool
}

// Every entry point, called wrongly: a status code and a message, never a crash.
TEST_F(CAbi, BadCallsGetClearErrorsNeverACrash) {
  // Before init.
  EXPECT_EQ(memcoord_alloc(nullptr, 64, 0), nullptr);
  EXPECT_NE(LastError().find("not initialized"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_free(nullptr, reinterpret_cast<void*>(0x1000)), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_device_alloc(0, 64, 0), nullptr);
  EXPECT_EQ(memcoord_device_free(0, reinterpret_cast<void*>(0x1000), 0), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_record_stream(reinterpret_cast<void*>(0x1000), 1), MEMCOORD_ERR_FAILED_PRECONDITION);
  memcoord_torch_free(reinterpret_cast<void*>(0x1000), 64, 0, nullptr);
  EXPECT_NE(LastError().find("memcoord_torch_free"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_step_begin(), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_empty_cache(0, nullptr), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_reset_peak_stats(0), MEMCOORD_ERR_FAILED_PRECONDITION);
  std::uint64_t largest = 0;
  EXPECT_EQ(memcoord_cache_info(0, &largest), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_set_memory_fraction(0, 0.5), MEMCOORD_ERR_FAILED_PRECONDITION);
  double fraction = 0;
  EXPECT_EQ(memcoord_memory_fraction(0, &fraction), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_snapshot_json(0), nullptr);
  EXPECT_EQ(memcoord_wait_abort(0), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_set_abort_callback(nullptr, nullptr), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_begin_allocate_to_pool(0, 1, 2, nullptr, nullptr), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_shutdown(), 0);  // nothing to shut down

  ASSERT_EQ(memcoord_init(), 0);
  // NULL pointers.
  EXPECT_EQ(memcoord_free(nullptr, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("NULL"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_device_free(0, nullptr, 0), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(memcoord_record_stream(nullptr, 1), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(memcoord_device_stats_get(0, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(memcoord_abort_info_get(nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(memcoord_begin_allocate_to_pool(0, 1, 2, nullptr, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("filter is NULL"), std::string::npos) << LastError();
  memcoord_free_string(nullptr);
  // Absurd and negative sizes.
  EXPECT_EQ(memcoord_alloc(nullptr, SIZE_MAX, 0), nullptr);
  EXPECT_NE(LastError().find("absurd"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_torch_malloc(-5, 0, nullptr), nullptr);
  EXPECT_NE(LastError().find("size must be 0 or more, got -5"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_torch_malloc(PTRDIFF_MAX, 0, nullptr), nullptr);
  EXPECT_NE(LastError().find("INVALID_ARGUMENT"), std::string::npos) << LastError();
  // Zero bytes: NULL and an error from the generic entry points (only the torch hook's 0 is an empty tensor).
  const std::string zero_bytes = "allocation of 0 bytes; sizes must be positive";
  for (const char* pool : {static_cast<const char*>(nullptr), "default", "zero-bytes"}) {
    EXPECT_EQ(memcoord_alloc(pool, 0, 0), nullptr) << (pool ? pool : "NULL");
    EXPECT_NE(LastError().find(zero_bytes), std::string::npos) << LastError();
  }
  EXPECT_EQ(memcoord_device_alloc(-1, 0, 0), nullptr);
  EXPECT_NE(LastError().find(zero_bytes), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_device_alloc(0, 0, 7), nullptr);
  EXPECT_NE(LastError().find(zero_bytes), std::string::npos) << LastError();
  // Bad devices.
  EXPECT_EQ(memcoord_empty_cache(5, nullptr), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(memcoord_snapshot_json(-3), nullptr);
  EXPECT_EQ(memcoord_end_allocate_to_pool(0, 9, 9), MEMCOORD_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(memcoord_release_pool(0, 9, 9), MEMCOORD_ERR_NOT_FOUND);
  // Pointers memcoord never handed out, and double frees.
  int on_stack = 0;
  EXPECT_EQ(memcoord_free(nullptr, &on_stack), MEMCOORD_ERR_NOT_FOUND);
  EXPECT_EQ(memcoord_record_stream(&on_stack, 1), MEMCOORD_ERR_NOT_FOUND);
  memcoord_torch_free(&on_stack, 4, 0, nullptr);
  EXPECT_NE(LastError().find("NOT_FOUND"), std::string::npos) << LastError();
  void* p = memcoord_torch_malloc(4096, 0, nullptr);
  ASSERT_NE(p, nullptr);
  memcoord_torch_free(p, 4096, 0, nullptr);
  EXPECT_EQ(memcoord_device_free(0, p, 0), MEMCOORD_ERR_NOT_FOUND);  // double free
  EXPECT_EQ(memcoord_free("no-such-pool", p), MEMCOORD_ERR_NOT_FOUND);
  EXPECT_NE(LastError().find("no-such-pool"), std::string::npos) << LastError();
  // The abort wait with nothing aborted times out cleanly.
  EXPECT_EQ(memcoord_wait_abort(10), MEMCOORD_ERR_DEADLINE_EXCEEDED);
  // After shutdown, the block freed into the old worker is an error, not a crash.
  void* live = memcoord_torch_malloc(4096, 0, nullptr);
  ASSERT_NE(live, nullptr);
  EXPECT_EQ(memcoord_shutdown(), 0);
  EXPECT_EQ(memcoord_device_free(0, live, 0), MEMCOORD_ERR_FAILED_PRECONDITION);
}

// Pool names travel to the coordinator and into JSON: what the Worker refuses (pool_name.h) and the device
// pools' own names are clear errors, and a refused name leaves snapshots and other pools working.
TEST_F(CAbi, BadPoolNamesAreRefusedAndLeaveEverythingWorking) {
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  for (const auto& [name, why] :
       std::vector<std::pair<const char*, const char*>>{{"\xff", "not valid UTF-8"},
                                                        {"", "is empty"},
                                                        {"a\tb", "control character"},
                                                        {"default@1", "reserved"}}) {
    EXPECT_EQ(memcoord_alloc(name, 4096, 0), nullptr) << why;
    EXPECT_NE(LastError().find("INVALID_ARGUMENT"), std::string::npos) << LastError();
    EXPECT_NE(LastError().find(why), std::string::npos) << LastError();
    EXPECT_EQ(memcoord_free(name, reinterpret_cast<void*>(4096)), MEMCOORD_ERR_NOT_FOUND) << why;
  }
  void* p = memcoord_alloc("caché", 4096, 0);
  ASSERT_NE(p, nullptr) << LastError();
  char* json = memcoord_snapshot_json(-1);
  ASSERT_NE(json, nullptr) << LastError();
  EXPECT_NE(std::string(json).find("caché"), std::string::npos);
  memcoord_free_string(json);
  EXPECT_EQ(memcoord_free("caché", p), 0);
}

// The reserved names stay refused once the C ABI's table of named pools is full (past it, names are looked
// up in the Worker's list, which holds the device pools under those names).
TEST_F(CAbi, ReservedNamesAreRefusedAfterSixtyFourNamedPools) {
  setenv("MEMCOORD_DEVICES", "2", 1);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  void* on1 = memcoord_device_alloc(1, 4096, 0);  // device 1's pool, "default@1", exists
  ASSERT_NE(on1, nullptr) << LastError();
  std::vector<std::pair<std::string, void*>> named;
  for (int i = 0; i < 64; ++i) {
    const std::string name = "pool" + std::to_string(i);
    void* p = memcoord_alloc(name.c_str(), 512, 0);
    ASSERT_NE(p, nullptr) << name << ": " << LastError();
    named.emplace_back(name, p);
  }
  for (const char* reserved : {"default@0", "default@1"}) {
    EXPECT_EQ(memcoord_alloc(reserved, 4096, 0), nullptr) << reserved;
    EXPECT_NE(LastError().find("INVALID_ARGUMENT"), std::string::npos) << LastError();
    EXPECT_NE(LastError().find("is reserved: 'default@N' names device N's default pool"), std::string::npos)
        << LastError();
  }
  EXPECT_EQ(memcoord_free("default@1", on1), MEMCOORD_ERR_NOT_FOUND);  // not through a pool name either
  EXPECT_NE(LastError().find("reserved"), std::string::npos) << LastError();
  EXPECT_EQ(Stats(1).live_blocks, 1u);
  EXPECT_EQ(memcoord_device_free(1, on1, 0), 0) << LastError();
  // A 65th name still works (the Worker's list).
  void* extra = memcoord_alloc("pool64", 512, 0);
  ASSERT_NE(extra, nullptr) << LastError();
  EXPECT_EQ(memcoord_free("pool64", extra), 0) << LastError();
  for (const auto& [name, p] : named) EXPECT_EQ(memcoord_free(name.c_str(), p), 0) << name;
}

// Failed frees say what was freed where, and where the block is when the caller named the wrong pool.
TEST_F(CAbi, FailedFreesNameTheFreeTheDeviceAndTheRightPool) {
  setenv("MEMCOORD_DEVICES", "2", 1);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  void* kv = memcoord_alloc("kv", 4096, 0);
  ASSERT_NE(kv, nullptr) << LastError();
  EXPECT_EQ(memcoord_free(nullptr, kv), MEMCOORD_ERR_NOT_FOUND);
  EXPECT_NE(LastError().find("it is a block of pool 'kv'"), std::string::npos) << LastError();
  EXPECT_NE(LastError().find("memcoord_free(\"kv\", ptr)"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_free("kv", kv), 0) << LastError();
  int on_stack = 0;
  EXPECT_EQ(memcoord_free(nullptr, &on_stack), MEMCOORD_ERR_NOT_FOUND);
  EXPECT_EQ(LastError().find("it is a block of pool"), std::string::npos) << LastError();  // no false hint
  // A free on the wrong device, with a stream: a free, not a record_stream, and on which device.
  void* on0 = memcoord_device_alloc(0, 4096, 0);
  ASSERT_NE(on0, nullptr) << LastError();
  void* on1 = memcoord_device_alloc(1, 4096, 0);  // device 1's pool exists
  ASSERT_NE(on1, nullptr) << LastError();
  EXPECT_EQ(memcoord_device_free(1, on0, 5), MEMCOORD_ERR_NOT_FOUND);
  EXPECT_NE(LastError().find("free of"), std::string::npos) << LastError();
  EXPECT_NE(LastError().find("on device 1"), std::string::npos) << LastError();
  EXPECT_EQ(LastError().find("record_stream"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_device_free(0, on0, 5), 0) << LastError();
  EXPECT_EQ(memcoord_device_free(1, on1, 0), 0) << LastError();
}

TEST_F(CAbi, BadBackendAndDevicesEnvironmentFailInit) {
  setenv("MEMCOORD_BACKEND", "quantum", 1);
  EXPECT_EQ(memcoord_init(), MEMCOORD_ERR_INVALID_ARGUMENT);
  // What was wrong, where it was set, and what is accepted.
  EXPECT_NE(LastError().find("MEMCOORD_BACKEND=quantum: unknown backend 'quantum'; accepted: "),
            std::string::npos)
      << LastError();
  EXPECT_NE(LastError().find("cuda-vmm"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_torch_malloc(64, 0, nullptr), nullptr);  // the torch hooks allocate nothing either
  // Their first use tries init with the same variable; where an earlier test of this process (the binary run
  // whole rather than by ctest) shut memcoord down, they do not init and say that instead.
  const bool shut_down_before = LastError().find("memcoord_shutdown() was called") != std::string::npos;
  EXPECT_TRUE(shut_down_before || LastError().find("MEMCOORD_BACKEND=quantum") != std::string::npos)
      << LastError();
  // A GPU backend where no GPU answers: UNAVAILABLE, naming the variable and the backends that need no GPU.
  // (On a machine with a GPU, init succeeds and this part has nothing to check.)
  for (const char* gpu_backend : {"cuda", "cuda-vmm"}) {
    setenv("MEMCOORD_BACKEND", gpu_backend, 1);
    const int code = memcoord_init();
    if (code == 0) {
      EXPECT_EQ(memcoord_shutdown(), 0);
      continue;
    }
    EXPECT_EQ(code, MEMCOORD_ERR_UNAVAILABLE) << LastError();
    const std::string said = std::string("MEMCOORD_BACKEND=") + gpu_backend + ": backend '" + gpu_backend +
                             "' found no CUDA GPU to use: ";
    EXPECT_NE(LastError().find(said), std::string::npos) << LastError();
    EXPECT_NE(LastError().find("backends that need none: host, virtual"), std::string::npos) << LastError();
  }
  setenv("MEMCOORD_BACKEND", "host", 1);
  setenv("MEMCOORD_DEVICES", "zero", 1);
  EXPECT_EQ(memcoord_init(), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("MEMCOORD_DEVICES"), std::string::npos) << LastError();
}

// $MEMCOORD_ALLOC_CONF sets the options of the pools the C ABI makes (allocator/pool_conf.h), here the large
// arena's mapping unit on the virtual backend: 30 MiB grows the pool on to 40 MiB (the 20 MiB step), one unit
// by default (40 MiB), two with 20 MiB units, twenty with 2 MiB units. A bad conf fails init, naming the
// variable and the entry.
TEST_F(CAbi, AllocConfEnvironmentSetsThePoolsOptions) {
  setenv("MEMCOORD_BACKEND", "virtual", 1);
  for (const auto& [conf, maps] : std::vector<std::pair<const char*, std::uint64_t>>{
           {"", 1}, {"large_map_unit:2MiB", 20}, {" large_map_unit : 20MiB , thread_cache:0", 2}}) {
    setenv("MEMCOORD_ALLOC_CONF", conf, 1);
    ASSERT_EQ(memcoord_init(), 0) << conf << ": " << memcoord_last_error();
    void* p = memcoord_torch_malloc(30 << 20, 0, nullptr);
    ASSERT_NE(p, nullptr) << memcoord_last_error();
    EXPECT_EQ(Stats(-1).backend_allocations, maps) << "MEMCOORD_ALLOC_CONF='" << conf << "'";
    memcoord_torch_free(p, 30 << 20, 0, nullptr);
    void* named = memcoord_alloc("kv", 30 << 20, 0);  // a named pool takes the same options
    ASSERT_NE(named, nullptr) << memcoord_last_error();
    EXPECT_EQ(Stats(-1).backend_allocations, 2 * maps) << "named pool, '" << conf << "'";
    EXPECT_EQ(memcoord_free("kv", named), 0);
    ASSERT_EQ(memcoord_shutdown(), 0);
  }
  setenv("MEMCOORD_ALLOC_CONF", "large_map_unit:20MiB,expandable_segments:True", 1);
  EXPECT_EQ(memcoord_init(), MEMCOORD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("MEMCOORD_ALLOC_CONF"), std::string::npos) << LastError();
  EXPECT_NE(LastError().find("unknown key 'expandable_segments'"), std::string::npos) << LastError();
  EXPECT_EQ(memcoord_torch_malloc(64, 0, nullptr), nullptr);  // the torch hooks allocate nothing either
  unsetenv("MEMCOORD_ALLOC_CONF");
}

}  // namespace
