// Real processes for fault tests and benchmarks: the `memcoord coordinator` binary on a fixed loopback port
// (so it can be killed and restarted on the same port), memcoord_test_worker ranks spawned directly or
// under mpirun, and `memcoord status --json` read back as the operator would see it. Every wait is bounded.
//
// Not thread-safe; one harness per test. Children are killed (SIGKILL) when their objects die.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/coordinator/test_support.h"  // Child, WaitFor

namespace memcoord::testing {

// A loopback port that was free a moment ago (bound to port 0, read back, closed).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// `memcoord coordinator --listen 127.0.0.1:PORT`, killable and restartable on the same port.
class CoordinatorProcess {
 public:
  CoordinatorProcess(std::string memcoord, int port)
      : memcoord_(std::move(memcoord)), address_("127.0.0.1:" + std::to_string(port)) {}
  const std::string& address() const { return address_; }
  // Starts it and waits (up to 10 s) for its listening line. False when it did not serve.
  bool start() {
    child_ = std::make_unique<Child>(std::vector<std::string>{memcoord_, "coordinator", "--listen", address_},
                                     std::vector<std::string>{"MEMCOORD_LOG_LEVEL=warn"});
    return WaitFor([&] { return child_->output().find("listening on") != std::string::npos; },
                   std::chrono::milliseconds(10000));
  }
  void kill() {
    if (!child_) return;
    child_->signal(SIGKILL);
    (void)child_->wait(std::chrono::milliseconds(5000));
  }
  std::string output() const { return child_ ? child_->output() : std::string(); }
  pid_t pid() const { return child_ ? child_->pid() : -1; }

 private:
  std::string memcoord_;
  std::string address_;
  std::unique_ptr<Child> child_;
};

// One rank as `memcoord status --json` shows it.
struct RankStatus {
  std::string state;  // "live", "suspect", "dead"
  std::string dead_reason;
  std::int64_t step = 0;
};

// Runs `memcoord status --coordinator ADDR --json` (bounded: 10 s); nullopt when it failed.
inline std::optional<std::map<int, RankStatus>> ClusterStatus(const std::string& memcoord,
                                                              const std::string& address) {
  Child cli({memcoord, "status", "--coordinator", address, "--json"}, {});
  if (cli.wait(std::chrono::milliseconds(10000)) != 0) return std::nullopt;
  const std::string out = cli.output();
  const auto json = nlohmann::json::parse(out.substr(std::min(out.find('{'), out.size())), nullptr, false);
  if (json.is_discarded() || !json.contains("workers")) return std::nullopt;
  std::map<int, RankStatus> ranks;
  for (const auto& w : json["workers"]) {
    ranks[w.value("rank", -1)] =
        RankStatus{w.value("state", ""), w.value("dead_reason", ""), w.value("step", 0)};
  }
  return ranks;
}

// Arguments of a test worker that steps every `step_ms` for `steps` steps (0: until aborted).
inline std::vector<std::string> TestWorkerArgs(const std::string& test_worker, int steps, int step_ms,
                                               int report_ms = 100) {
  return {test_worker,   "--until-abort",
          "--steps",     std::to_string(steps),
          "--step-ms",   std::to_string(step_ms),
          "--report-ms", std::to_string(report_ms),
          "--alloc",     "2MiB"};
}

// `world` test workers spawned directly (each its own rank, one group): a killed or stopped rank is left to
// the coordinator to detect, as mpirun would otherwise tear the job down itself.
inline std::vector<std::unique_ptr<Child>> SpawnRanks(const std::vector<std::string>& args, int world,
                                                      const std::vector<std::string>& addresses) {
  std::vector<std::unique_ptr<Child>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::make_unique<Child>(
        args,
        std::vector<std::string>{"MEMCOORD_COORDINATOR=" + addresses[static_cast<std::size_t>(r)],
                                 "MEMCOORD_RANK=" + std::to_string(r), "MEMCOORD_LOCAL_RANK=0",
                                 "MEMCOORD_WORLD_SIZE=" + std::to_string(world), "MEMCOORD_LOG_LEVEL=warn"}));
  }
  return ranks;
}

// The pid each rank printed on its READY line (a job's output holds every rank's lines).
inline std::map<int, pid_t> ReadyPids(const std::string& output) {
  std::map<int, pid_t> pids;
  const std::regex ready(R"(READY rank=(\d+) pid=(\d+))");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), ready); it != std::sregex_iterator();
       ++it) {
    pids[std::stoi((*it)[1])] = static_cast<pid_t>(std::stol((*it)[2]));
  }
  return pids;
}

// VmRSS of a process in KiB (0 when unreadable).
inline long ResidentKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kb;
      return kb;
    }
  }
  return 0;
}

inline int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace memcoord::testing
