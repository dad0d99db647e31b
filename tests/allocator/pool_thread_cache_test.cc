// CachingPool with thread caches (ThreadCacheAdaptor), several threads against a reference model: sizes
// repeat so threads hit their caches, blocks move between threads (freed by another thread), some are
// recorded on another stream, one thread trims while the others run. At every phase boundary (all threads
// parked) the pool's figures equal the model's exactly (a cached block is not allocated) and the pool's
// invariants hold; at the end a trim returns every byte to the backend. Peaks are checked exactly where
// allocations do not overlap in time (threads take turns).
#include <gtest/gtest.h>

#include <barrier>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/detail/owner_gate.h"
#include "allocator/thread_cache_adaptor.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

class Model {
 public:
  void add(void* p, std::size_t size, std::size_t requested) {
    std::lock_guard lock(mu_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto next = live_.lower_bound(a);
    if (next != live_.end()) {
      ASSERT_LE(a + size, next->first) << "overlaps the next live block";
    }
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second.first, a) << "overlaps the previous live block";
    }
    live_[a] = {size, requested};
    bytes_ += size;
    allocated_total_ += size;
    requested_ += requested;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
    peak_requested_ = std::max(peak_requested_, requested_);
  }
  void remove(void* p) {
    std::lock_guard lock(mu_);
    auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
    ASSERT_NE(it, live_.end());
    bytes_ -= it->second.first;
    freed_total_ += it->second.first;
    requested_ -= it->second.second;
    live_.erase(it);
  }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t requested() const { return requested_; }
  std::size_t blocks() const { return live_.size(); }
  std::uint64_t peak_bytes() const { return peak_bytes_; }
  std::uint64_t peak_requested() const { return peak_requested_; }
  std::uint64_t allocated_total() const { return allocated_total_; }
  std::uint64_t freed_total() const { return freed_total_; }

 private:
  std::mutex mu_;
  std::map<std::uintptr_t, std::pair<std::size_t, std::size_t>> live_;
  std::uint64_t bytes_ = 0, requested_ = 0, peak_bytes_ = 0, peak_requested_ = 0;
  std::uint64_t allocated_total_ = 0, freed_total_ = 0;
};

// Sizes a training loop repeats (thread-cache hits), plus a few random ones (misses, larger blocks).
std::size_t LoopSize(std::mt19937_64& rng) {
  static constexpr std::size_t kSizes[] = {512, 1000, 4096, 65536, 300000, 1 << 20};
  if (rng() % 8 == 0) return std::uniform_int_distribution<std::size_t>(1, 8 * kMiB)(rng);
  return kSizes[rng() % std::size(kSizes)];
}

void ExpectFiguresMatch(const CachingPool& pool, const Model& model, int phase) {
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes, model.bytes()) << "phase " << phase;
  EXPECT_EQ(s.active_bytes, model.bytes()) << "phase " << phase;
  EXPECT_EQ(s.requested_bytes, model.requested()) << "phase " << phase;
  EXPECT_EQ(s.live_blocks, model.blocks()) << "phase " << phase;
  // Bytes allocated and freed in all, as users see them: a free into a thread cache is a free, a hit an
  // allocation, and a cached block's return to the pool (a trim, an eviction) neither.
  EXPECT_EQ(s.allocated_bytes_total, model.allocated_total()) << "phase " << phase;
  EXPECT_EQ(s.freed_bytes_total, model.freed_total()) << "phase " << phase;
  EXPECT_GE(s.peak_allocated_bytes, s.allocated_bytes);
  const Status inv = pool.check_invariants();
  EXPECT_TRUE(inv.ok()) << "phase " << phase << ": " << inv.ToString();
}

// How the threads call the pool: CachingPool's own calls with the defaults, or the C ABI's (the driver-free
// calls first, the full ones when they decline) with idle threads' caches flushed after a single look, so
// that sweeps, and the fast path's declines that leave them to the full path, run all the time among the
// others.
struct CallStyle {
  bool c_abi = false;
  std::uint32_t idle_misses = PoolOptions{}.thread_cache_idle_misses;
};

class PoolThreadsAgainstTheModel : public ::testing::TestWithParam<CallStyle> {
 protected:
  Result<void*> Allocate(CachingPool& pool, std::size_t bytes, StreamId stream) {
    if (GetParam().c_abi) {
      if (void* hit = pool.allocate_cached(bytes, stream)) return hit;
    }
    return pool.allocate(bytes, stream);
  }
  Status Deallocate(CachingPool& pool, void* p) {
    if (GetParam().c_abi && pool.free_cached(p)) return Status::Ok();
    return pool.deallocate(p);
  }
};

