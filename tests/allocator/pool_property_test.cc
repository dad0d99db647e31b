// Randomized tests against a reference model: the live set kept in a std::map. Checks after every operation
// that live blocks never overlap, that every byte is accounted for in the stats, and periodically that the
// pool's own invariants hold and that trim never frees a live block.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "allocator/caching_pool.h"
#include "allocator/host_backend.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"
#include "tests/allocator/stream_test_backend.h"

namespace memcoord {
namespace {

struct Live {
  std::size_t size;
  std::size_t requested;
};

class ReferenceModel {
 public:
  // Records a new live block; fails the test if it overlaps another.
  void add(std::uintptr_t a, std::size_t size, std::size_t requested) {
    std::lock_guard<std::mutex> lock(mu_);
    auto next = live_.lower_bound(a);
    if (next != live_.end()) {
      ASSERT_LE(a + size, next->first) << "overlaps the next live block";
    }
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second.size, a) << "overlaps the previous live block";
    }
    live_[a] = {size, requested};
    bytes_ += size;
    requested_ += requested;
  }
  void remove(std::uintptr_t a) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(a);
    ASSERT_NE(it, live_.end());
    bytes_ -= it->second.size;
    requested_ -= it->second.requested;
    live_.erase(it);
  }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t requested() const { return requested_; }

 private:
  std::mutex mu_;
  std::map<std::uintptr_t, Live> live_;
  std::uint64_t bytes_ = 0;
  std::uint64_t requested_ = 0;
};

std::size_t RandomSize(std::mt19937_64& rng) {
  // Mostly small, some large, a few huge: the mix of a training step.
  const int k = std::uniform_int_distribution<int>(0, 99)(rng);
  if (k < 60) return std::uniform_int_distribution<std::size_t>(1, 64 * 1024)(rng);
  if (k < 90) return std::uniform_int_distribution<std::size_t>(64 * 1024, 4 * kMiB)(rng);
  return std::uniform_int_distribution<std::size_t>(4 * kMiB, 48 * kMiB)(rng);
}

void RunSingleThreaded(CachingPool& pool, std::uint64_t seed, int operations, bool touch_memory) {
  std::mt19937_64 rng(seed);
  ReferenceModel model;
  std::vector<std::pair<void*, std::size_t>> live;
  for (int op = 0; op < operations; ++op) {
    const bool alloc = live.empty() || (live.size() < 400 && rng() % 2 == 0);
    if (alloc) {
      const std::size_t bytes = RandomSize(rng);
      Result<void*> p = pool.allocate(bytes, rng() % 4 == 0 ? 0x51 : 0);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      const std::size_t size = *pool.block_size(*p);
      ASSERT_GE(size, bytes);
      model.add(reinterpret_cast<std::uintptr_t>(*p), size, bytes);
      if (touch_memory) {
        std::memset(*p, static_cast<int>(bytes & 0xff), std::min<std::size_t>(bytes, 256));
        std::memset(static_cast<char*>(*p) + bytes - std::min<std::size_t>(bytes, 64),
                    static_cast<int>(bytes & 0xff), std::min<std::size_t>(bytes, 64));
      }
      live.emplace_back(*p, bytes);
    } else {
      const std::size_t i = rng() % live.size();
      auto [p, bytes] = live[i];
      if (touch_memory) {
        ASSERT_EQ(static_cast<unsigned char*>(p)[0], static_cast<unsigned char>(bytes & 0xff));
        ASSERT_EQ(static_cast<unsigned char*>(p)[bytes - 1], static_cast<unsigned char>(bytes & 0xff));
      }
      model.remove(reinterpret_cast<std::uintptr_t>(p));
      ASSERT_TRUE(pool.deallocate(p).ok());
      live[i] = live.back();
      live.pop_back();
    }
    const PoolStats s = pool.stats();
    ASSERT_EQ(s.allocated_bytes, model.bytes());
    ASSERT_EQ(s.requested_bytes, model.requested());
    ASSERT_EQ(s.live_blocks, live.size());
    ASSERT_GE(s.reserved_bytes, s.allocated_bytes);
    if (s.limit_bytes != 0) {
      ASSERT_LE(s.reserved_bytes, s.limit_bytes);
    }
    if (op % 5000 == 0) {
      Status inv = pool.check_invariants();
      ASSERT_TRUE(inv.ok()) << "after op " << op << ": " << inv.ToString();
    }
    if (op % 20000 == 19999) {
      pool.trim(rng() % 2 == 0 ? 0 : s.reserved_bytes / 2);
      ASSERT_TRUE(pool.check_invariants().ok());
      if (touch_memory) {
        for (auto [p, bytes] : live) {
          ASSERT_EQ(static_cast<unsigned char*>(p)[0], static_cast<unsigned char>(bytes & 0xff))
              << "trim freed a live block";
          ASSERT_EQ(static_cast<unsigned char*>(p)[bytes - 1], static_cast<unsigned char>(bytes & 0xff));
        }
      }
    }
  }
  for (auto [p, bytes] : live) ASSERT_TRUE(pool.deallocate(p).ok());
  ASSERT_TRUE(pool.check_invariants().ok());
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
}

