// Fault tests with real processes (ctest label `faults`): the `memcoord coordinator` binary on a loopback
// port, memcoord_test_worker ranks (spawned directly, or under mpirun where ranks must meet in a collective),
// a TCP proxy the test stalls, and `memcoord status` / `memcoord trim` as an operator runs them.
// Each test ends with training finished or aborted with a named error, never a hang: every wait below has
// a bound. Detection times are printed (FAULT lines) for the closing note; bounds are generous (a loaded
// 2-core machine), the contract figures are in the messages.
//
// Liveness contract (coordinator/service/cluster_state.h): a closed session is dead at once; a worker
// silent for 3 report intervals is suspect; silent for the grace (3 s) it is dead and its group aborted.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "coordinator/service/coordinator_client.h"
#include "tests/faults/process_harness.h"
#include "tests/faults/tcp_proxy.h"

namespace memcoord::testing {
namespace {

using coordinator::ClientOptions;
using coordinator::CoordinatorClient;
using coordinator::WorkerState;
using std::chrono::milliseconds;

const std::vector<std::string> kMpiEnv = memcoord::testing::MpiJobEnv();

double MsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

void PrintFault(const char* fault, const char* what, double ms) {
  std::printf("FAULT %s: %s %.1f ms\n", fault, what, ms);
  std::fflush(stdout);
}

// A coordinator process and an admin client on it.
class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(coordinator_.start()) << coordinator_.output();
    ClientOptions options;
    options.address = coordinator_.address();
    client_ = std::make_unique<CoordinatorClient>(options);
  }
  // The state of `rank` as the coordinator holds it; nullopt when unknown or unreachable.
  std::optional<WorkerState> state_of(int rank) {
    auto view = client_->GetCluster();
    if (!view.ok()) return std::nullopt;
    const auto* w = FindRank(*view, rank);
    return w ? std::optional<WorkerState>(w->state) : std::nullopt;
  }
  bool wait_all(int world, WorkerState state, milliseconds timeout) {
    return WaitFor(
        [&] {
          for (int r = 0; r < world; ++r) {
            if (state_of(r) != state) return false;
          }
          return true;
        },
        timeout);
  }
  bool wait_steps(int world, std::int64_t steps, milliseconds timeout) {
    return WaitFor(
        [&] {
          auto view = client_->GetCluster();
          if (!view.ok() || static_cast<int>(view->workers.size()) < world) return false;
          for (const auto& w : view->workers) {
            if (w.step < steps) return false;
          }
          return true;
        },
        timeout);
  }
  // Every `rank` exits with code 3 after printing that it was aborted for `dead_rank`, within 10 s.
  void expect_aborted_naming(std::vector<std::unique_ptr<Child>>& ranks, const std::vector<int>& which,
                             int dead_rank) {
    for (int r : which) {
      Child& c = *ranks[static_cast<std::size_t>(r)];
      ASSERT_EQ(c.wait(milliseconds(10000)), 3) << "rank " << r << ":\n" << c.output();
      EXPECT_NE(
          c.output().find("ABORTED rank=" + std::to_string(r) + " reason=rank " + std::to_string(dead_rank)),
          std::string::npos)
          << c.output();
    }
  }
  // Every rank exits 0 having printed DONE, within `timeout`.
  static void expect_finished(std::vector<std::unique_ptr<Child>>& ranks, milliseconds timeout) {
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      ASSERT_EQ(ranks[r]->wait(timeout), 0) << "rank " << r << ":\n" << ranks[r]->output();
      EXPECT_EQ(CountOf(ranks[r]->output(), "ABORTED"), 0) << ranks[r]->output();
      EXPECT_NE(ranks[r]->output().find("DONE rank=" + std::to_string(r)), std::string::npos);
    }
  }
  std::map<int, RankStatus> status() {
    auto s = ClusterStatus(MEMCOORD_CLI, coordinator_.address());
    EXPECT_TRUE(s.has_value()) << "memcoord status failed";
    return s.value_or(std::map<int, RankStatus>{});
  }

  CoordinatorProcess coordinator_{MEMCOORD_CLI, FreeLoopbackPort()};
  std::unique_ptr<CoordinatorClient> client_;
};

