// ThreadCacheAdaptor on its own, over a counting upstream (FakeResource under a StatsAdaptor and a
// ThreadSafeAdaptor, as CachingPool stacks it): what it keeps and what it sends down, its figures, and that
// flushes, trims, an OOM, a thread's exit (its first call made from a pthread key destructor included) and
// its own destruction give every cached block back; and that a thread's first call at exit, after the
// adaptor's pthread key was deleted, sets nothing on that key.
#include "allocator/thread_cache_adaptor.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <latch>
#include <memory>
#include <semaphore>
#include <thread>
#include <vector>

#include "allocator/stats_adaptor.h"
#include "allocator/thread_safe_adaptor.h"
#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

constexpr StreamId kStream = 0x51;

class ThreadCacheTest : public ::testing::Test {
 protected:
  PoolStats Figures() const {
    PoolStats s;
    stats_.fill_stats(s);
    cache_->adjust_stats(s);
    return s;
  }
  void* Alloc(std::size_t bytes, StreamId stream = kStream, TagId tag = kUntagged) {
    Allocation a;
    Status error;
    EXPECT_TRUE(cache_->try_allocate(bytes, stream, tag, a, error)) << error.ToString();
    return a.ptr;
  }
  Status Free(void* p) {
    Allocation freed;
    Status error;
    return cache_->try_deallocate(p, freed, error) ? Status::Ok() : error;
  }

  // A thread that caches one 4096-byte block, then makes no call until finish() (or its destruction); `after`
  // runs on it then.
  class IdleWorker {
   public:
    explicit IdleWorker(ThreadCacheTest& test, std::function<void()> after = {})
        : thread_([this, &test, after = std::move(after)] {
            kept = test.Alloc(4096);
            EXPECT_TRUE(test.Free(kept).ok());
            cached_.count_down();
            done_.wait();
            if (after) after();
          }) {
      cached_.wait();
    }
    ~IdleWorker() { finish(); }
    void finish() {
      if (!thread_.joinable()) return;
      done_.count_down();
      thread_.join();
    }
    void* kept = nullptr;

   private:
    std::latch cached_{1}, done_{1};
    std::thread thread_;  // last: it starts once the rest exists
  };

  testing::FakeResource fake_;
  StatsAdaptor<> stats_{fake_};
  ThreadSafeAdaptor locked_{stats_};
  std::unique_ptr<ThreadCacheAdaptor> cache_ = std::make_unique<ThreadCacheAdaptor>(
      locked_, LiveFigures{&stats_.allocated_counter(), &stats_.requested_counter()}, ThreadCacheLimits{},
      "pool 'test'");
};

TEST_F(ThreadCacheTest, HitsOnTheSameStreamNeverReachTheUpstream) {
  void* p = Alloc(4096);
  ASSERT_TRUE(Free(p).ok());
  for (int i = 0; i < 1000; ++i) {
    void* q = Alloc(4096);
    ASSERT_EQ(q, p);
    ASSERT_TRUE(Free(q).ok());
  }
  EXPECT_EQ(fake_.allocate_calls, 1);
  EXPECT_EQ(fake_.deallocate_calls, 0);
  EXPECT_NE(Alloc(4000), p);        // another size: the upstream
  EXPECT_NE(Alloc(4096, 0x52), p);  // another stream: the upstream (reuse there would need a wait)
  EXPECT_EQ(Alloc(4096), p);        // the cached block, exactly
  EXPECT_EQ(fake_.allocate_calls, 3);
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

TEST_F(ThreadCacheTest, ACachedBlockIsNotAllocatedInAnyFigure) {
  void* p = Alloc(1000);
  void* q = Alloc(70000);
  ASSERT_TRUE(Free(q).ok());
  PoolStats s = Figures();
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.active_bytes, 1024u);
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.live_blocks, 1u);
  EXPECT_EQ(s.peak_allocated_bytes, 1024u + 70144u);
  EXPECT_EQ(s.peak_requested_bytes, 71000u);
  EXPECT_EQ(cache_->cached_bytes(), 70144u);
  ASSERT_EQ(Alloc(70000), q);  // a hit counts as an allocation and a cache hit
  s = Figures();
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.allocated_bytes, 1024u + 70144u);
  ASSERT_TRUE(Free(p).ok());
  ASSERT_TRUE(Free(q).ok());
  cache_->reset_peaks();
  EXPECT_EQ(Figures().peak_allocated_bytes, 0u);
  EXPECT_EQ(Figures().live_blocks, 0u);
}

