// Integration tests with real worker processes: memcoord_test_worker under mpirun (lockstep through
// MPI_Barrier, as a gradient all-reduce would keep them), and workers spawned directly (MEMCOORD_RANK/...)
// for failure injection, since mpirun would tear the job down itself when one rank is killed.
// The coordinator runs in this process on an ephemeral loopback port.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <regex>
#include <thread>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::Child;
using memcoord::testing::FindRank;
using memcoord::testing::LiveCount;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

const std::vector<std::string> kMpiEnv = memcoord::testing::MpiJobEnv();

struct Fixture {
  Fixture() {
    auto started = CoordinatorServer::Start(CoordinatorOptions{});
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server = *std::move(started);
    ClientOptions options;
    options.address = server->address();
    client = std::make_unique<CoordinatorClient>(options);
  }
  bool wait_live(int n, milliseconds timeout) {
    return WaitFor(
        [&] {
          auto v = client->GetCluster();
          return v.ok() && LiveCount(*v) == n;
        },
        timeout);
  }
  std::unique_ptr<CoordinatorServer> server;
  std::unique_ptr<CoordinatorClient> client;
};

// Spawns `world` test workers directly, each its own rank.
std::vector<std::unique_ptr<Child>> SpawnWorkers(const std::string& address, int world) {
  std::vector<std::unique_ptr<Child>> children;
  for (int r = 0; r < world; ++r) {
    children.push_back(std::make_unique<Child>(
        std::vector<std::string>{MEMCOORD_TEST_WORKER, "--until-abort", "--steps", "0", "--step-ms", "10",
                                 "--report-ms", "100", "--alloc", "2MiB"},
        std::vector<std::string>{"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=" + std::to_string(r),
                                 "MEMCOORD_LOCAL_RANK=" + std::to_string(r),
                                 "MEMCOORD_WORLD_SIZE=" + std::to_string(world)}));
  }
  return children;
}

#ifdef MEMCOORD_MPIEXEC
TEST(WorkerProcesses, SynchronizedTrimUnderMpirunRunsAtTheSameStepOnEveryRank) {
  Fixture f;
  std::vector<std::string> env = kMpiEnv;
  env.push_back("MEMCOORD_COORDINATOR=" + f.server->address());
  Child job({MEMCOORD_MPIEXEC, "-np", "4", "--oversubscribe", "--bind-to", "none", MEMCOORD_TEST_WORKER,
             "--mpi", "--steps", "120", "--step-ms", "15", "--alloc", "8MiB"},
            env);
  ASSERT_TRUE(f.wait_live(4, milliseconds(15000))) << job.output();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = f.client->GetCluster();
        if (!v.ok()) return false;
        for (const auto& w : v->workers) {
          if (w.step < 5) return false;
        }
        return true;
      },
      milliseconds(10000)));
  auto outcome = f.client->Trim(TrimSpec{});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_TRUE(outcome->complete);
  ASSERT_EQ(outcome->acks.size(), 4u);
  for (const RankAck& a : outcome->acks) {
    EXPECT_EQ(a.step, outcome->step) << "rank " << a.rank;
    EXPECT_GE(a.released_bytes, 8u << 20) << "rank " << a.rank;
  }
  ASSERT_EQ(job.wait(milliseconds(20000)), 0) << job.output();
  // Each rank's own record: the trim ran at the end of step S, on every rank.
  const std::string out = job.output();
  const std::regex line(
      R"(APPLIED rank=(\d+) kind=trim id=\d+ requested_step=(-?\d+) step=(\d+) released=(\d+))");
  int ranks = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoll((*it)[2]), outcome->step);
    EXPECT_EQ(std::stoll((*it)[3]), outcome->step) << "rank " << (*it)[1] << " trimmed at another step";
    EXPECT_GT(std::stoull((*it)[4]), 0u);
    ++ranks;
  }
  EXPECT_EQ(ranks, 4) << out;
}
#endif

TEST(WorkerProcesses, KilledWorkerIsDeadAtOnceAndTheOthersAbortWithItsName) {
  Fixture f;
  auto children = SpawnWorkers(f.server->address(), 3);
  ASSERT_TRUE(f.wait_live(3, milliseconds(10000)));
  const auto start = SteadyClock::now();
  children[1]->signal(SIGKILL);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = f.client->GetCluster();
        return v.ok() && FindRank(*v, 1) && FindRank(*v, 1)->state == WorkerState::kDead;
      },
      milliseconds(3000)));
  const auto detected = SteadyClock::now() - start;
  EXPECT_LT(detected, milliseconds(1000)) << "a broken stream must mark the worker dead at once";
  std::printf("SIGKILL detected in %.1f ms\n", std::chrono::duration<double, std::milli>(detected).count());
  auto view = f.client->GetCluster();
  EXPECT_NE(FindRank(*view, 1)->dead_reason.find("broke"), std::string::npos)
      << FindRank(*view, 1)->dead_reason;
  for (int r : {0, 2}) {
    ASSERT_EQ(children[r]->wait(milliseconds(10000)), 3) << children[r]->output();
    EXPECT_NE(children[r]->output().find("ABORTED rank=" + std::to_string(r) + " reason=rank 1 "),
              std::string::npos)
        << children[r]->output();
  }
  EXPECT_LT(SteadyClock::now() - start, milliseconds(10000));
  std::printf("others aborted %.1f ms after the failure\n",
              std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
}

