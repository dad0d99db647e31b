// Integration tests with real worker processes: memcoord_test_worker under mpirun (lockstep through
// MPI_Barrier, as a gradient all-reduce would keep them), and workers spawned directly (MEMCOORD_RANK/...)
// for failure injection, since mpirun would tear the job down itself when one rank is killed.
// The coordinator runs in this process on an ephemeral loopback port.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <regex>

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

const std::vector<std::string> kMpiEnv = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

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

TEST(WorkerProcesses, StoppedWorkerIsDeadAfterThreeSilentIntervalsAndTheOthersAbort) {
  Fixture f;
  auto children = SpawnWorkers(f.server->address(), 3);
  ASSERT_TRUE(f.wait_live(3, milliseconds(10000)));
  const auto start = SteadyClock::now();
  children[2]->signal(SIGSTOP);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = f.client->GetCluster();
        return v.ok() && FindRank(*v, 2) && FindRank(*v, 2)->state == WorkerState::kDead;
      },
      milliseconds(5000)));
  const auto detected = SteadyClock::now() - start;
  EXPECT_GE(detected, milliseconds(200));   // not before ~3 x 100 ms of silence (minus the last report's age)
  EXPECT_LT(detected, milliseconds(1000));  // 3 x 100 ms + the sweep period + slack
  std::printf("SIGSTOP detected in %.1f ms\n", std::chrono::duration<double, std::milli>(detected).count());
  auto view = f.client->GetCluster();
  EXPECT_NE(FindRank(*view, 2)->dead_reason.find("silent"), std::string::npos);
  for (int r : {0, 1}) {
    ASSERT_EQ(children[r]->wait(milliseconds(10000)), 3) << children[r]->output();
    EXPECT_NE(children[r]->output().find("ABORTED rank=" + std::to_string(r) + " reason=rank 2 "),
              std::string::npos)
        << children[r]->output();
  }
  EXPECT_LT(SteadyClock::now() - start, milliseconds(10000));
  std::printf("others aborted %.1f ms after the failure\n",
              std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
  children[2]->signal(SIGKILL);
}

}  // namespace
}  // namespace memcoord::coordinator