TEST_F(ThreadCacheTest, BlocksThatNeedAWaitOrLargeGoBackToTheUpstream) {
  void* recorded = Alloc(4096);
  ASSERT_TRUE(cache_->record_stream(recorded, 0x52).ok());
  EXPECT_EQ(fake_.record_stream_calls, 1);
  ASSERT_TRUE(Free(recorded).ok());
  EXPECT_EQ(fake_.deallocate_calls, 1);
  void* same = Alloc(4096);
  ASSERT_TRUE(cache_->record_stream(same, kStream).ok());  // its own stream: nothing to record
  EXPECT_EQ(fake_.record_stream_calls, 1);
  ASSERT_TRUE(Free(same).ok());
  EXPECT_EQ(fake_.deallocate_calls, 1);  // kept
  ASSERT_TRUE(Free(Alloc(2 << 20)).ok());
  EXPECT_EQ(fake_.deallocate_calls, 2);
}

TEST_F(ThreadCacheTest, TaggedBlocksAreReusedOnlyForTheirTag) {
  void* p = Alloc(4096, kStream, /*tag=*/3);
  ASSERT_TRUE(Free(p).ok());
  EXPECT_EQ(fake_.deallocate_calls, 0);
  TagFigures cached;
  cache_->cached_by_tag(cached);
  EXPECT_EQ(cached.bytes[3], 4096u);
  EXPECT_EQ(cached.blocks[3], 1u);
  void* other = Alloc(4096, kStream, /*tag=*/4);
  EXPECT_NE(other, p);
  EXPECT_EQ(Alloc(4096, kStream, /*tag=*/3), p);
  cache_->cached_by_tag(cached);
  EXPECT_EQ(cached.bytes[3], 0u);
}

TEST_F(ThreadCacheTest, UnknownAndDoubleFreesAreRefusedAboveThePool) {
  void* p = Alloc(4096);
  ASSERT_TRUE(Free(p).ok());
  const Status twice = Free(p);  // p is cached: the pool below still holds it live
  EXPECT_EQ(twice.code(), StatusCode::kNotFound);
  EXPECT_NE(twice.message().find("pool 'test'"), std::string::npos) << twice.ToString();
  int local = 0;
  EXPECT_EQ(Free(&local).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache_->record_stream(p, 0x52).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache_->block_size(p).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fake_.deallocate_calls, 0);
  EXPECT_EQ(fake_.record_stream_calls, 0);
  EXPECT_EQ(*cache_->block_size(Alloc(4096)), 4096u);
}

