// Aborts reach the C ABI, end to end on loopback: a real `memcoord coordinator`, rank 1 a test worker
// process, rank 0 this process through libmemcoord_capi.so. Rank 1 is SIGKILLed; within 2 s the survivor's
// memcoord_wait_abort returns MEMCOORD_ERR_ABORTED naming rank 1, memcoord_abort_info_get says the same, the
// abort callback ran once on a memcoord thread (and clearing it waited for it to return), and
// memcoord_step_end returns MEMCOORD_ERR_ABORTED.
//
// The tests share one process when the binary runs whole: each restores the environment it set (a
// MEMCOORD_RANK left behind would reach the next test's rank 1 ahead of its own), shuts memcoord down even
// when an assertion fails, and kills the processes it forked. Rank 1 steps without limit (--steps 0), so it
// can only end by the SIGKILL.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/faults/process_harness.h"
#include "tests/worker/c_abi_test_support.h"
#include "worker/memcoord.h"

namespace {

using memcoord::testing::Child;
using memcoord::testing::CoordinatorProcess;
using memcoord::testing::ScopedEnv;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Calls memcoord_shutdown() when the test ends, however it ends (a second call does nothing).
struct ShutdownAtEnd {
  ShutdownAtEnd() = default;
  ShutdownAtEnd(const ShutdownAtEnd&) = delete;
  ShutdownAtEnd& operator=(const ShutdownAtEnd&) = delete;
  ~ShutdownAtEnd() { (void)memcoord_shutdown(); }
};

// A process this test forked: SIGKILLed and reaped when the object dies unless it was reaped already, so a
// failed assertion never leaves it running (a survivor blocks in pause() for good).
class Forked {
 public:
  explicit Forked(pid_t pid) : pid_(pid) {}
  ~Forked() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  Forked(const Forked&) = delete;
  Forked& operator=(const Forked&) = delete;
  // Waits up to `timeout` for it to end: its wait status, or nullopt while it still runs.
  std::optional<int> wait(milliseconds timeout) {
    const auto deadline = SteadyClock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      if (SteadyClock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return std::nullopt;
  }

 private:
  pid_t pid_;
};

// What is left in the read end of a pipe whose write ends are all closed.
std::string ReadAll(int fd) {
  std::string said;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0;)
    said.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return said;
}

// Rank 1: a test worker that steps until it is aborted or killed (--steps 0: no limit of its own).
std::vector<std::string> Rank1Args() {
  return memcoord::testing::TestWorkerArgs(MEMCOORD_TEST_WORKER, /*steps=*/0, /*step_ms=*/20,
                                           /*report_ms=*/50);
}
std::vector<std::string> Rank1Env(const std::string& address) {
  return {"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=1", "MEMCOORD_LOCAL_RANK=0",
          "MEMCOORD_WORLD_SIZE=2", "MEMCOORD_LOG_LEVEL=warn"};
}

// In a forked survivor: the environment of rank 0 (this process's own copy, so nothing to restore).
void SetRank0Environment(const std::string& address) {
  setenv("MEMCOORD_BACKEND", "host", 1);
  setenv("MEMCOORD_COORDINATOR", address.c_str(), 1);
  setenv("MEMCOORD_RANK", "0", 1);
  setenv("MEMCOORD_LOCAL_RANK", "0", 1);
  setenv("MEMCOORD_WORLD_SIZE", "2", 1);
  setenv("MEMCOORD_LOG_LEVEL", "off", 1);
}

struct CallbackRecord {
  std::atomic<int> calls{0};
  std::atomic<int> dead_rank{-2};
  std::atomic<bool> on_caller_thread{false};
  std::atomic<bool> returned{false};
  std::thread::id caller;
  milliseconds hold{0};  // how long the callback takes
};

void OnAbort(const memcoord_abort_info* info, void* user) {
  auto* record = static_cast<CallbackRecord*>(user);
  record->dead_rank = info->dead_rank;
  record->on_caller_thread = std::this_thread::get_id() == record->caller;
  ++record->calls;
  std::this_thread::sleep_for(record->hold);
  record->returned = true;
}

bool BothRanksLive(const std::string& address) {
  auto ranks = memcoord::testing::ClusterStatus(MEMCOORD_CLI, address);
  return ranks && ranks->count(0) && ranks->count(1) && (*ranks)[0].state == "live" &&
         (*ranks)[1].state == "live";
}

TEST(CAbiAbort, SurvivorLearnsOfADeadRankWithinTwoSeconds) {
  CoordinatorProcess coordinator(MEMCOORD_CLI, memcoord::testing::FreeLoopbackPort());
  ASSERT_TRUE(coordinator.start()) << coordinator.output();
  const std::string address = coordinator.address();
  Child rank1(Rank1Args(), Rank1Env(address));
  ScopedEnv env({{"MEMCOORD_BACKEND", "host"},
                 {"MEMCOORD_COORDINATOR", address},
                 {"MEMCOORD_RANK", "0"},
                 {"MEMCOORD_LOCAL_RANK", "0"},
                 {"MEMCOORD_WORLD_SIZE", "2"}});
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  CallbackRecord record;
  const ShutdownAtEnd shutdown_at_end;  // before `record` dies: no callback may outlive it
  record.caller = std::this_thread::get_id();
  record.hold = milliseconds(300);
  ASSERT_EQ(memcoord_set_abort_callback(OnAbort, &record), 0);
  ASSERT_TRUE(WaitFor([&] { return BothRanksLive(address); }, milliseconds(15000)))
      << "both ranks never attached; rank 1 said: " << rank1.output();
  ASSERT_EQ(memcoord_step_end(), 0) << memcoord_last_error();

  std::atomic<int> waited{-1};
  std::string wait_error;
  SteadyClock::time_point woke;
  std::thread watcher([&] {
    waited = memcoord_wait_abort(10000);
    woke = SteadyClock::now();
    wait_error = memcoord_last_error();
  });
  std::this_thread::sleep_for(milliseconds(100));  // the watcher is blocked
  const auto killed = SteadyClock::now();
  rank1.signal(SIGKILL);
  watcher.join();
  // The callback is under way on memcoord's thread (the waiter wakes first): clearing it waits for it, so
  // that `record` could be freed now.
  ASSERT_EQ(memcoord_set_abort_callback(nullptr, nullptr), 0);
  EXPECT_TRUE(record.returned.load());
  const double ms = std::chrono::duration<double, std::milli>(woke - killed).count();
  RecordProperty("abort_learned_ms", std::to_string(ms));
  std::printf("survivor learned of the death after %.1f ms: %s\n", ms, wait_error.c_str());
  EXPECT_EQ(waited.load(), MEMCOORD_ERR_ABORTED) << wait_error;
  EXPECT_LT(ms, 2000.0);
  EXPECT_NE(wait_error.find("dead rank 1"), std::string::npos) << wait_error;

  memcoord_abort_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(memcoord_abort_info_get(&info), 0);
  EXPECT_EQ(info.aborted, 1);
  EXPECT_EQ(info.dead_rank, 1);
  EXPECT_NE(std::string(info.reason).find("rank 1"), std::string::npos) << info.reason;
  EXPECT_GT(info.time_unix_ms, 0);

  EXPECT_TRUE(WaitFor([&] { return record.calls.load() == 1; }, milliseconds(2000)));
  EXPECT_EQ(record.dead_rank.load(), 1);
  EXPECT_FALSE(record.on_caller_thread.load());  // a memcoord thread ran it

  EXPECT_EQ(memcoord_step_end(), MEMCOORD_ERR_ABORTED);
  EXPECT_NE(std::string(memcoord_last_error()).find("dead rank 1"), std::string::npos)
      << memcoord_last_error();
  // A callback set after the abort runs at once, on the caller's thread.
  CallbackRecord late;
  late.caller = std::this_thread::get_id();
  ASSERT_EQ(memcoord_set_abort_callback(OnAbort, &late), 0);
  EXPECT_EQ(late.calls.load(), 1);
  EXPECT_TRUE(late.on_caller_thread.load());
  EXPECT_EQ(memcoord_wait_abort(0), MEMCOORD_ERR_ABORTED);  // already aborted: at once
  EXPECT_EQ(memcoord_shutdown(), 0);
}

// memcoord_set_abort_exit: a process whose main thread never returns (a Python main thread holding the
// interpreter lock inside a C call keeps any watcher thread from running) still ends, with the code asked
// for and a message naming the dead rank, `grace_ms` after the abort. This process forks the survivor, which
// blocks for good after setting the backstop.
TEST(CAbiAbort, TheExitBackstopEndsAProcessWhoseThreadsNeverAnswer) {
  CoordinatorProcess coordinator(MEMCOORD_CLI, memcoord::testing::FreeLoopbackPort());
  ASSERT_TRUE(coordinator.start()) << coordinator.output();
  const std::string address = coordinator.address();
  Child rank1(Rank1Args(), Rank1Env(address));
  int err[2];
  ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);  // close-on-exec: no process spawned meanwhile keeps it open
  const pid_t pid = ::fork();
  if (pid == 0) {  // the survivor: rank 0 through the C ABI, then stuck
    ::dup2(err[1], 2);
    SetRank0Environment(address);
    if (memcoord_init() != 0 || memcoord_set_abort_exit(MEMCOORD_EXIT_ABORTED, 300) != 0) ::_exit(3);
    if (memcoord_set_abort_exit(256, 300) != MEMCOORD_ERR_INVALID_ARGUMENT) ::_exit(4);
    for (;;) ::pause();
  }
  ::close(err[1]);
  ASSERT_GE(pid, 0);
  Forked survivor(pid);
  ASSERT_TRUE(WaitFor([&] { return BothRanksLive(address); }, milliseconds(15000)))
      << "both ranks never attached; rank 1 said: " << rank1.output();
  const auto killed = SteadyClock::now();
  rank1.signal(SIGKILL);
  const std::optional<int> ended = survivor.wait(milliseconds(10000));
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - killed).count();
  ASSERT_TRUE(ended.has_value()) << "the survivor was still running 10 s after the death";
  const int status = *ended;
  const std::string said = ReadAll(err[0]);
  std::printf("the stuck survivor ended %.1f ms after the death: %s", ms, said.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), MEMCOORD_EXIT_ABORTED);
  EXPECT_LT(ms, 2000.0);
  EXPECT_GE(ms, 300.0);  // not before the grace
  EXPECT_NE(said.find("dead rank 1"), std::string::npos) << said;
  EXPECT_NE(said.find("memcoord ends it with exit code 75"), std::string::npos) << said;
}