WorkerState StateOf(CoordinatorClient& client, int rank) {
  auto v = client.GetCluster();
  const WorkerRecord* w = v.ok() ? FindRank(*v, rank) : nullptr;
  return w == nullptr ? WorkerState::kDead : w->state;
}

// Times here are wall-clock on a loaded 2-core machine: the bounds leave seconds of slack where the
// contract leaves room (dead after 3 s of silence) and none where it does not (a 1 s stop aborts nothing).
TEST(WorkerProcesses, WorkerStoppedForOneSecondIsSuspectThenLiveAndNobodyIsAborted) {
  Fixture f;
  auto children = SpawnWorkers(f.server->address(), 3);
  ASSERT_TRUE(f.wait_live(3, milliseconds(10000)));
  const auto start = SteadyClock::now();
  children[2]->signal(SIGSTOP);
  bool suspect_seen = false, dead_seen = false;
  while (SteadyClock::now() - start < milliseconds(1000)) {
    const WorkerState state = StateOf(*f.client, 2);
    suspect_seen = suspect_seen || state == WorkerState::kSuspect;
    dead_seen = dead_seen || state == WorkerState::kDead;
    std::this_thread::sleep_for(milliseconds(20));
  }
  children[2]->signal(SIGCONT);
  EXPECT_TRUE(suspect_seen) << "silent for 1 s (10 report intervals) must show as suspect";
  ASSERT_TRUE(WaitFor([&] { return StateOf(*f.client, 2) == WorkerState::kLive; }, milliseconds(3000)))
      << "a suspect that reports again is live again";
  std::printf("stopped for %.1f ms: suspect, then live again\n",
              std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
  EXPECT_FALSE(dead_seen);
  // Nobody was aborted: every worker is still running, none printed ABORTED.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(children[r]->wait(milliseconds(200)), -1)
        << "rank " << r << " exited: " << children[r]->output();
    EXPECT_EQ(children[r]->output().find("ABORTED"), std::string::npos) << children[r]->output();
  }
  auto view = f.client->GetCluster();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(LiveCount(*view), 3);
}

TEST(WorkerProcesses, WorkerStoppedForGoodIsDeadAfterTheGraceAndTheOthersAbortNamingIt) {
  Fixture f;  // default grace: dead after 3 s without a report
  auto children = SpawnWorkers(f.server->address(), 3);
  ASSERT_TRUE(f.wait_live(3, milliseconds(10000)));
  const auto start = SteadyClock::now();
  children[2]->signal(SIGSTOP);
  ASSERT_TRUE(WaitFor([&] { return StateOf(*f.client, 2) == WorkerState::kSuspect; }, milliseconds(2000)));
  const auto suspect = SteadyClock::now() - start;
  ASSERT_TRUE(WaitFor([&] { return StateOf(*f.client, 2) == WorkerState::kDead; }, milliseconds(8000)));
  const auto detected = SteadyClock::now() - start;
  EXPECT_LT(suspect, milliseconds(1000));   // 3 x 100 ms + the sweep period + slack
  EXPECT_GE(detected, milliseconds(2800));  // 3 s of silence, minus the last report's age (<= 100 ms)
  EXPECT_LT(detected, milliseconds(5000));  // 3 s + the sweep period + slack on a loaded machine
  std::printf("SIGSTOP: suspect after %.1f ms, dead after %.1f ms\n",
              std::chrono::duration<double, std::milli>(suspect).count(),
              std::chrono::duration<double, std::milli>(detected).count());
  auto view = f.client->GetCluster();
  EXPECT_NE(FindRank(*view, 2)->dead_reason.find("silent"), std::string::npos)
      << FindRank(*view, 2)->dead_reason;
  for (int r : {0, 1}) {
    ASSERT_EQ(children[r]->wait(milliseconds(10000)), 3) << children[r]->output();
    EXPECT_NE(children[r]->output().find("ABORTED rank=" + std::to_string(r) + " reason=rank 2 "),
              std::string::npos)
        << children[r]->output();
  }
  std::printf("others aborted %.1f ms after the failure\n",
              std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
  children[2]->signal(SIGKILL);
}

}  // namespace
}  // namespace memcoord::coordinator