TEST_F(Faults, WorkerKilledDuringATrimIsDeadAtOnceTheTrimEndsAndTheOthersAbortNamingIt) {
  const std::vector<std::string> direct(3, coordinator_.address());
  auto ranks = SpawnRanks(TestWorkerArgs(MEMCOORD_TEST_WORKER, 0, 20), 3, direct);
  ASSERT_TRUE(wait_all(3, WorkerState::kLive, milliseconds(20000)));
  ASSERT_TRUE(wait_steps(3, 5, milliseconds(10000)));
  // A synchronized trim (at a step S ahead), and rank 1 killed while the coordinator waits for S.
  Child trim(
      {MEMCOORD_CLI, "trim", "--coordinator", coordinator_.address(), "--deadline-ms", "3000", "--json"}, {});
  std::this_thread::sleep_for(milliseconds(30));
  const auto killed = SteadyClock::now();
  ranks[1]->signal(SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return state_of(1) == WorkerState::kDead; }, milliseconds(5000)));
  const double detected_ms = MsSince(killed);
  PrintFault("SIGKILL during a trim", "rank dead after", detected_ms);
  EXPECT_LT(detected_ms, 1000.0) << "a closed session must be dead at once (contract: <= 1 s)";
  // The trim is not left waiting for the dead rank: it ends well before its deadline would leave it hanging.
  EXPECT_NE(trim.wait(milliseconds(10000)), -1) << "memcoord trim hung:\n" << trim.output();
  std::printf("memcoord trim after the kill:\n%s\n", trim.output().c_str());
  expect_aborted_naming(ranks, {0, 2}, 1);
  PrintFault("SIGKILL during a trim", "others aborted after", MsSince(killed));
  const auto after = status();
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after.at(1).state, "dead");
  EXPECT_NE(after.at(1).dead_reason.find("broke"), std::string::npos) << after.at(1).dead_reason;
  for (int r : {0, 2}) EXPECT_EQ(after.at(r).state, "dead") << "rank " << r << " exited after its abort";
}

#ifdef MEMCOORD_MPIEXEC
TEST_F(Faults, CoordinatorKilledAndRestartedMidRunTrainingFinishesAndEveryRankReattaches) {
  std::vector<std::string> env = kMpiEnv;
  env.push_back("MEMCOORD_COORDINATOR=" + coordinator_.address());
  env.push_back("MEMCOORD_LOG_LEVEL=warn");
  Child job({MEMCOORD_MPIEXEC, "-np", "4", "--oversubscribe", "--bind-to", "none", MEMCOORD_TEST_WORKER,
             "--mpi", "--steps", "300", "--step-ms", "20", "--alloc", "4MiB"},
            env);
  ASSERT_TRUE(wait_all(4, WorkerState::kLive, milliseconds(20000))) << job.output();
  ASSERT_TRUE(wait_steps(4, 10, milliseconds(10000)));
  coordinator_.kill();
  const auto killed = SteadyClock::now();
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(coordinator_.start()) << coordinator_.output();
  const auto serving = SteadyClock::now();
  // Watched with `memcoord status` (a fresh process each time, as an operator would look).
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto s = ClusterStatus(MEMCOORD_CLI, coordinator_.address());
        if (!s || s->size() != 4u) return false;
        for (const auto& [rank, st] : *s) {
          if (st.state != "live") return false;
        }
        return true;
      },
      milliseconds(10000)))
      << job.output();
  const double reattach_ms = MsSince(serving);
  PrintFault("coordinator killed and restarted",
             "all 4 ranks live again after the restart (ms after serving)", reattach_ms);
  PrintFault("coordinator killed and restarted", "from the kill (300 ms down)", MsSince(killed));
  EXPECT_LT(reattach_ms, 3000.0) << "target <= 1 s (reattach_bench); 3 s for a loaded machine";
  // The new coordinator commands the job: a trim completes on every rank.
  Child trim({MEMCOORD_CLI, "trim", "--coordinator", coordinator_.address(), "--now", "--json"}, {});
  EXPECT_EQ(trim.wait(milliseconds(10000)), 0) << trim.output();
  // Training never blocked on the coordinator and finishes.
  ASSERT_EQ(job.wait(milliseconds(60000)), 0) << job.output();
  EXPECT_EQ(CountOf(job.output(), "DONE rank="), 4) << job.output();
  EXPECT_EQ(CountOf(job.output(), "ABORTED"), 0) << job.output();
  // Afterwards every rank is known, and dead only because it detached at the end.
  const auto after = status();
  ASSERT_EQ(after.size(), 4u);
  for (const auto& [rank, st] : after) {
    EXPECT_EQ(st.state, "dead") << rank;
    EXPECT_NE(st.dead_reason.find("detached"), std::string::npos) << rank << ": " << st.dead_reason;
  }
}
#endif

// When `rank` was first seen suspect and first seen dead (ms after `start`; negative: never), watched for
// up to `watch` or until `done` holds.
struct Transitions {
  double suspect_ms = -1;
  double dead_ms = -1;
  double live_again_ms = -1;
};