// A callback that sets another (which runs at once, inside it: the group is aborted) and then calls
// memcoord_shutdown() is refused with FAILED_PRECONDITION, as from any callback, and returns: the inner
// callback's return must not make the outer one look like ordinary code (its shutdown would join the session
// thread it runs on, and hang holding the init lock). The survivor is a forked process so that a regression
// fails within the timeout instead of hanging the test binary.
struct NestedRecord {
  std::atomic<int> inner_calls{0};
  std::atomic<int> shutdown_code{-1};
  std::atomic<bool> outer_returned{false};
  char shutdown_error[512] = {};
};

void InnerCallback(const memcoord_abort_info* /*info*/, void* user) {
  ++static_cast<NestedRecord*>(user)->inner_calls;
}

void OuterCallback(const memcoord_abort_info* /*info*/, void* user) {
  auto* record = static_cast<NestedRecord*>(user);
  (void)memcoord_set_abort_callback(InnerCallback, record);  // already aborted: runs InnerCallback here
  record->shutdown_code = memcoord_shutdown();
  std::snprintf(record->shutdown_error, sizeof(record->shutdown_error), "%s", memcoord_last_error());
  record->outer_returned = true;
}

// The forked survivor of the nested-callback test; its exit code says what went wrong (0: nothing), and
// stderr (a pipe to the test) the details.
[[noreturn]] void RunNestedSurvivor(const std::string& address, int err_fd) {
  ::dup2(err_fd, 2);
  SetRank0Environment(address);
  const auto say = [](const std::string& text) { (void)!::write(2, text.data(), text.size()); };
  const auto die = [&](int code, const std::string& what) {
    say(what + ": " + memcoord_last_error() + "\n");
    ::_exit(code);
  };
  NestedRecord record;
  if (memcoord_init() != 0) die(3, "memcoord_init");
  if (memcoord_set_abort_callback(OuterCallback, &record) != 0) die(4, "memcoord_set_abort_callback");
  if (memcoord_wait_abort(20000) != MEMCOORD_ERR_ABORTED) die(5, "memcoord_wait_abort");
  const auto deadline = SteadyClock::now() + milliseconds(10000);
  while (!record.outer_returned.load() && SteadyClock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  if (!record.outer_returned.load()) {
    say("the outer callback never returned (its memcoord_shutdown() hangs)\n");
    ::_exit(6);
  }
  say("memcoord_shutdown() in the callback: " + std::to_string(record.shutdown_code.load()) + ": " +
      record.shutdown_error + "\n");
  if (record.inner_calls.load() != 1) ::_exit(7);
  if (record.shutdown_code.load() != MEMCOORD_ERR_FAILED_PRECONDITION) ::_exit(8);
  if (memcoord_shutdown() != 0) die(9, "memcoord_shutdown from the main thread");  // allowed there
  ::_exit(0);
}

TEST(CAbiAbort, ShutdownFromACallbackThatSetAnotherIsRefusedAndReturns) {
  CoordinatorProcess coordinator(MEMCOORD_CLI, memcoord::testing::FreeLoopbackPort());
  ASSERT_TRUE(coordinator.start()) << coordinator.output();
  const std::string address = coordinator.address();
  Child rank1(Rank1Args(), Rank1Env(address));
  int err[2];
  ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) RunNestedSurvivor(address, err[1]);
  ::close(err[1]);
  ASSERT_GE(pid, 0);
  Forked survivor(pid);
  ASSERT_TRUE(WaitFor([&] { return BothRanksLive(address); }, milliseconds(15000)))
      << "both ranks never attached; rank 1 said: " << rank1.output();
  rank1.signal(SIGKILL);
  const std::optional<int> ended = survivor.wait(milliseconds(30000));
  ASSERT_TRUE(ended.has_value()) << "the survivor was still running 30 s after the death";
  const std::string said = ReadAll(err[0]);
  ASSERT_TRUE(WIFEXITED(*ended)) << "wait status " << *ended << "; it said: " << said;
  // 6: the callback's shutdown hung; 7: the inner callback did not run once; 8: that shutdown was not
  // refused.
  EXPECT_EQ(WEXITSTATUS(*ended), 0) << said;
  EXPECT_NE(said.find("FAILED_PRECONDITION"), std::string::npos) << said;
  EXPECT_NE(said.find("inside the abort callback"), std::string::npos) << said;
}

}  // namespace