INSTANTIATE_TEST_SUITE_P(Calls, PoolThreadsAgainstTheModel,
                         ::testing::Values(CallStyle{}, CallStyle{/*c_abi=*/true, /*idle_misses=*/1}),
                         [](const auto& param_info) {
                           return param_info.param.c_abi ? "CAbiSweepingAtOnce" : "Defaults";
                         });

TEST_P(PoolThreadsAgainstTheModel, FiguresAndBlocksAgree) {
  VirtualBackend backend(64 * kGiB);
  PoolOptions options;
  options.thread_cache_idle_misses = GetParam().idle_misses;
  CachingPool pool(backend, options);
  Model model;
  constexpr int kThreads = 4;
  constexpr int kPhases = 20;
  constexpr int kOpsPerPhase = 5000;
  std::mutex handoff_mu;
  std::vector<void*> handoff;  // blocks one thread allocated and another will free
  std::barrier phase_end(kThreads + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // An ASSERT failing in `work` returns early: arrive_and_drop then lets the others (and main) go on.
    threads.emplace_back([&, t] {
      auto work = [&] {
        std::mt19937_64 rng(7 + t);
        std::vector<void*> live;
        const StreamId stream = t % 2 == 0 ? kDefaultStream : 0x100 + t;
        for (int phase = 0; phase < kPhases; ++phase) {
          for (int op = 0; op < kOpsPerPhase; ++op) {
            const int what = static_cast<int>(rng() % 100);
            if (what < 2 && t == 0) {
              pool.trim(rng() % 2 == 0 ? 0 : pool.stats().reserved_bytes / 2);
            } else if (what < 5 && !live.empty()) {
              ASSERT_TRUE(pool.record_stream(live[rng() % live.size()], 0x900).ok());
            } else if (what < 10 && !live.empty()) {
              std::lock_guard lock(handoff_mu);
              handoff.push_back(live.back());
              live.pop_back();
            } else if (what < 15) {
              void* p = nullptr;
              {
                std::lock_guard lock(handoff_mu);
                if (!handoff.empty()) {
                  p = handoff.back();
                  handoff.pop_back();
                }
              }
              if (p != nullptr) {
                model.remove(p);
                ASSERT_TRUE(Deallocate(pool, p).ok());
              }
            } else if (live.empty() || (live.size() < 64 && what < 58)) {
              const std::size_t bytes = LoopSize(rng);
              Result<void*> p = Allocate(pool, bytes, stream);
              ASSERT_TRUE(p.ok()) << p.status().ToString();
              model.add(*p, *pool.block_size(*p), bytes);
              live.push_back(*p);
            } else {
              const std::size_t i = rng() % live.size();
              model.remove(live[i]);
              ASSERT_TRUE(Deallocate(pool, live[i]).ok());
              live[i] = live.back();
              live.pop_back();
            }
          }
          phase_end.arrive_and_wait();  // the main thread checks
          phase_end.arrive_and_wait();
        }
        for (void* p : live) {
          model.remove(p);
          ASSERT_TRUE(pool.deallocate(p).ok());
        }
      };
      work();
      phase_end.arrive_and_drop();
    });
  }
  for (int phase = 0; phase < kPhases; ++phase) {
    phase_end.arrive_and_wait();
    ExpectFiguresMatch(pool, model, phase);
    phase_end.arrive_and_wait();
  }
  for (auto& th : threads) th.join();
  for (void* p : handoff) {
    model.remove(p);
    ASSERT_TRUE(pool.deallocate(p).ok());
  }
  ExpectFiguresMatch(pool, model, kPhases);
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  EXPECT_GT(pool.stats().cache_hits, 0u);
  pool.trim(0);
  EXPECT_EQ(backend.used_bytes(), 0u);
}

