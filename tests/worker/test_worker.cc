// memcoord_test_worker: a tiny training loop for integration tests, one process per rank (under mpirun or
// spawned directly with MEMCOORD_RANK/...). Each step allocates and frees `--alloc` bytes per pool (tag
// "activations"; the freed memory stays cached, so a trim has something to release), optionally leaks
// `--leak` bytes per step (tag "leak"), sleeps `--step-ms`, and with --mpi meets the other ranks in an
// MPI_Barrier (lockstep, like a gradient all-reduce). It prints one line per event on stdout:
//   READY rank=R pid=P
//   APPLIED rank=R kind=trim|quota id=I requested_step=S step=T released=B code=C
//   ABORTED rank=R reason=...      (then exits with code 3)
//   DONE rank=R steps=N
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

void PrintApplied(const memcoord::Worker& worker) {
  for (const memcoord::AppliedCommand& c : worker.applied_commands()) {
    std::printf("APPLIED rank=%d kind=%s id=%llu requested_step=%lld step=%lld released=%llu code=%d\n",
                worker.topology().rank, c.kind == memcoord::AppliedCommand::Kind::kTrim ? "trim" : "quota",
                static_cast<unsigned long long>(c.command_id), static_cast<long long>(c.requested_step),
                static_cast<long long>(c.step), static_cast<unsigned long long>(c.released_bytes),
                static_cast<int>(c.status.code()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memcoord test worker"};
  int steps = 50;
  int step_ms = 20;
  std::string alloc_text = "4MiB";
  std::string leak_text = "0";
  std::vector<std::string> pool_names = {"default"};
  bool use_mpi = false;
  bool until_abort = false;
  int report_ms = 100;
  std::string group = "world";
  app.add_option("--steps", steps, "steps to run (0 with --until-abort: no limit)");
  app.add_option("--step-ms", step_ms, "time per step");
  app.add_option("--alloc", alloc_text, "bytes allocated and freed per step per pool");
  app.add_option("--leak", leak_text, "bytes leaked per step (tag 'leak')");
  app.add_option("--pools", pool_names, "pool names")->delimiter(',');
  app.add_flag("--mpi", use_mpi, "MPI_Barrier every step");
  app.add_flag("--until-abort", until_abort, "run until aborted (or --steps, if positive)");
  app.add_option("--report-ms", report_ms, "report interval");
  app.add_option("--group", group, "communicator group (aborted together)");
  CLI11_PARSE(app, argc, argv);

#ifdef MEMCOORD_TEST_WORKER_MPI
  if (use_mpi) MPI_Init(&argc, &argv);
#else
  if (use_mpi) {
    std::fprintf(stderr, "built without MPI\n");
    return 2;
  }
#endif
  auto alloc = memcoord::ParseBytes(alloc_text);
  auto leak = memcoord::ParseBytes(leak_text);
  if (!alloc.ok() || !leak.ok()) {
    std::fprintf(stderr, "bad size\n");
    return 2;
  }
  memcoord::WorkerOptions options;
  options.backend = "host";
  options.capacity_bytes = 1ull << 30;
  options.report_interval = std::chrono::milliseconds(report_ms);
  options.group = group;
  auto worker = memcoord::Worker::init(options);
  if (!worker.ok()) {
    std::fprintf(stderr, "init: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  memcoord::Worker& w = **worker;
  memcoord::SetUpLogging("test_worker", w.topology().rank);
  w.on_abort([](const std::string&) { g_aborted = true; });
  std::vector<memcoord::CachingPool*> pools;
  for (const std::string& name : pool_names) {
    memcoord::PoolOptions po;
    po.name = name;
    auto pool = w.create_pool(po);
    if (!pool.ok()) {
      std::fprintf(stderr, "pool: %s\n", pool.status().ToString().c_str());
      return 1;
    }
    pools.push_back(*pool);
  }
  std::printf("READY rank=%d pid=%d\n", w.topology().rank, static_cast<int>(::getpid()));
  std::fflush(stdout);

  std::vector<void*> leaked;
  int done = 0;
  for (int step = 1; steps <= 0 || step <= steps; ++step) {
    if (g_aborted) break;
    w.step_begin();
    for (memcoord::CachingPool* pool : pools) {
      auto activations = pool->tag("activations");
      auto block = pool->allocate(*alloc, memcoord::kDefaultStream, activations.ok() ? *activations : 0);
      if (block.ok()) (void)pool->deallocate(*block);
      if (*leak > 0) {
        auto leak_tag = pool->tag("leak");
        auto kept = pool->allocate(*leak, memcoord::kDefaultStream, leak_tag.ok() ? *leak_tag : 0);
        if (kept.ok()) leaked.push_back(*kept);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
#ifdef MEMCOORD_TEST_WORKER_MPI
    if (use_mpi) MPI_Barrier(MPI_COMM_WORLD);
#endif
    (void)w.step_end();
    done = step;
    if (!until_abort && steps <= 0) break;
  }
  if (g_aborted) {
    std::printf("ABORTED rank=%d reason=%s\n", w.topology().rank, w.abort_reason().value_or("").c_str());
    std::fflush(stdout);
    std::_Exit(3);  // as a training program would after aborting its communicator
  }
  PrintApplied(w);
  std::printf("DONE rank=%d steps=%d\n", w.topology().rank, done);
  std::fflush(stdout);
  w.shutdown();
  for (void* p : leaked) {
    for (memcoord::CachingPool* pool : pools) (void)pool->deallocate(p);
  }
#ifdef MEMCOORD_TEST_WORKER_MPI
  if (use_mpi) MPI_Finalize();
#endif
  return 0;
}