TEST(PoolProperty, VirtualMappingAgainstTheModel) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend, PoolOptions{.growth = PoolGrowth::kMapping});
  RunSingleThreaded(pool, 1, 400'000, false);
  EXPECT_EQ(pool.stats().reserved_bytes, backend.used_bytes());
}

TEST(PoolProperty, VirtualSegmentsAgainstTheModel) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend, PoolOptions{.growth = PoolGrowth::kSegments});
  RunSingleThreaded(pool, 2, 300'000, false);
}

TEST(PoolProperty, HostMemoryUnderALimitKeepsLiveDataIntact) {
  HostBackend backend(4 * kGiB);
  CachingPool pool(backend);
  ASSERT_TRUE(pool.set_limit(3 * kGiB).ok());
  RunSingleThreaded(pool, 3, 200'000, true);
}

TEST(PoolProperty, ManyThreadsShareOnePool) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  ReferenceModel model;
  constexpr int kThreads = 4;
  constexpr int kOps = 300'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<void*> live;
      const StreamId stream = t % 2 == 0 ? 0 : 0x100 + t;
      for (int op = 0; op < kOps; ++op) {
        if (live.empty() || (live.size() < 200 && rng() % 2 == 0)) {
          const std::size_t bytes = RandomSize(rng);
          Result<void*> p = pool.allocate(bytes, stream);
          ASSERT_TRUE(p.ok()) << p.status().ToString();
          model.add(reinterpret_cast<std::uintptr_t>(*p), *pool.block_size(*p), bytes);
          live.push_back(*p);
        } else {
          const std::size_t i = rng() % live.size();
          model.remove(reinterpret_cast<std::uintptr_t>(live[i]));
          ASSERT_TRUE(pool.deallocate(live[i]).ok());
          live[i] = live.back();
          live.pop_back();
        }
        if (t == 0 && op % 50'000 == 49'999) pool.trim(0);
      }
      for (void* p : live) {
        model.remove(reinterpret_cast<std::uintptr_t>(p));
        ASSERT_TRUE(pool.deallocate(p).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.requested_bytes, 0u);
  EXPECT_EQ(s.live_blocks, 0u);
  EXPECT_GE(s.allocations, static_cast<std::uint64_t>(kThreads) * kOps / 2 - 1000);
  pool.trim(0);
  EXPECT_EQ(backend.used_bytes(), 0u);
}

// Limits x streams x trims x OOM retries, against the model: three streams whose work is randomly still
// queued (busy) when cache on them is needed, a limit that moves, trims, record_stream, and an OOM hook that
// sometimes grants more room (the allocation is then retried). Checks after every operation that live
// blocks never overlap, the stats match the model, reserved never exceeds the limit, and that an OOM is only
// reported once the cache is gone: what is left free is at most the partly used chunks of live blocks.
void RunLimitsStreamsTrimsOoms(std::uint64_t seed, int operations) {
  testing::StreamTestBackend backend(2 * kGiB);
  CachingPool pool(backend, PoolOptions{.limit_bytes = 256 * kMiB});
  const StreamId streams[] = {kDefaultStream, 0x51, 0x52};
  std::mt19937_64 rng(seed);
  ReferenceModel model;
  std::vector<void*> live;
  int hook_calls = 0;
  pool.set_oom_hook([&](const OomEvent& e) {
    ++hook_calls;
    if (rng() % 2 == 0) return false;
    return pool.set_limit(std::min<std::uint64_t>(e.limit_bytes + 64 * kMiB, kGiB)).ok();
  });
  int ooms = 0;
  std::uint64_t above_limit = 256 * kMiB;  // the most reserved may be: the limit, or above it after set_limit
  for (int op = 0; op < operations; ++op) {
    const int what = static_cast<int>(rng() % 100);
    if (what < 2) {
      pool.trim(rng() % 2 == 0 ? 0 : pool.stats().reserved_bytes / 2);
    } else if (what < 4) {
      const std::uint64_t limit = pool.stats().allocated_bytes + (rng() % 256) * kMiB;
      ASSERT_TRUE(pool.set_limit(limit).ok());
      // A limit between allocated and reserved bytes can leave partly used chunks above it (set_limit
      // accepts any limit >= allocated); the pool may then only shrink until it fits.
      above_limit = std::max(limit, pool.stats().reserved_bytes);
    } else if (what < 10) {
      const StreamId s = streams[rng() % 3];
      if (backend.busy.count(s) != 0) {
        backend.busy.erase(s);
      } else {
        backend.busy.insert(s);
      }
    } else if (what < 13 && !live.empty()) {
      ASSERT_TRUE(pool.record_stream(live[rng() % live.size()], streams[rng() % 3]).ok());
    } else if (live.empty() || (live.size() < 300 && what < 57)) {
      const std::size_t bytes = RandomSize(rng);
      Result<void*> p = pool.allocate(bytes, streams[rng() % 3]);
      if (!p.ok()) {
        ASSERT_EQ(p.status().code(), StatusCode::kResourceExhausted) << p.status().ToString();
        ++ooms;
        const PoolStats s = pool.stats();
        // Out of memory only with the cache gone: at most two partly used units (a unit is unmapped only
        // whole) per live block stay free.
        ASSERT_LE(s.reserved_bytes - s.allocated_bytes,
                  (2 * live.size() + 2) * PoolOptions::kDefaultLargeMapUnit)
            << "OOM while holding reclaimable cache: " << p.status().ToString();
        continue;
      }
      model.add(reinterpret_cast<std::uintptr_t>(*p), *pool.block_size(*p), bytes);
      live.push_back(*p);
    } else {
      const std::size_t i = rng() % live.size();
      model.remove(reinterpret_cast<std::uintptr_t>(live[i]));
      ASSERT_TRUE(pool.deallocate(live[i]).ok());
      live[i] = live.back();
      live.pop_back();
    }
    const PoolStats s = pool.stats();
    ASSERT_EQ(s.allocated_bytes, model.bytes());
    ASSERT_EQ(s.requested_bytes, model.requested());
    ASSERT_EQ(s.live_blocks, live.size());
    above_limit = std::max<std::uint64_t>(s.limit_bytes, std::min(above_limit, s.reserved_bytes));
    ASSERT_LE(s.reserved_bytes, above_limit) << "after op " << op;
    ASSERT_EQ(s.reserved_bytes, backend.used_bytes());
    if (op % 1000 == 0) {
      Status inv = pool.check_invariants();
      ASSERT_TRUE(inv.ok()) << "after op " << op << ": " << inv.ToString();
    }
  }
  for (void* p : live) ASSERT_TRUE(pool.deallocate(p).ok());
  ASSERT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  EXPECT_GT(ooms, 0) << "the run never reached its limit: it tests nothing";
  EXPECT_GT(hook_calls, 0);
  pool.trim(0);
  EXPECT_EQ(backend.used_bytes(), 0u);
}

TEST(PoolProperty, LimitsStreamsTrimsAndOomRetriesAgainstTheModel) {
  for (std::uint64_t seed : {11, 12, 13}) {
    SCOPED_TRACE(seed);
    RunLimitsStreamsTrimsOoms(seed, 30'000);
  }
}

}  // namespace
}  // namespace memcoord