// Threads take turns (one operation each, under a mutex): allocations never overlap in time, so the pool's
// peaks equal the model's exactly, though blocks sit in several threads' caches.
TEST(PoolThreadCache, PeaksAreExactWhenAllocationsDoNotOverlap) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  Model model;
  std::mutex turn;
  // A thread's exit returns its cache while others may still run: its frees make the figures read low for
  // an instant (never high), so no thread exits before every thread's last check.
  std::barrier done(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(40 + t);
      std::vector<void*> live;
      for (int op = 0; op < 20000; ++op) {
        std::lock_guard lock(turn);
        if (live.empty() || (live.size() < 24 && rng() % 2 == 0)) {
          const std::size_t bytes = LoopSize(rng);
          void* p = *pool.allocate(bytes);  // VirtualBackend with 64 GiB: never fails here
          model.add(p, *pool.block_size(p), bytes);
          live.push_back(p);
        } else {
          const std::size_t i = rng() % live.size();
          model.remove(live[i]);
          EXPECT_TRUE(pool.deallocate(live[i]).ok());
          live[i] = live.back();
          live.pop_back();
        }
        const PoolStats s = pool.stats();
        EXPECT_EQ(s.allocated_bytes, model.bytes()) << "op " << op;
        EXPECT_EQ(s.peak_allocated_bytes, model.peak_bytes()) << "op " << op;
        EXPECT_EQ(s.peak_requested_bytes, model.peak_requested()) << "op " << op;
        if (::testing::Test::HasFailure()) break;
      }
      {
        std::lock_guard lock(turn);
        for (void* p : live) {
          model.remove(p);
          EXPECT_TRUE(pool.deallocate(p).ok());
        }
      }
      done.arrive_and_wait();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(pool.stats().peak_allocated_bytes, model.peak_bytes());
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  pool.reset_peak_stats();
  EXPECT_EQ(pool.stats().peak_allocated_bytes, 0u);
}

