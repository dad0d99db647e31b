// Aborts reach the C ABI, end to end on loopback: a real `memcoord coordinator`, rank 1 a test worker
// process, rank 0 this process through libmemcoord_capi.so. Rank 1 is SIGKILLed; within 2 s the survivor's
// memcoord_wait_abort returns MEMCOORD_ERR_ABORTED naming rank 1, memcoord_abort_info_get says the same, the
// abort callback ran once on a memcoord thread (and clearing it waited for it to return), and
// memcoord_step_end returns MEMCOORD_ERR_ABORTED.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "tests/faults/process_harness.h"
#include "worker/memcoord.h"

namespace {

using memcoord::testing::Child;
using memcoord::testing::CoordinatorProcess;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

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
  Child rank1(
      {MEMCOORD_TEST_WORKER, "--until-abort", "--step-ms", "20", "--report-ms", "50", "--alloc", "1MiB"},
      {"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=1", "MEMCOORD_LOCAL_RANK=0", "MEMCOORD_WORLD_SIZE=2",
       "MEMCOORD_LOG_LEVEL=warn"});
  setenv("MEMCOORD_BACKEND", "host", 1);
  setenv("MEMCOORD_COORDINATOR", address.c_str(), 1);
  setenv("MEMCOORD_RANK", "0", 1);
  setenv("MEMCOORD_LOCAL_RANK", "0", 1);
  setenv("MEMCOORD_WORLD_SIZE", "2", 1);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  CallbackRecord record;
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
  unsetenv("MEMCOORD_COORDINATOR");
}

// memcoord_set_abort_exit: a process whose main thread never returns (a Python main thread holding the
// interpreter lock inside a C call keeps any watcher thread from running) still ends, with the code asked
// for and a message naming the dead rank, `grace_ms` after the abort. This process forks the survivor, which
// blocks for good after setting the backstop.
TEST(CAbiAbort, TheExitBackstopEndsAProcessWhoseThreadsNeverAnswer) {
  CoordinatorProcess coordinator(MEMCOORD_CLI, memcoord::testing::FreeLoopbackPort());
  ASSERT_TRUE(coordinator.start()) << coordinator.output();
  const std::string address = coordinator.address();
  Child rank1({MEMCOORD_TEST_WORKER, "--until-abort", "--step-ms", "20", "--report-ms", "50"},
              {"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=1", "MEMCOORD_LOCAL_RANK=0",
               "MEMCOORD_WORLD_SIZE=2", "MEMCOORD_LOG_LEVEL=warn"});
  int err[2];
  ASSERT_EQ(::pipe(err), 0);
  const pid_t survivor = ::fork();
  ASSERT_GE(survivor, 0);
  if (survivor == 0) {  // the survivor: rank 0 through the C ABI, then stuck
    ::dup2(err[1], 2);
    ::close(err[0]);
    setenv("MEMCOORD_BACKEND", "host", 1);
    setenv("MEMCOORD_COORDINATOR", address.c_str(), 1);
    setenv("MEMCOORD_RANK", "0", 1);
    setenv("MEMCOORD_LOCAL_RANK", "0", 1);
    setenv("MEMCOORD_WORLD_SIZE", "2", 1);
    setenv("MEMCOORD_LOG_LEVEL", "off", 1);
    if (memcoord_init() != 0 || memcoord_set_abort_exit(MEMCOORD_EXIT_ABORTED, 300) != 0) ::_exit(3);
    if (memcoord_set_abort_exit(256, 300) != MEMCOORD_ERR_INVALID_ARGUMENT) ::_exit(4);
    for (;;) ::pause();
  }
  ::close(err[1]);
  ASSERT_TRUE(WaitFor([&] { return BothRanksLive(address); }, milliseconds(15000)))
      << "both ranks never attached; rank 1 said: " << rank1.output();
  const auto killed = SteadyClock::now();
  rank1.signal(SIGKILL);
  int status = 0;
  pid_t ended = 0;
  while (ended == 0 && SteadyClock::now() - killed < milliseconds(10000)) {
    ended = ::waitpid(survivor, &status, WNOHANG);
    std::this_thread::sleep_for(milliseconds(5));
  }
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - killed).count();
  if (ended == 0) {
    ::kill(survivor, SIGKILL);
    ::waitpid(survivor, &status, 0);
    FAIL() << "the survivor was still running 10 s after the death";
  }
  std::string said;
  char buffer[4096];
  for (ssize_t n; (n = ::read(err[0], buffer, sizeof(buffer))) > 0;)
    said.append(buffer, static_cast<std::size_t>(n));
  ::close(err[0]);
  std::printf("the stuck survivor ended %.1f ms after the death: %s", ms, said.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), MEMCOORD_EXIT_ABORTED);
  EXPECT_LT(ms, 2000.0);
  EXPECT_GE(ms, 300.0);  // not before the grace
  EXPECT_NE(said.find("dead rank 1"), std::string::npos) << said;
  EXPECT_NE(said.find("memcoord ends it with exit code 75"), std::string::npos) << said;
}

}  // namespace
