// reattach_bench: how fast workers re-attach after the coordinator is killed (SIGKILL) and restarted on the
// same port, printed as JSON. Real processes: the `memcoord coordinator` binary and N memcoord_test_worker
// processes (host backend, each its own gRPC connection, as in a job). For each worker count:
//   1. start the coordinator on a free loopback port and N workers; wait until all are live;
//   2. SIGKILL the coordinator, wait --down-ms, start a new one on the same port;
//   3. poll GetCluster every 5 ms (over a channel with its own short reconnect backoff) and note when each
//      rank is first live again.
// Re-attach time of a rank = first seen live - the moment the new coordinator printed its listening line.
// Figures are wall-clock on whatever machine runs it (a loaded 2-core machine inflates them).
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "memcoord/v1/coordinator.grpc.pb.h"
#include "tests/faults/process_harness.h"  // CoordinatorProcess, Child, FreeLoopbackPort

namespace {

using memcoord::testing::Child;
using memcoord::testing::CoordinatorProcess;
using memcoord::testing::FreeLoopbackPort;
using memcoord::testing::WaitFor;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct BenchConfig {
  std::string memcoord = MEMCOORD_CLI;
  std::string test_worker = MEMCOORD_TEST_WORKER;
  std::vector<int> worker_counts = {8, 64};
  int down_ms = 500;
  int rounds = 3;
};

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5)];
}

std::vector<std::unique_ptr<Child>> StartWorkers(const BenchConfig& config, const std::string& address,
                                                 int n) {
  std::vector<std::unique_ptr<Child>> workers;
  for (int r = 0; r < n; ++r) {
    workers.push_back(std::make_unique<Child>(
        // One group per worker and a 500 ms report interval: a worker starved of CPU while 64 start on a
        // small machine must not be declared dead and abort the others; this measures re-attach only.
        std::vector<std::string>{config.test_worker, "--until-abort", "--steps", "0", "--step-ms", "50",
                                 "--report-ms", "500", "--alloc", "1MiB", "--group",
                                 "bench" + std::to_string(r)},
        std::vector<std::string>{"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=" + std::to_string(r),
                                 "MEMCOORD_LOCAL_RANK=0", "MEMCOORD_WORLD_SIZE=" + std::to_string(n),
                                 "MEMCOORD_LOG_LEVEL=error"}));
  }
  return workers;
}

// Watches the coordinator's live ranks over its own channel: a local subchannel pool and a short reconnect
// backoff, so the observer itself adds at most a few tens of milliseconds after a restart.
class LiveWatcher {
 public:
  explicit LiveWatcher(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 5);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 50);
    stub_ = memcoord::v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  // Live ranks now; empty when the coordinator did not answer.
  std::vector<int> live_ranks() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + milliseconds(200));
    memcoord::v1::ClusterSnapshot snapshot;
    if (!stub_->GetCluster(&context, memcoord::v1::GetClusterRequest(), &snapshot).ok()) return {};
    std::vector<int> ranks;
    for (const auto& w : snapshot.workers()) {
      if (w.state() == memcoord::v1::WORKER_STATE_LIVE) ranks.push_back(w.rank());
    }
    return ranks;
  }
  // Polls every 5 ms until `n` ranks are live or `timeout`; returns when each rank was first seen live.
  std::map<int, SteadyClock::time_point> first_live(int n, milliseconds timeout) {
    std::map<int, SteadyClock::time_point> seen;
    const auto deadline = SteadyClock::now() + timeout;
    while (static_cast<int>(seen.size()) < n && SteadyClock::now() < deadline) {
      const std::vector<int> ranks = live_ranks();
      const auto now = SteadyClock::now();
      for (int r : ranks) seen.emplace(r, now);
      std::this_thread::sleep_for(milliseconds(5));
    }
    return seen;
  }

 private:
  std::unique_ptr<memcoord::v1::Coordinator::Stub> stub_;
};

// One kill-and-restart round over workers that are all live on `coordinator`; appends per-rank re-attach
// times (ms after the new coordinator serves) to `reattach_ms`.
nlohmann::json RestartRound(const BenchConfig& config, CoordinatorProcess& coordinator, int n,
                            std::vector<double>& reattach_ms) {
  coordinator.kill();
  std::this_thread::sleep_for(milliseconds(config.down_ms));
  const auto spawned = SteadyClock::now();
  if (!coordinator.start()) return {{"error", "the coordinator did not restart on " + coordinator.address()}};
  const auto serving = SteadyClock::now();
  LiveWatcher watcher(coordinator.address());
  const auto seen = watcher.first_live(n, milliseconds(30000));
  double all_ms = 0;
  for (const auto& [rank, at] : seen) {
    reattach_ms.push_back(Ms(at - serving));
    all_ms = std::max(all_ms, reattach_ms.back());
  }
  nlohmann::json round = {{"restart_to_serving_ms", Ms(serving - spawned)},
                          {"reattached", seen.size()},
                          {"all_reattached_ms", all_ms}};
  if (static_cast<int>(seen.size()) < n) round["error"] = "not every worker re-attached within 30 s";
  return round;
}

nlohmann::json MeasureWorkers(const BenchConfig& config, int n) {
  CoordinatorProcess coordinator(config.memcoord, FreeLoopbackPort());
  if (!coordinator.start())
    return {{"workers", n}, {"error", "the coordinator did not start: " + coordinator.output()}};
  auto workers = StartWorkers(config, coordinator.address(), n);
  LiveWatcher watcher(coordinator.address());
  if (static_cast<int>(watcher.first_live(n, milliseconds(60000)).size()) < n) {
    return {{"workers", n}, {"error", "the workers did not all attach within 60 s"}};
  }
  std::this_thread::sleep_for(milliseconds(1000));  // a few reports: steady state before the kill
  std::vector<double> reattach_ms;
  nlohmann::json rounds = nlohmann::json::array();
  for (int round = 0; round < config.rounds; ++round) {
    rounds.push_back(RestartRound(config, coordinator, n, reattach_ms));
    if (rounds.back().contains("error")) break;
    std::this_thread::sleep_for(milliseconds(1000));
  }
  for (auto& w : workers) w->signal(SIGKILL);
  return {{"workers", n},
          {"rounds", rounds},
          {"reattach_p50_ms", Percentile(reattach_ms, 50)},
          {"reattach_p99_ms", Percentile(reattach_ms, 99)},
          {"reattach_max_ms", Percentile(reattach_ms, 100)},
          {"samples", reattach_ms.size()},
          {"down_ms", config.down_ms},
          {"target_max_ms", 1000}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reattach_bench: worker re-attach time after a coordinator restart on the same port (JSON)"};
  BenchConfig config;
  app.add_option("--workers", config.worker_counts, "worker counts")->delimiter(',');
  app.add_option("--down-ms", config.down_ms, "time between the kill and the restart");
  app.add_option("--rounds", config.rounds, "kill-and-restart rounds per worker count");
  app.add_option("--memcoord", config.memcoord, "the memcoord binary");
  app.add_option("--test-worker", config.test_worker, "the memcoord_test_worker binary");
  CLI11_PARSE(app, argc, argv);
  nlohmann::json result;
  result["reattach"] = nlohmann::json::array();
  for (int n : config.worker_counts) result["reattach"].push_back(MeasureWorkers(config, n));
  result["machine"] = {{"cpus", std::thread::hardware_concurrency()}, {"transport", "gRPC over 127.0.0.1"}};
  std::cout << result.dump(2) << std::endl;
  return 0;
}