TEST_F(ThreadCacheTest, LimitsBoundWhatAThreadKeeps) {
  std::vector<void*> blocks;
  for (int i = 0; i < 40; ++i) blocks.push_back(Alloc(512));
  for (void* p : blocks) ASSERT_TRUE(Free(p).ok());
  EXPECT_EQ(cache_->cached_blocks(), detail::kMaxCachedBlocks);  // the oldest went back
  EXPECT_EQ(fake_.deallocate_calls, 40 - static_cast<int>(detail::kMaxCachedBlocks));
  blocks.clear();
  for (int i = 0; i < 6; ++i) blocks.push_back(Alloc(1 << 20));
  for (void* p : blocks) ASSERT_TRUE(Free(p).ok());
  EXPECT_LE(cache_->cached_bytes(), ThreadCacheLimits{}.max_bytes);
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

TEST_F(ThreadCacheTest, AnOutOfMemoryFlushesEveryCacheAndRetriesOnce) {
  ASSERT_TRUE(Free(Alloc(4096)).ok());
  ASSERT_TRUE(Free(Alloc(8192)).ok());
  fake_.fail_next_allocations = 1;
  Allocation a;
  Status error;
  ASSERT_TRUE(cache_->try_allocate(1 << 20, kStream, kUntagged, a, error)) << error.ToString();
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_EQ(fake_.deallocate_calls, 2);
  fake_.fail_next_allocations = 1;  // nothing cached now: the failure is final
  EXPECT_FALSE(cache_->try_allocate(1 << 20, kStream, kUntagged, a, error));
  EXPECT_EQ(error.code(), StatusCode::kResourceExhausted);
}

TEST_F(ThreadCacheTest, TrimAndFlushEmptyTheCachesOfLiveThreads) {
  std::latch cached(1), done(1);
  std::thread worker([&] {
    ASSERT_TRUE(Free(Alloc(4096)).ok());
    ASSERT_TRUE(Free(Alloc(65536)).ok());
    cached.count_down();
    done.wait();
  });
  cached.wait();
  EXPECT_EQ(cache_->cached_bytes(), 4096u + 65536u);
  (void)cache_->trim(0);
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_EQ(fake_.trim_calls, 1);
  EXPECT_TRUE(fake_.live.empty());
  done.count_down();
  worker.join();
}

TEST_F(ThreadCacheTest, AThreadsExitReturnsItsCache) {
  void* handed = nullptr;
  std::thread worker([&] {
    for (std::size_t bytes : {512u, 4096u, 65536u, 1u << 20}) ASSERT_TRUE(Free(Alloc(bytes)).ok());
    handed = Alloc(4096);  // live when the thread exits: freed later by another thread
  });
  worker.join();
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_EQ(fake_.live.size(), 1u);
  ASSERT_TRUE(Free(handed).ok());  // found in the exited thread's table (this thread may take over its slot)
  EXPECT_EQ(Figures().live_blocks, 0u);
  const std::uint64_t kept_here = cache_->cached_bytes();
  std::thread next([&] { ASSERT_TRUE(Free(Alloc(512)).ok()); });
  next.join();
  EXPECT_EQ(cache_->cached_bytes(), kept_here);  // what `next` kept went back when it exited
  cache_->flush();
  EXPECT_TRUE(fake_.live.empty());
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

// Runs a function on an exiting thread from a pthread key destructor: after the thread's thread_local
// destructors, in the passes where the adaptor gives the thread's slots back (a pthread key of its own). With
// `pass` 2 the value is set again in the first pass, so the function runs in a second one, after every key
// destructor of the first (the adaptor's release included, whatever order glibc takes the keys in).
class AtKeyExit {
 public:
  AtKeyExit() { EXPECT_EQ(::pthread_key_create(&key_, &Run), 0); }
  ~AtKeyExit() { ::pthread_key_delete(key_); }
  // On the calling thread: `fn` runs at its exit, in the key destructors' `pass`-th pass (1 or 2).
  void arm(std::function<void()> fn, int pass) {
    armed_ = {key_, std::move(fn), pass};
    EXPECT_EQ(::pthread_setspecific(key_, &armed_), 0);
  }

 private:
  struct Armed {
    pthread_key_t key{};
    std::function<void()> fn;
    int passes_left = 0;
  };
  static void Run(void* value) {
    auto* armed = static_cast<Armed*>(value);
    if (--armed->passes_left > 0) {
      ::pthread_setspecific(armed->key, armed);
      return;
    }
    armed->fn();
  }
  pthread_key_t key_{};
  Armed armed_;
};

TEST_F(ThreadCacheTest, CallsAfterAThreadGaveItsSlotBackDoNotUseIt) {
  std::latch released(1), other_cached(1), late_done(1);
  void* other_cached_block = nullptr;
  void* late_block = nullptr;
  AtKeyExit at_exit;
  std::thread exiting([&] {
    ASSERT_TRUE(Free(Alloc(512)).ok());  // binds a slot, which the thread's exit gives back
    at_exit.arm(
        [&] {  // runs after this thread's slot went back
          released.count_down();
          other_cached.wait();
          late_block = Alloc(4096);
          EXPECT_TRUE(Free(late_block).ok());
          late_done.count_down();
        },
        /*pass=*/2);
  });
  std::thread next([&] {
    released.wait();
    other_cached_block = Alloc(4096);  // binds the slot just given back
    EXPECT_TRUE(Free(other_cached_block).ok());
    other_cached.count_down();
    late_done.wait();
  });
  exiting.join();
  next.join();
  EXPECT_NE(late_block, other_cached_block);  // not taken from the other thread's cache
  cache_->flush();
  EXPECT_TRUE(fake_.live.empty());
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

TEST_F(ThreadCacheTest, AThreadWhoseFirstCallIsInAKeyDestructorGivesItsSlotBack) {
  // A C program freeing a per-thread block from a pthread key destructor: the thread's first call comes after
  // its thread_local destructors ran. Its slot (and the block it cached) must still go back at its exit, for
  // more threads than there are slots: had each kept its slot, the later ones would share the slot that
  // caches nothing.
  AtKeyExit at_exit;
  for (std::size_t i = 0; i < ThreadCacheAdaptor::kMaxSlots + 44; ++i) {
    std::thread exiting([&] { at_exit.arm([&] { ASSERT_TRUE(Free(Alloc(4096)).ok()); }, /*pass=*/1); });
    exiting.join();
    ASSERT_EQ(cache_->cached_bytes(), 0u) << "thread " << i << " kept its cache past its exit";
  }
  std::uint64_t cached_by_a_new_thread = 0;
  std::thread fresh([&] {
    ASSERT_TRUE(Free(Alloc(4096)).ok());
    cached_by_a_new_thread = cache_->cached_bytes();
  });
  fresh.join();
  EXPECT_EQ(cached_by_a_new_thread, 4096u);  // a slot that caches, not the shared one
  EXPECT_TRUE(fake_.live.empty());
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

// At exit, after the static that holds the adaptor's pthread key was destroyed (the key deleted), a thread's
// first call: the handler below is registered before the first call constructs that static, so exit() runs it
// after the static's destruction. It first takes the key indices exit freed with keys of its own; had the
// adaptor still set its bindings on its deleted key, one of these keys' destructors would get them at the
// thread's exit. The adaptor and its upstream are left alive (leaked), as a process's pools are at exit.
namespace first_call_after_the_key {
testing::FakeResource* fake;
ThreadCacheAdaptor* cache;
std::atomic<int> foreign_values{0};  // values another key's destructor was given

void Count(void* value) {
  if (value != nullptr) foreign_values.fetch_add(1);
}

void AfterTheKeyWasDeleted() {
  for (int i = 0; i < 64; ++i) {
    pthread_key_t key;
    if (::pthread_key_create(&key, &Count) != 0) std::_Exit(16);
  }
  const std::uint64_t cached_before = cache->cached_bytes();  // the main thread's 512 bytes
  int failures = 0;                                           // the exit code: a bit per failure
  std::thread late([&] {
    Allocation a, freed;
    Status error;
    if (!cache->try_allocate(4096, kStream, kUntagged, a, error) ||
        !cache->try_deallocate(a.ptr, freed, error)) {
      failures |= 8;
    } else if (cache->cached_bytes() != cached_before) {
      failures |= 2;  // cached in a slot of its own: the bindings were set on some key
    }
  });
  late.join();
  if (foreign_values.load() != 0) failures |= 4;  // ... and that key was another's
  std::_Exit(failures);
}

[[noreturn]] void Run() {
  fake = new testing::FakeResource();
  auto* stats = new StatsAdaptor<>(*fake);
  auto* locked = new ThreadSafeAdaptor(*stats);
  cache =
      new ThreadCacheAdaptor(*locked, LiveFigures{&stats->allocated_counter(), &stats->requested_counter()},
                             ThreadCacheLimits{}, "pool 'exit'");
  if (std::atexit(&AfterTheKeyWasDeleted) != 0) std::_Exit(32);
  Allocation a, freed;
  Status error;
  if (!cache->try_allocate(512, kStream, kUntagged, a, error) || !cache->try_deallocate(a.ptr, freed, error))
    std::_Exit(64);
  std::exit(1);  // the handler ends the process with its own code
}
}  // namespace first_call_after_the_key

TEST(ThreadCacheExitTest, AFirstCallAfterTheKeyWasDeletedAtExitSetsNoKey) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the key's static is made in it
  EXPECT_EXIT(first_call_after_the_key::Run(), ::testing::ExitedWithCode(0), "");
}

// A process with no pthread key left (PTHREAD_KEYS_MAX made by someone else) before the thread caches' key is
// made: no thread's bindings can be registered for release, so every thread takes the shared slot, which
// caches nothing (each free goes to the pool) and holds nothing to give back at a thread's exit. Exit code: a
// bit per failure.
namespace no_key_left {
[[noreturn]] void Run() {
  for (int i = 0; i < 100000; ++i) {  // glibc's PTHREAD_KEYS_MAX is 1024
    pthread_key_t key;
    if (::pthread_key_create(&key, nullptr) != 0) break;
  }
  pthread_key_t one_more;
  if (::pthread_key_create(&one_more, nullptr) == 0) std::_Exit(64);  // keys left: the test proves nothing
  testing::FakeResource fake;
  StatsAdaptor<> stats(fake);
  ThreadSafeAdaptor locked(stats);
  ThreadCacheAdaptor cache(locked, LiveFigures{&stats.allocated_counter(), &stats.requested_counter()},
                           ThreadCacheLimits{}, "pool 'no key'");
  int failures = 0;
  auto pairs = [&] {
    for (int i = 0; i < 3; ++i) {
      Allocation a, freed;
      Status error;
      if (!cache.try_allocate(4096, kStream, kUntagged, a, error) ||
          !cache.try_deallocate(a.ptr, freed, error))
        failures |= 1;
    }
  };
  pairs();
  std::thread other(pairs);
  other.join();
  if (cache.cached_bytes() != 0) failures |= 2;   // a thread cached in a slot it could never give back
  if (fake.deallocate_calls != 6) failures |= 4;  // every free reached the pool
  if (!cache.check_invariants(stats.live_blocks()).ok()) failures |= 8;
  std::_Exit(failures);
}
}  // namespace no_key_left

TEST(ThreadCacheExitTest, WithNoPthreadKeyLeftEveryThreadTakesTheSharedSlot) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the key's static is made in it
  EXPECT_EXIT(no_key_left::Run(), ::testing::ExitedWithCode(0), "");
}

TEST_F(ThreadCacheTest, ACrossThreadFreeGoesToThePool) {
  void* p = Alloc(4096);
  std::thread other([&] { ASSERT_TRUE(Free(p).ok()); });
  other.join();
  EXPECT_EQ(fake_.deallocate_calls, 1);
  EXPECT_EQ(Figures().live_blocks, 0u);
  EXPECT_EQ(Figures().other_thread_frees, 1u);
}

TEST_F(ThreadCacheTest, OnlyFreesOfAnotherThreadsBlockCountAsOtherThreadFrees) {
  void* own = Alloc(4096);
  ASSERT_TRUE(Free(own).ok());  // into this thread's cache
  void* big = Alloc(64 << 20);  // above what a cache keeps: the pool's, freed on its own thread
  ASSERT_TRUE(Free(big).ok());
  EXPECT_EQ(Figures().other_thread_frees, 0u);
  void* a = Alloc(4096);
  void* b = Alloc(8192);
  std::thread other([&] {
    EXPECT_TRUE(Free(a).ok());
    EXPECT_TRUE(Free(b).ok());
    EXPECT_FALSE(Free(b).ok());  // a double free is refused, and not counted
  });
  other.join();
  EXPECT_EQ(Figures().other_thread_frees, 2u);
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

TEST_F(ThreadCacheTest, DestroyingTheAdaptorGivesBackWhatThreadsCached) {
  std::latch cached(1), done(1);
  std::thread worker([&] {
    ASSERT_TRUE(Free(Alloc(4096)).ok());
    cached.count_down();
    done.wait();
    ASSERT_TRUE(Free(Alloc(4096)).ok());  // a new adaptor: another slot, nothing stale
  });
  cached.wait();
  cache_.reset();
  EXPECT_TRUE(fake_.live.empty());
  cache_ = std::make_unique<ThreadCacheAdaptor>(
      locked_, LiveFigures{&stats_.allocated_counter(), &stats_.requested_counter()}, ThreadCacheLimits{},
      "pool 'test'");
  done.count_down();
  worker.join();  // its exit gave the new adaptor's block back
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_TRUE(fake_.live.empty());
}

// A fixture-like adaptor with idle sweeps after `idle_misses` looks (the fixture's own has them off).
std::unique_ptr<ThreadCacheAdaptor> SweepingCache(MemoryResource& upstream, StatsAdaptor<>& stats,
                                                  std::uint32_t idle_misses) {
  ThreadCacheLimits limits;
  limits.idle_misses = idle_misses;
  return std::make_unique<ThreadCacheAdaptor>(
      upstream, LiveFigures{&stats.allocated_counter(), &stats.requested_counter()}, limits, "pool 'test'");
}

// A thread that stops allocating gives its cache back once other threads' misses have found it idle
// idle_misses looks in a row (the first look only notes its activity). Three slots here (the shared one,
// the worker's, this thread's): each miss served by the pool looks at the worker's once.
TEST_F(ThreadCacheTest, AnIdleThreadsCacheGoesBackOnceOtherThreadsMissesFindItIdle) {
  cache_ = SweepingCache(locked_, stats_, 4);
  IdleWorker worker(*this, [&] {
    void* again = Alloc(4096);  // its cache is empty now: the pool's
    EXPECT_NE(again, worker.kept);
    EXPECT_TRUE(Free(again).ok());
  });
  void* const kept = worker.kept;
  std::vector<void*> mine;
  for (int i = 0; i < 4; ++i) mine.push_back(Alloc(512));  // misses: a note, then three unchanged looks
  EXPECT_EQ(cache_->cached_bytes(), 4096u);
  EXPECT_EQ(fake_.deallocate_calls, 0);
  mine.push_back(Alloc(512));  // the fourth unchanged look
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_EQ(fake_.deallocate_calls, 1);
  EXPECT_EQ(fake_.live.count(kept), 0u) << "the idle worker's block is back in the pool";
  const int allocations = fake_.allocate_calls;
  worker.finish();
  EXPECT_EQ(fake_.allocate_calls, allocations + 1);
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
  for (void* p : mine) ASSERT_TRUE(Free(p).ok());
}

// try_allocate_cached never flushes (a flush may reach the driver, which that path must not): when its look
// finds a thread idle it declines, and the try_allocate the caller makes next flushes that thread's cache.
TEST_F(ThreadCacheTest, TheDriverFreePathLeavesTheFlushOfAnIdleThreadToTheFullPath) {
  cache_ = SweepingCache(locked_, stats_, 2);
  IdleWorker worker(*this);
  void* mine = Alloc(512);  // a look that notes the worker's activity
  Allocation a;
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(cache_->try_allocate_cached(1024, kStream, kUntagged, a));  // the fake upstream declines too
    EXPECT_EQ(cache_->cached_bytes(), 4096u) << "a flush on the driver-free path, call " << i;
  }
  EXPECT_EQ(fake_.deallocate_calls, 0);
  void* next = Alloc(1024);
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_EQ(fake_.deallocate_calls, 1);
  ASSERT_TRUE(Free(mine).ok());
  ASSERT_TRUE(Free(next).ok());
  worker.finish();
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

// A request makes one look whichever path serves it: one the driver-free path declined (here the fake
// upstream declines every such request; in a pool, a marker falling due does, which depends on time) counts
// once, so what is flushed when does not depend on why it declined.
TEST_F(ThreadCacheTest, ARequestTheDriverFreePathDeclinesLooksOnce) {
  cache_ = SweepingCache(locked_, stats_, 4);
  IdleWorker worker(*this);
  std::vector<void*> mine{Alloc(512)};  // a look that notes the worker's activity
  Allocation a;
  for (int i = 0; i < 4; ++i) {  // four requests the way the C ABI makes them: four unchanged looks
    EXPECT_EQ(cache_->cached_bytes(), 4096u) << "flushed after " << i << " requests";
    EXPECT_FALSE(cache_->try_allocate_cached(1024, kStream, kUntagged, a));
    mine.push_back(Alloc(1024));
  }
  EXPECT_EQ(cache_->cached_bytes(), 0u);
  EXPECT_EQ(fake_.deallocate_calls, 1);
  for (void* p : mine) ASSERT_TRUE(Free(p).ok());
  worker.finish();
  EXPECT_TRUE(cache_->check_invariants(stats_.live_blocks()).ok());
}

// A thread that allocates between the other threads' misses is never idle, however many misses there are;
// and with idle_misses 0 (ThreadCacheLimits' default) no idle thread is swept either.
TEST_F(ThreadCacheTest, AThreadThatKeepsAllocatingOrSweepsOffKeepTheirCaches) {
  for (const std::uint32_t idle_misses : {4u, 0u}) {
    cache_ = SweepingCache(locked_, stats_, idle_misses);
    const int deallocations = fake_.deallocate_calls;
    std::counting_semaphore<1> go(0), went(0);
    bool stop = false;
    void* first = nullptr;
    std::thread worker([&] {
      first = Alloc(4096);
      ASSERT_TRUE(Free(first).ok());
      went.release();
      for (go.acquire(); !stop; go.acquire()) {
        if (idle_misses != 0) {
          EXPECT_EQ(Alloc(4096), first);  // a hit: its cache is still there
          ASSERT_TRUE(Free(first).ok());
        }
        went.release();
      }
    });
    went.acquire();
    std::vector<void*> mine;
    for (int i = 0; i < 50; ++i) {
      mine.push_back(Alloc(512));  // a miss served by the pool: a look at the worker's slot
      go.release();
      went.acquire();
    }
    EXPECT_EQ(cache_->cached_bytes(), 4096u) << "idle_misses " << idle_misses;
    EXPECT_EQ(fake_.deallocate_calls, deallocations);
    stop = true;
    go.release();
    worker.join();
    for (void* p : mine) ASSERT_TRUE(Free(p).ok());
  }
}

}  // namespace
}  // namespace memcoord