class LivenessFaults : public Faults {
 protected:
  // Watches `rank`'s state from now until `watch` passed or `done`; times are ms since `start`. `so_far`
  // continues an earlier watch's timeline (a state seen there counts here: a worker that is live again by
  // the end of the first window is not waited for in the second).
  Transitions watch(int rank, SteadyClock::time_point start, milliseconds watch,
                    const std::function<bool(const Transitions&)>& done, Transitions so_far = {}) {
    Transitions t = so_far;
    const auto deadline = SteadyClock::now() + watch;
    while (SteadyClock::now() < deadline && !done(t)) {
      const auto state = state_of(rank);
      const double ms = MsSince(start);
      if (state == WorkerState::kDead && t.dead_ms < 0) t.dead_ms = ms;
      const bool suspect = state.has_value() && *state != WorkerState::kLive && *state != WorkerState::kDead;
      if (suspect && t.suspect_ms < 0) t.suspect_ms = ms;
      if (state == WorkerState::kLive && t.suspect_ms >= 0 && t.live_again_ms < 0) t.live_again_ms = ms;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return t;
  }
};

TEST_F(LivenessFaults, StoppedWorkerHeldIsSuspectThenDeadAfterTheGraceAndTheOthersAbort) {
  const std::vector<std::string> direct(3, coordinator_.address());
  auto ranks = SpawnRanks(TestWorkerArgs(MEMCOORD_TEST_WORKER, 0, 20), 3, direct);
  ASSERT_TRUE(wait_all(3, WorkerState::kLive, milliseconds(20000)));
  ASSERT_TRUE(wait_steps(3, 5, milliseconds(10000)));
  const auto stopped = SteadyClock::now();
  ranks[2]->signal(SIGSTOP);
  const Transitions t =
      watch(2, stopped, milliseconds(10000), [](const Transitions& x) { return x.dead_ms >= 0; });
  PrintFault("SIGSTOP held", "suspect after", t.suspect_ms);
  PrintFault("SIGSTOP held", "dead after", t.dead_ms);
  EXPECT_GE(t.suspect_ms, 0) << "a silent worker is suspect (shown in memcoord status) before it is dead";
  EXPECT_LT(t.suspect_ms, 1500.0) << "contract: suspect after 3 x 100 ms";
  ASSERT_GE(t.dead_ms, 0) << "never declared dead";
  EXPECT_GE(t.dead_ms, 2500.0) << "contract: dead only after the 3 s grace";
  EXPECT_LT(t.dead_ms, 6000.0) << "contract: dead after the 3 s grace";
  expect_aborted_naming(ranks, {0, 1}, 2);
  const auto after = status();
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after.at(2).state, "dead");
  EXPECT_NE(after.at(2).dead_reason.find("silent"), std::string::npos) << after.at(2).dead_reason;
  ranks[2]->signal(SIGKILL);
}

#ifdef MEMCOORD_MPIEXEC
TEST_F(LivenessFaults, WorkerStoppedForOneSecondAbortsNothingAndTrainingFinishes) {
  std::vector<std::string> env = kMpiEnv;
  env.push_back("MEMCOORD_COORDINATOR=" + coordinator_.address());
  env.push_back("MEMCOORD_LOG_LEVEL=warn");
  Child job({MEMCOORD_MPIEXEC, "-np", "3", "--oversubscribe", "--bind-to", "none", MEMCOORD_TEST_WORKER,
             "--mpi", "--steps", "250", "--step-ms", "20", "--alloc", "2MiB", "--quiet-applied"},
            env);
  ASSERT_TRUE(wait_all(3, WorkerState::kLive, milliseconds(20000))) << job.output();
  ASSERT_TRUE(wait_steps(3, 10, milliseconds(10000)));
  const auto pids = ReadyPids(job.output());
  ASSERT_EQ(pids.count(1), 1u) << job.output();
  const auto stopped = SteadyClock::now();
  ::kill(pids.at(1), SIGSTOP);
  const Transitions t = watch(1, stopped, milliseconds(1000), [](const Transitions&) { return false; });
  ::kill(pids.at(1), SIGCONT);
  const Transitions after_cont = watch(
      1, stopped, milliseconds(3000), [](const Transitions& x) { return x.live_again_ms >= 0; }, t);
  PrintFault("SIGSTOP 1 s then SIGCONT", "suspect after", after_cont.suspect_ms);
  PrintFault("SIGSTOP 1 s then SIGCONT", "live again after", after_cont.live_again_ms);
  EXPECT_GE(after_cont.suspect_ms, 0) << "1 s of silence is more than 3 report intervals: suspect";
  EXPECT_LT(after_cont.dead_ms, 0) << "a 1 s stop must not be declared dead";
  ASSERT_EQ(job.wait(milliseconds(60000)), 0) << job.output();
  EXPECT_EQ(CountOf(job.output(), "DONE rank="), 3) << job.output();
  EXPECT_EQ(CountOf(job.output(), "ABORTED"), 0) << job.output();
  for (const auto& [rank, st] : status()) {
    EXPECT_NE(st.dead_reason.find("detached"), std::string::npos)
        << rank << " " << st.state << ": " << st.dead_reason;
  }
}
#endif