// Thread caches never make a pool refuse what it could do without them: a limit that only fits once a
// thread's cache is returned is accepted (set_limit counts cached blocks as free), and an allocation that
// fits only once the cache is returned succeeds (the OOM path flushes thread caches before it fails).
TEST(PoolThreadCache, LimitsAndOutOfMemorySeeThroughThreadCaches) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(*pool.allocate(1 << 20));
  for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  ASSERT_TRUE(pool.set_limit(kMiB).ok());  // cached blocks are not allocated
  ASSERT_TRUE(pool.set_limit(4 * kMiB).ok());
  blocks.clear();
  for (int i = 0; i < 3; ++i) blocks.push_back(*pool.allocate(1 << 20));
  for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());  // cached: reserved stays 4 MiB
  Result<void*> big = pool.allocate(4 * kMiB);                  // fits only once they are back in the pool
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(pool.stats().ooms, 0u);
  ASSERT_TRUE(pool.deallocate(*big).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

// What a thread caches is memory the pool maps again for another thread, so a thread keeps at most one small
// chunk's worth by default (PoolOptions::thread_cache_bytes, 2 MiB): after one thread frees four 1 MiB
// blocks, a second thread asking for four more makes the pool map one chunk (2 MiB), not two (4 MiB of caches
// would keep all four).
TEST(PoolThreadCache, AThreadCachesAtMostOneSmallChunkByDefault) {
  VirtualBackend backend(64 * kGiB);
  PoolOptions options;
  options.thread_cache_fence = false;  // which would map nothing at all (the next test)
  CachingPool pool(backend, options);
  ASSERT_EQ(PoolOptions{}.thread_cache_bytes, 2 * kMiB);
  std::vector<void*> kept;
  std::thread holder([&] {  // a thread's cache goes back when it exits: the check runs while it lives
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(*pool.allocate(kMiB));
    for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
    const std::uint64_t reserved = pool.stats().reserved_bytes;
    std::thread second([&] {
      for (int i = 0; i < 4; ++i) kept.push_back(*pool.allocate(kMiB));
    });
    second.join();
    EXPECT_EQ(pool.stats().reserved_bytes - reserved, 2 * kMiB) << "the holder cached more than one chunk";
  });
  holder.join();
  for (void* p : kept) ASSERT_TRUE(pool.deallocate(p).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

// With thread_cache_fence on, the same second thread maps nothing: before the small arena grows, the holder's
// cached blocks go back to the pool, which serves the second thread from them (a refused growth is neither
// a miss nor an out-of-memory).
TEST(PoolThreadCache, TheFenceReturnsCachedBlocksBeforeTheSmallArenaGrows) {
  VirtualBackend backend(64 * kGiB);
  PoolOptions options;
  options.thread_cache_fence = true;
  CachingPool pool(backend, options);
  std::vector<void*> kept;
  std::thread holder([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(*pool.allocate(kMiB));
    for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
    const std::uint64_t reserved = pool.stats().reserved_bytes;
    const std::uint64_t misses = pool.stats().misses;
    std::thread second([&] {
      for (int i = 0; i < 4; ++i) kept.push_back(*pool.allocate(kMiB));
    });
    second.join();
    EXPECT_EQ(pool.stats().reserved_bytes, reserved) << "the pool mapped beside the holder's cached blocks";
    EXPECT_EQ(pool.stats().misses, misses) << "a refused growth is not a miss";
    EXPECT_EQ(pool.stats().ooms, 0u);
  });
  holder.join();
  for (void* p : kept) ASSERT_TRUE(pool.deallocate(p).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

// A thread that stops allocating gives its cache back once 16 requests of other threads that missed their
// caches found it idle (PoolOptions::thread_cache_idle_misses): the other thread's next request of that size
// then takes the holder's block, an exact fit, instead of splitting the chunk's remainder, as it would
// without thread caches at all. With the sweep off the holder keeps it. No growth is involved (the fence
// never acts): the misses are large blocks, in the other arena.
TEST(PoolThreadCache, AnIdleThreadsCachedBlockServesAnotherThreadOnceItsMissesFindItIdle) {
  for (const std::uint32_t idle_misses : {PoolOptions{}.thread_cache_idle_misses, 0u}) {
    VirtualBackend backend(64 * kGiB);
    PoolOptions options;
    options.thread_cache_idle_misses = idle_misses;
    CachingPool pool(backend, options);
    std::latch cached(1), done(1);
    void* held = nullptr;
    std::thread holder([&] {
      held = *pool.allocate(256 * kKiB);
      ASSERT_TRUE(pool.deallocate(held).ok());  // kept in this thread's cache
      cached.count_down();
      done.wait();
    });
    cached.wait();
    std::vector<void*> mine;
    for (int i = 0; i < 20; ++i) mine.push_back(*pool.allocate(4 * kMiB));
    void* p = *pool.allocate(256 * kKiB);
    if (idle_misses != 0) {
      EXPECT_EQ(p, held) << "the idle holder's block, back in the pool, is the exact fit";
    } else {
      EXPECT_NE(p, held) << "the holder keeps its block with the sweep off";
    }
    EXPECT_EQ(pool.stats().reserved_bytes, 2 * kMiB + 20 * 4 * kMiB);
    EXPECT_EQ(pool.stats().idle_cache_flushes, idle_misses != 0 ? 1u : 0u);
    mine.push_back(p);
    for (void* q : mine) ASSERT_TRUE(pool.deallocate(q).ok());
    done.count_down();
    holder.join();
    EXPECT_TRUE(pool.check_invariants().ok());
  }
}

// Threads beyond ThreadCacheAdaptor::kMaxSlots share one slot, which caches nothing and makes no idle sweeps
// of its own (its owner's fields would be raced on; TSAN would say so), while the other threads' misses
// still sweep. 300 threads stay bound at once and allocate with sweeps after a single look.
TEST(PoolThreadCache, ThreadsBeyondTheSlotsShareOneThatNeitherCachesNorSweeps) {
  VirtualBackend backend(64 * kGiB);
  PoolOptions options;
  options.thread_cache_idle_misses = 1;
  CachingPool pool(backend, options);
  constexpr int kThreads = static_cast<int>(ThreadCacheAdaptor::kMaxSlots) + 44;
  std::latch bound(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* first = *pool.allocate(512);  // binds a slot (or the shared one)
      bound.arrive_and_wait();            // every thread holds its slot from here on
      for (int i = 0; i < 20; ++i) {
        const std::size_t bytes = (i + t) % 2 == 0 ? 512 : 4096 + 512 * static_cast<std::size_t>(i);
        void* p = *pool.allocate(bytes);
        ASSERT_TRUE(pool.deallocate(p).ok());
      }
      ASSERT_TRUE(pool.deallocate(first).ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  EXPECT_TRUE(pool.check_invariants().ok());
}

// A block freed by another thread goes back to the pool while its entry waits in the allocating thread's
// table (only that thread reshapes its table). The pool may hand the same address to that thread again:
// the stale entry is dropped, the block is live once, and it is cached and reused as any other.
TEST(PoolThreadCache, AnAddressFreedByAnotherThreadCanComeBackToItsFirstThread) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  void* first = *pool.allocate(4096);
  std::thread other([&] { EXPECT_TRUE(pool.deallocate(first).ok()); });
  other.join();
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  void* again = *pool.allocate(4096);
  EXPECT_EQ(again, first);  // the pool's best fit: the block the other thread gave back
  EXPECT_EQ(*pool.block_size(again), 4096u);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(again).ok());  // into this thread's cache
  EXPECT_EQ(pool.deallocate(again).code(), StatusCode::kNotFound);
  const std::uint64_t hits = pool.stats().cache_hits;
  EXPECT_EQ(*pool.allocate(4096), first);  // a hit
  EXPECT_EQ(pool.stats().cache_hits, hits + 1);
  EXPECT_EQ(pool.stats().live_blocks, 1u);
  std::thread third([&] { EXPECT_TRUE(pool.deallocate(first).ok()); });
  third.join();
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

// free_cached (the C ABI's lock-free free) takes only what the thread cache keeps: this thread's small block
// freed on its own stream or the default one. Anything else is declined with nothing changed, and
// deallocate() then frees it as before.
TEST(PoolThreadCache, FreeCachedTakesOnlyWhatThisThreadsCacheKeeps) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  constexpr StreamId kSide = 0x77;
  void* own = *pool.allocate(4096, kSide);
  void* large = *pool.allocate(4 * kMiB);
  void* others = nullptr;
  std::thread other([&] { others = *pool.allocate(4096); });
  other.join();
  int unknown = 0;
  EXPECT_FALSE(pool.free_cached(&unknown));
  EXPECT_FALSE(pool.free_cached(large));      // larger than a thread cache keeps
  EXPECT_FALSE(pool.free_cached(others));     // another thread's block
  EXPECT_FALSE(pool.free_cached(own, 0x78));  // a stream the block was not allocated on: record first
  EXPECT_EQ(pool.stats().live_blocks, 3u);    // nothing changed
  EXPECT_TRUE(pool.free_cached(own, kSide));  // its own stream
  EXPECT_EQ(pool.stats().live_blocks, 2u);
  EXPECT_FALSE(pool.free_cached(own, kSide));  // already freed: declined, and deallocate says so
  EXPECT_EQ(pool.deallocate(own).code(), StatusCode::kNotFound);
  EXPECT_EQ(*pool.allocate(4096, kSide), own);  // the cached block, reused on its stream
  EXPECT_TRUE(pool.free_cached(own));           // kDefaultStream: the block's own stream is implied
  ASSERT_TRUE(pool.deallocate(large).ok());
  ASSERT_TRUE(pool.deallocate(others).ok());
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

// PoolStats::peak_sums counts the exact sums of every thread's cache that allocations make for the peaks: one
// pass (both figures) whenever a cheap bound passes its peak. Alone, a thread's bound is exact, so it sums
// only at a new peak; another thread's cache above its floor makes the bound loose, and a sum then finds no
// new peak.
TEST(PoolThreadCache, PeakSumsCountTheExactSumsOfTheCaches) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  std::vector<void*> mine;
  for (int i = 0; i < 4; ++i) mine.push_back(*pool.allocate(4096));  // each a new peak
  EXPECT_EQ(pool.stats().peak_sums, 4u);
  EXPECT_EQ(pool.stats().peak_allocated_bytes, 4 * 4096u);
  for (void* p : mine) ASSERT_TRUE(pool.deallocate(p).ok());
  for (void*& p : mine) p = *pool.allocate(4096);  // cache hits, none above the peak: no sum
  EXPECT_EQ(pool.stats().peak_sums, 4u);
  for (void* p : mine) ASSERT_TRUE(pool.deallocate(p).ok());

  std::latch filled(1), checked(1);
  // Five blocks of its own, then all cached. This thread's four cached blocks make its bound loose: each of
  // its five allocations sums, and only the fifth finds a new peak.
  std::thread other([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 5; ++i) blocks.push_back(*pool.allocate(4096));
    for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
    filled.count_down();
    checked.wait();  // its cache stays while this thread lives
  });
  filled.wait();
  const PoolStats before = pool.stats();
  EXPECT_EQ(before.peak_sums, 4u + 5u);
  EXPECT_EQ(before.peak_allocated_bytes, 5 * 4096u);
  void* again =
      *pool.allocate(4096);  // a hit: the bound counts the other thread's five cached blocks as held
  const PoolStats after = pool.stats();
  EXPECT_EQ(after.peak_sums, before.peak_sums + 1);  // summed, and found no new peak
  EXPECT_EQ(after.peak_allocated_bytes, 5 * 4096u);
  EXPECT_EQ(after.allocated_bytes, 4096u);
  checked.count_down();
  other.join();
  ASSERT_TRUE(pool.deallocate(again).ok());
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

// A thread's cache floor follows a cache filling from empty within a few short windows of changes
// (detail::kFirstFloorWindow, doubling), when the thread starts and again after a flush: another thread's
// peak check then reads that cache as the floor it holds, not as held by users, and makes no sum. With one
// window of kFloorWindow changes from the start, both of this test's checks summed (the cycling thread's
// floor stayed 0 through its 1,040 changes and again through the 124 after the flush).
TEST(PoolThreadCache, AFloorFollowsACacheFillingFromEmptySoOtherThreadsMakeNoSums) {
  VirtualBackend backend(64 * kGiB);
  PoolOptions options;
  options.thread_cache_idle_misses = 0;  // no sweep flushes the cycling thread's cache behind the test's back
  CachingPool pool(backend, options);
  std::latch cycled(1), flushed(1), cycled_again(1), checked_again(1);
  // Four blocks of its own, all cached, then `pairs` allocate+free of one of them: its cache holds 3 or 4
  // blocks, and its floor, once a window ends, 3.
  const auto fill_and_cycle = [&](int pairs) {
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(*pool.allocate(4096));
    for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
    for (int i = 0; i < pairs; ++i) ASSERT_TRUE(pool.deallocate(*pool.allocate(4096)).ok());
  };
  std::thread other([&] {
    fill_and_cycle(520);  // 1,044 changes: its windows have grown to kFloorWindow
    cycled.count_down();
    flushed.wait();
    fill_and_cycle(60);  // 124 changes after the flush emptied its cache
    cycled_again.count_down();
    checked_again.wait();  // its cache stays while this thread lives
  });
  const auto check_makes_no_sum = [&] {
    const PoolStats before = pool.stats();
    EXPECT_EQ(before.peak_allocated_bytes, 4 * 4096u);  // the other thread's four, exact
    void* mine = *pool.allocate(4096);                  // bound: 5 blocks below, less the other's floor of 3
    const PoolStats after = pool.stats();
    EXPECT_EQ(after.peak_sums, before.peak_sums);
    EXPECT_EQ(after.peak_allocated_bytes, 4 * 4096u);
    EXPECT_EQ(after.allocated_bytes, 4096u);
    ASSERT_TRUE(pool.deallocate(mine).ok());
  };
  cycled.wait();
  check_makes_no_sum();
  pool.trim(0);  // flushes every thread's cache first: the other thread's floors drop to 0
  flushed.count_down();
  cycled_again.wait();
  check_makes_no_sum();
  checked_again.count_down();
  other.join();
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

// A flush takes each cache from its owner through the owner's gate, at one membarrier() (a barrier on every
// running thread of the process) per cache; but a thread flushing its own cache needs no gate: it is not
// inside it. So a trim (or a refused small-arena growth, or an out-of-memory retry) from a thread that alone
// caches stops no other thread, and one that finds another thread's cache excludes that one only.
TEST(PoolThreadCache, AThreadFlushingItsOwnCacheExcludesNoOwner) {
  VirtualBackend backend(64 * kGiB);
  CachingPool pool(backend);
  ASSERT_TRUE(pool.deallocate(*pool.allocate(4096)).ok());  // cached by this thread
  std::uint64_t fences = detail::FencesOnEveryThread();
  (void)pool.trim(0);
  EXPECT_EQ(detail::FencesOnEveryThread(), fences);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);  // its cache went back, and the pool unmapped it

  std::latch cached(1), trimmed(1);
  std::thread other([&] {
    ASSERT_TRUE(pool.deallocate(*pool.allocate(8192)).ok());
    cached.count_down();
    trimmed.wait();  // its cache stays while this thread lives
  });
  cached.wait();
  ASSERT_TRUE(pool.deallocate(*pool.allocate(4096)).ok());
  fences = detail::FencesOnEveryThread();
  (void)pool.trim(0);
  EXPECT_EQ(detail::FencesOnEveryThread(), fences + 1);  // the other thread's cache alone
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  trimmed.count_down();
  other.join();
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

}  // namespace
}  // namespace memcoord
