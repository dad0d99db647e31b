// Helpers shared by the coordinator's integration tests: polling with a deadline, in-process workers,
// and child processes (posix_spawn with their own environment, stdout captured to a file).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/service/cluster_types.h"
#include "worker/worker.h"

extern char** environ;

namespace memcoord::testing {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Polls `done` every 5 ms until it holds or `timeout` passes; returns whether it held.
inline bool WaitFor(const std::function<bool()>& done, milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

inline const coordinator::WorkerRecord* FindRank(const coordinator::ClusterView& view, int rank) {
  for (const auto& w : view.workers) {
    if (w.id.rank == rank) return &w;
  }
  return nullptr;
}

inline int LiveCount(const coordinator::ClusterView& view) {
  int live = 0;
  for (const auto& w : view.workers) live += w.state == coordinator::WorkerState::kLive ? 1 : 0;
  return live;
}

inline std::unique_ptr<Worker> StartWorker(const std::string& address, int rank, int world,
                                           const std::vector<std::string>& pools,
                                           milliseconds report_interval = milliseconds(50),
                                           const std::string& token = "") {
  WorkerOptions options;
  options.coordinator = address;
  options.token = token;
  options.backend = "host";
  options.capacity_bytes = 1ull << 30;
  options.report_interval = report_interval;
  options.topology = Topology{rank, rank, world, "test"};
  auto worker = Worker::init(options);
  if (!worker.ok()) return nullptr;
  for (const std::string& name : pools) {
    PoolOptions po;
    po.name = name;
    if (!(*worker)->create_pool(po).ok()) return nullptr;
  }
  return *std::move(worker);
}

// What an mpirun job of these tests adds to its environment: root allowed (containers), and no leak detection
// in the job's processes under the asan preset, whose ASAN_OPTIONS it replaces (read only by ASan builds):
// Open MPI leaks from MCA components it has unloaded by exit, which LeakSanitizer cannot name, so no
// suppression can match them (tests/sanitizers/README.md); the collectives and launch tests run the same way.
// The same worker started without mpirun keeps leak detection.
inline std::vector<std::string> MpiJobEnv() {
  return {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
          "ASAN_OPTIONS=halt_on_error=1 detect_leaks=0 detect_stack_use_after_return=1"};
}

// A child process with stdout (and stderr) going to a temporary file, in this process's environment with
// `extra_env` added (an entry of `extra_env` replaces the inherited one of the same name). Unless its
// environment names one, Open MPI keeps its session directory under a base of the child's own
// (OMPI_MCA_orte_tmpdir_base, removed with the child): two mpirun (or MPI singletons) that start at once
// under a shared base race to create it ("A call to mkdir was unable to create the desired directory ...
// File exists", open-mpi/ompi#8510), which failed a test under `ctest -j2`.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
    char path[] = "/tmp/memcoord-child-XXXXXX";
    const int fd = ::mkstemp(path);
    output_path_ = path;
    ::close(fd);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (!Names(extra_env, entry.substr(0, entry.find('=')))) env.push_back(entry);
    }
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    if (!Names(env, "OMPI_MCA_orte_tmpdir_base")) {
      char dir[] = "/tmp/memcoord-ompi-XXXXXX";
      if (::mkdtemp(dir) != nullptr) {
        mpi_tmpdir_ = dir;
        env.push_back("OMPI_MCA_orte_tmpdir_base=" + mpi_tmpdir_);
      }
    }
    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path_.c_str(), O_WRONLY | O_TRUNC, 0);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    if (posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), cenv.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    ::unlink(output_path_.c_str());
    if (!mpi_tmpdir_.empty()) {
      std::error_code ignored;  // what a killed mpirun left there goes too
      std::filesystem::remove_all(mpi_tmpdir_, ignored);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  // Waits up to `timeout` for the child to exit; returns its exit code, 128+signal, or -1 on timeout.
  int wait(milliseconds timeout) {
    if (exited_) return exit_code_;
    const auto deadline = SteadyClock::now() + timeout;
    while (true) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      if (SteadyClock::now() >= deadline) return -1;
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
  std::string output() const {
    std::ifstream in(output_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  static bool Names(const std::vector<std::string>& env, const std::string& name) {
    for (const std::string& e : env) {
      if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
        return true;
    }
    return false;
  }

  pid_t pid_ = -1;
  std::string output_path_;
  std::string mpi_tmpdir_;  // empty: the environment named the base
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace memcoord::testing