TEST_F(LivenessFaults, OneSecondNetworkStallAbortsNothingAndTrainingFinishes) {
  TcpProxy proxy(std::stoi(coordinator_.address().substr(coordinator_.address().rfind(':') + 1)));
  const std::vector<std::string> addresses = {coordinator_.address(), proxy.address(),
                                              coordinator_.address()};
  // 400 steps of 20 ms: training outlasts both watch windows on a loaded machine (with 200, a rank that
  // stepped ahead during a slow start finished, and its detach read as a death, inside the second window).
  auto ranks = SpawnRanks(TestWorkerArgs(MEMCOORD_TEST_WORKER, 400, 20), 3, addresses);
  ASSERT_TRUE(wait_all(3, WorkerState::kLive, milliseconds(20000)));
  ASSERT_TRUE(wait_steps(3, 10, milliseconds(10000)));
  const auto stalled = SteadyClock::now();
  proxy.stall(true);
  const Transitions t = watch(1, stalled, milliseconds(1000), [](const Transitions&) { return false; });
  proxy.stall(false);
  const Transitions after = watch(
      1, stalled, milliseconds(3000), [](const Transitions& x) { return x.live_again_ms >= 0; }, t);
  PrintFault("network stall 1 s", "suspect after", after.suspect_ms);
  PrintFault("network stall 1 s", "live again after", after.live_again_ms);
  EXPECT_GE(after.suspect_ms, 0);
  EXPECT_GE(after.live_again_ms, 0) << "live again once the stall ended";
  EXPECT_LT(after.dead_ms, 0) << "a 1 s stall must not be declared dead";
  expect_finished(ranks, milliseconds(30000));
  EXPECT_EQ(proxy.connections(), 1) << "the stalled connection was kept, not replaced";
  for (const auto& [rank, st] : status()) {
    EXPECT_NE(st.dead_reason.find("detached"), std::string::npos)
        << rank << " " << st.state << ": " << st.dead_reason;
  }
}

TEST_F(LivenessFaults, TenSecondNetworkStallIsDeadAfterTheGraceAndTheGroupAbortsNamingIt) {
  TcpProxy proxy(std::stoi(coordinator_.address().substr(coordinator_.address().rfind(':') + 1)));
  const std::vector<std::string> addresses = {coordinator_.address(), proxy.address(),
                                              coordinator_.address()};
  // Rank 1 steps for ~20 s at most, so it ends on its own whatever it learns after the stall.
  auto ranks = SpawnRanks(TestWorkerArgs(MEMCOORD_TEST_WORKER, 1000, 20), 3, addresses);
  ASSERT_TRUE(wait_all(3, WorkerState::kLive, milliseconds(20000)));
  ASSERT_TRUE(wait_steps(3, 10, milliseconds(10000)));
  const auto stalled = SteadyClock::now();
  proxy.stall(true);
  const Transitions t =
      watch(1, stalled, milliseconds(9000), [](const Transitions& x) { return x.dead_ms >= 0; });
  PrintFault("network stall 10 s", "suspect after", t.suspect_ms);
  PrintFault("network stall 10 s", "dead after", t.dead_ms);
  EXPECT_GE(t.suspect_ms, 0);
  ASSERT_GE(t.dead_ms, 0) << "never declared dead";
  EXPECT_GE(t.dead_ms, 2500.0) << "contract: dead only after the 3 s grace";
  EXPECT_LT(t.dead_ms, 6000.0) << "contract: dead after the 3 s grace";
  expect_aborted_naming(ranks, {0, 2}, 1);
  std::this_thread::sleep_for(milliseconds(10000) - (SteadyClock::now() - stalled));
  proxy.stall(false);
  // Rank 1 learns of the abort when the stall ends, or finishes its steps alone: either way it ends.
  const int rank1_exit = ranks[1]->wait(milliseconds(30000));
  EXPECT_TRUE(rank1_exit == 3 || rank1_exit == 0) << rank1_exit << "\n" << ranks[1]->output();
  std::printf("after the stall, rank 1 exited with %d\n", rank1_exit);
  const auto after = status();
  ASSERT_EQ(after.size(), 3u);
  for (const auto& [rank, st] : after) {
    EXPECT_EQ(st.state, "dead") << rank << ": every process has exited";
  }
}

}  // namespace
}  // namespace memcoord::testing
