// memcoord_test_worker: a tiny training loop for integration, fault and soak tests, one process per rank
// (under mpirun or spawned directly with MEMCOORD_RANK/...). Each step allocates and frees `--alloc` bytes
// per pool (tag "activations"; the freed memory stays cached, so a trim has something to release), optionally
// leaks `--leak` bytes per step (tag "leak"), sleeps `--step-ms`, and with --mpi meets the other ranks:
// an MPI_Barrier (lockstep, like a gradient all-reduce), or with --allreduce N a real MPI_Allreduce of N
// floats held in pool memory, checked against the expected sum every step. It prints one line per event on
// stdout:
//   READY rank=R pid=P
//   RSS rank=R step=S kb=K [final]          (every --rss-every steps, and at the end)
//   APPLIED rank=R kind=trim|quota id=I requested_step=S step=T released=B code=C
//   ABORTED rank=R reason=...               (then exits with code 3)
//   ALLREDUCE-MISMATCH rank=R step=S ...    (then exits with code 4)
//   DONE rank=R steps=N
// With --stop-file F (and --mpi), the job ends at the first step where rank 0 sees F exist: the decision
// travels in the all-reduce itself, so every rank stops at the same step.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "common/logging.h"
#include "worker/worker.h"
#ifdef MEMCOORD_TEST_WORKER_MPI
#include <mpi.h>
#endif

