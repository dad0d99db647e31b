#include "allocator/trace_replay.h"

#include <fmt/format.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace memcoord {
namespace {
std::int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

PoolOptions ForLaggedReplay(PoolOptions options) {
  options.large_free_marker_interval_us = 0;
  return options;
}

namespace {

// Runs the trace's events through the pool, one at a time, from whichever thread calls run().
class EventRunner {
 public:
  EventRunner(const Trace& trace, CachingPool& pool, LaggingStreamsAdaptor* lagging)
      : trace_(trace), pool_(pool), lagging_(lagging), slots_(trace.slots, nullptr) {}

  // Event i; false (and failure() set) when the pool refused it.
  bool run(std::size_t i) {
    const TraceEvent& e = trace_.events[i];
    if (lagging_ != nullptr) lagging_->advance();
    // The calls the C ABI makes (memcoord_torch_malloc/free): the driver-free paths first, the full ones when
    // they decline.
    if (e.kind == TraceEvent::Kind::kAlloc) {
      void* hit = pool_.allocate_cached(e.bytes, e.stream);
      if (hit == nullptr) {
        Result<void*> p = pool_.allocate(e.bytes, e.stream);
        if (!p.ok()) return fail(p.status(), i);
        hit = *p;
      }
      slots_[e.slot] = hit;
    } else {
      if (!pool_.free_cached(slots_[e.slot], e.stream)) {
        Status s = pool_.deallocate(slots_[e.slot]);
        if (!s.ok()) return fail(s, i);
      }
      slots_[e.slot] = nullptr;
    }
    return true;
  }
  // Frees what the replay left live (after a failure).
  void free_rest() {
    for (void* p : slots_) {
      if (p != nullptr) (void)pool_.deallocate(p);
    }
  }
  const Status& failure() const { return failure_; }
  void fail(Status s) { failure_ = std::move(s); }

 private:
  bool fail(const Status& s, std::size_t i) {
    failure_ = s.WithContext(fmt::format("replay event {}: ", i));
    return false;
  }

  const Trace& trace_;
  CachingPool& pool_;
  LaggingStreamsAdaptor* lagging_;
  std::vector<void*> slots_;
  Status failure_;
};

// Every event on one thread, this one. Returns the events done and this thread's CPU time.
std::size_t RunOnOneThread(const Trace& trace, EventRunner& runner, std::int64_t& cpu_ns) {
  const std::int64_t start = ThreadCpuNs();
  std::size_t done = 0;
  while (done < trace.events.size() && runner.run(done)) ++done;
  cpu_ns = ThreadCpuNs() - start;
  return done;
}

// Event i on a thread of its own for each of the trace's threads, in the trace's order: a thread waits for
// its turn on `next` (the index of the next event), runs its event and hands the turn on. Returns the events
// done and the threads' CPU time summed (the waiting for turns included).
std::size_t RunOnRecordedThreads(const Trace& trace, EventRunner& runner, std::int64_t& cpu_ns) {
  const std::size_t n = trace.events.size();
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<std::int64_t> cpu{0};
  std::vector<std::thread> threads;
  const auto replay_thread = [&](std::uint32_t t) {
    return [&, t] {
      const std::int64_t start = ThreadCpuNs();
      while (true) {
        std::size_t i = next.load(std::memory_order_acquire);
        while (i < n && !failed.load() && trace.events[i].thread != t) {
          next.wait(i, std::memory_order_acquire);
          i = next.load(std::memory_order_acquire);
        }
        if (i >= n || failed.load()) break;
        if (!runner.run(i)) {
          failed.store(true);
          next.store(n, std::memory_order_release);  // every thread leaves
        } else {
          next.store(i + 1, std::memory_order_release);
        }
        next.notify_all();
      }
      cpu.fetch_add(ThreadCpuNs() - start);
    };
  };
  Status start_failure;
  for (std::uint32_t t = 0; t < trace.threads && !failed.load(); ++t) {
    try {
      threads.emplace_back(replay_thread(t));
    } catch (const std::system_error& e) {  // the system refused a thread: those started leave at once
      start_failure =
          Internal(fmt::format("replay: cannot start thread {} of {}: {}", t + 1, trace.threads, e.what()));
      failed.store(true);
      next.store(n, std::memory_order_release);
      next.notify_all();
    }
  }
  for (std::thread& t : threads) t.join();
  if (!start_failure.ok() && runner.failure().ok()) runner.fail(start_failure);
  cpu_ns = cpu.load();
  return failed.load() ? 0 : n;  // after a failure Replay returns it, naming the event
}

}  // namespace

Result<ReplayResult> Replay(const Trace& trace, CachingPool& pool, LaggingStreamsAdaptor* lagging,
                            ReplayThreads threads) {
  EventRunner runner(trace, pool, lagging);
  const PoolStats before = pool.stats();
  std::int64_t cpu_ns = 0;
  const auto start = std::chrono::steady_clock::now();
  const bool several = threads == ReplayThreads::kRecorded && trace.threads > 1;
  const std::size_t done =
      several ? RunOnRecordedThreads(trace, runner, cpu_ns) : RunOnOneThread(trace, runner, cpu_ns);
  const auto stop = std::chrono::steady_clock::now();
  const PoolStats after = pool.stats();
  runner.free_rest();
  if (!runner.failure().ok()) return runner.failure();

  ReplayResult r;
  for (const SegmentSnapshot& s : pool.snapshot().segments) {
    (s.small ? r.small_arena_bytes : r.large_arena_bytes) += s.mapped_bytes;
  }
  r.events = done;
  r.allocations = trace.allocations;
  r.frees = trace.frees;
  r.peak_requested_bytes = trace.peak_live_bytes;
  r.peak_reserved_bytes = after.peak_reserved_bytes;
  r.ratio = trace.peak_live_bytes == 0
                ? 0.0
                : static_cast<double>(r.peak_reserved_bytes) / static_cast<double>(trace.peak_live_bytes);
  r.threads = several ? trace.threads : 1;
  if (done > 0) {
    r.wall_ns_per_event =
        std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(done);
    r.ns_per_event = static_cast<double>(cpu_ns) / static_cast<double>(done);
  }
  r.cache_hits = after.cache_hits - before.cache_hits;
  r.idle_cache_flushes = after.idle_cache_flushes - before.idle_cache_flushes;
  r.peak_sums = after.peak_sums - before.peak_sums;
  r.backend_allocations = after.backend_allocations - before.backend_allocations;
  r.misses = after.misses - before.misses;
  r.backend_frees = after.backend_frees - before.backend_frees;
  r.backend_allocated_bytes = after.backend_allocated_bytes - before.backend_allocated_bytes;
  r.backend_released_bytes = after.backend_released_bytes - before.backend_released_bytes;
  PoolStats calls = after;  // the model reads the counters of this replay only
  calls.backend_allocations = r.backend_allocations;
  calls.backend_frees = r.backend_frees;
  calls.backend_allocated_bytes = r.backend_allocated_bytes;
  calls.backend_released_bytes = r.backend_released_bytes;
  r.modeled_driver_ms = ModeledDriverMs(calls);
  r.pack_waits = after.pack_waits - before.pack_waits;
  r.pack_stream_syncs = after.pack_stream_syncs - before.pack_stream_syncs;
  if (lagging != nullptr) {
    r.waited_events = lagging->waited_events();
    r.lag_events = lagging->lag();
  }
  return r;
}

}  // namespace memcoord