namespace {

std::atomic<bool> g_aborted{false};

struct Args {
  int steps = 50;
  int step_ms = 20;
  std::string alloc_text = "4MiB";
  std::string leak_text = "0";
  std::vector<std::string> pool_names = {"default"};
  bool use_mpi = false;
  bool until_abort = false;
  int report_ms = 100;
  std::string group = "world";
  int allreduce_floats = 0;
  std::string stop_file;
  int rss_every = 0;
  bool quiet_applied = false;
  std::uint64_t alloc = 0;
  std::uint64_t leak = 0;
};

void AddOptions(CLI::App& app, Args& a) {
  app.add_option("--steps", a.steps, "steps to run (0 with --until-abort or --stop-file: no limit)");
  app.add_option("--step-ms", a.step_ms, "time per step");
  app.add_option("--alloc", a.alloc_text, "bytes allocated and freed per step per pool");
  app.add_option("--leak", a.leak_text, "bytes leaked per step (tag 'leak')");
  app.add_option("--pools", a.pool_names, "pool names")->delimiter(',');
  app.add_flag("--mpi", a.use_mpi, "meet the other ranks every step (MPI_Barrier, or --allreduce)");
  app.add_flag("--until-abort", a.until_abort, "run until aborted (or --steps, if positive)");
  app.add_option("--report-ms", a.report_ms, "report interval");
  app.add_option("--group", a.group, "communicator group (aborted together)");
  app.add_option("--allreduce", a.allreduce_floats,
                 "with --mpi: all-reduce this many floats per step (checked)");
  app.add_option("--stop-file", a.stop_file, "with --mpi: stop when rank 0 sees this file");
  app.add_option("--rss-every", a.rss_every,
                 "print the resident set size every N steps (0: only at the end)");
  app.add_flag("--quiet-applied", a.quiet_applied, "do not print APPLIED lines at the end");
}

long ResidentKb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

void PrintApplied(const memcoord::Worker& worker) {
  for (const memcoord::AppliedCommand& c : worker.applied_commands()) {
    std::printf("APPLIED rank=%d kind=%s id=%llu requested_step=%lld step=%lld released=%llu code=%d\n",
                worker.topology().rank, c.kind == memcoord::AppliedCommand::Kind::kTrim ? "trim" : "quota",
                static_cast<unsigned long long>(c.command_id), static_cast<long long>(c.requested_step),
                static_cast<long long>(c.step), static_cast<unsigned long long>(c.released_bytes),
                static_cast<int>(c.status.code()));
  }
}

std::vector<memcoord::CachingPool*> CreatePools(memcoord::Worker& w, const Args& a) {
  std::vector<memcoord::CachingPool*> pools;
  for (const std::string& name : a.pool_names) {
    memcoord::PoolOptions po;
    po.name = name;
    auto pool = w.create_pool(po);
    if (!pool.ok()) {
      std::fprintf(stderr, "pool: %s\n", pool.status().ToString().c_str());
      std::exit(1);
    }
    pools.push_back(*pool);
  }
  return pools;
}

// The step's memory traffic: allocate and free `alloc` in every pool, and leak `leak` when asked.
void TouchPools(const std::vector<memcoord::CachingPool*>& pools, const Args& a, std::vector<void*>& leaked) {
  for (memcoord::CachingPool* pool : pools) {
    auto activations = pool->tag("activations");
    auto block = pool->allocate(a.alloc, memcoord::kDefaultStream, activations.ok() ? *activations : 0);
    if (block.ok()) (void)pool->deallocate(*block);
    if (a.leak > 0) {
      auto leak_tag = pool->tag("leak");
      auto kept = pool->allocate(a.leak, memcoord::kDefaultStream, leak_tag.ok() ? *leak_tag : 0);
      if (kept.ok()) leaked.push_back(*kept);
    }
  }
}

// Meets the other ranks; returns true when the job should stop (the --stop-file decision, shared).
bool MeetRanks(memcoord::CachingPool& pool, const Args& a, int rank, int world, int step) {
#ifdef MEMCOORD_TEST_WORKER_MPI
  if (!a.use_mpi) return false;
  if (a.allreduce_floats <= 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    return false;
  }
  // The gradient lives in pool memory (the host backend is real memory); the last float carries rank 0's
  // stop decision, so every rank stops after the same step.
  const int n = a.allreduce_floats + 1;
  auto block = pool.allocate(static_cast<std::size_t>(n) * sizeof(float));
  if (!block.ok()) {
    std::fprintf(stderr, "allreduce buffer: %s\n", block.status().ToString().c_str());
    std::exit(1);
  }
  float* grad = static_cast<float*>(*block);
  for (int i = 0; i < n - 1; ++i) grad[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  grad[n - 1] = (rank == 0 && !a.stop_file.empty() && access(a.stop_file.c_str(), F_OK) == 0) ? 1.0f : 0.0f;
  MPI_Allreduce(MPI_IN_PLACE, grad, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  for (int i = 0; i < n - 1; ++i) {
    if (grad[i] != ranks_sum * static_cast<float>(i % 7 + 1)) {
      std::printf("ALLREDUCE-MISMATCH rank=%d step=%d index=%d got=%g\n", rank, step, i, grad[i]);
      std::fflush(stdout);
      std::_Exit(4);
    }
  }
  const bool stop = grad[n - 1] > 0.0f;
  (void)pool.deallocate(*block);
  return stop;
#else
  (void)pool, (void)a, (void)rank, (void)world, (void)step;
  return false;
#endif
}

// The training loop; returns the number of steps completed.
int Train(memcoord::Worker& w, const std::vector<memcoord::CachingPool*>& pools, const Args& a,
          std::vector<void*>& leaked) {
  const int rank = w.topology().rank;
  int done = 0;
  for (int step = 1; a.steps <= 0 || step <= a.steps; ++step) {
    if (g_aborted) break;
    w.step_begin();
    TouchPools(pools, a, leaked);
    if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
    const bool stop = MeetRanks(*pools.front(), a, rank, w.topology().world_size, step);
    (void)w.step_end();
    done = step;
    if (a.rss_every > 0 && step % a.rss_every == 0) {
      std::printf("RSS rank=%d step=%d kb=%ld\n", rank, step, ResidentKb());
      std::fflush(stdout);
    }
    // --steps 0 runs without limit only with --until-abort or --stop-file; otherwise one step.
    if (stop || (!a.until_abort && a.steps <= 0 && a.stop_file.empty())) break;
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memcoord test worker"};
  Args a;
  AddOptions(app, a);
  CLI11_PARSE(app, argc, argv);
#ifdef MEMCOORD_TEST_WORKER_MPI
  if (a.use_mpi) MPI_Init(&argc, &argv);
#else
  if (a.use_mpi) {
    std::fprintf(stderr, "built without MPI\n");
    return 2;
  }
#endif
  auto alloc = memcoord::ParseBytes(a.alloc_text);
  auto leak = memcoord::ParseBytes(a.leak_text);
  if (!alloc.ok() || !leak.ok() || a.pool_names.empty()) {
    std::fprintf(stderr, "bad size or no pool\n");
    return 2;
  }
  a.alloc = *alloc;
  a.leak = *leak;
  memcoord::WorkerOptions options;
  options.backend = "host";
  options.capacity_bytes = 1ull << 30;
  options.report_interval = std::chrono::milliseconds(a.report_ms);
  options.group = a.group;
  auto worker = memcoord::Worker::init(options);
  if (!worker.ok()) {
    std::fprintf(stderr, "init: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  memcoord::Worker& w = **worker;
  memcoord::SetUpLogging("test_worker", w.topology().rank);
  w.on_abort([](const std::string&) { g_aborted = true; });
  const std::vector<memcoord::CachingPool*> pools = CreatePools(w, a);
  std::printf("READY rank=%d pid=%d\n", w.topology().rank, static_cast<int>(::getpid()));
  std::fflush(stdout);

  std::vector<void*> leaked;
  const int done = Train(w, pools, a, leaked);
  if (g_aborted) {
    std::printf("ABORTED rank=%d reason=%s\n", w.topology().rank, w.abort_reason().value_or("").c_str());
    std::fflush(stdout);
    std::_Exit(3);  // as a training program would after aborting its communicator
  }
  if (!a.quiet_applied) PrintApplied(w);
  std::printf("RSS rank=%d step=%d kb=%ld final\n", w.topology().rank, done, ResidentKb());
  std::printf("DONE rank=%d steps=%d\n", w.topology().rank, done);
  std::fflush(stdout);
  w.shutdown();
  for (void* p : leaked) {
    for (memcoord::CachingPool* pool : pools) (void)pool->deallocate(p);
  }
#ifdef MEMCOORD_TEST_WORKER_MPI
  if (a.use_mpi) MPI_Finalize();
#endif
  return 0;
}
