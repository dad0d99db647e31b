// memcoord_shutdown() while threads are inside the C ABI, with the worker attached to a real coordinator on
// loopback (`memcoord coordinator`): the path c_abi_lifetime_test.cc cannot reach, where shutdown stops the
// coordinator session while other threads still allocate, free and end steps. Threads hammer the torch hooks,
// the device calls and memcoord_step_end while the main thread shuts down and re-initializes, re-attaching as
// the same rank each time. Every call either succeeds or fails with "not initialized" (a block freed into the
// next worker: NOT_FOUND); nothing crashes or hangs, no step end reads an abort (nor does the last worker's
// abort info), and the rank is live on the coordinator at the end. Run it under the asan preset too (the tsan
// preset builds no coordinator).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/faults/process_harness.h"
#include "tests/worker/c_abi_test_support.h"
#include "worker/memcoord.h"

namespace {

using memcoord::testing::CallCounts;
using memcoord::testing::Classify;
using memcoord::testing::CoordinatorProcess;
using memcoord::testing::CountedDeviceAlloc;
using memcoord::testing::CountedTorchPair;
using memcoord::testing::NextHammerSize;
using memcoord::testing::ScopedEnv;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

// Calls, and of them the step ends that returned 0.
struct Counts : CallCounts {
  std::atomic<long> steps{0};
};

// One thread's loop. kind 0: the torch hooks; 1: the device calls; 2: steps (each a StepReport to the
// coordinator's session) between allocations.
void Hammer(int kind, const std::atomic<bool>& stop, Counts& counts) {
  std::size_t size = 512;
  while (!stop.load(std::memory_order_relaxed)) {
    size = NextHammerSize(size);
    if (kind == 0) {
      CountedTorchPair(size, counts);
      continue;
    }
    void* p = CountedDeviceAlloc(size, counts);
    if (p == nullptr) continue;
    if (kind == 2) {
      const int code = memcoord_step_end();
      if (code == 0) ++counts.steps;
      Classify(counts, code, "memcoord_step_end");
      std::this_thread::sleep_for(milliseconds(1));
    }
    Classify(counts, memcoord_device_free(0, p, 0), "memcoord_device_free");
  }
}

bool RankLive(const std::string& address) {
  auto ranks = memcoord::testing::ClusterStatus(MEMCOORD_CLI, address);
  return ranks && ranks->count(0) && (*ranks)[0].state == "live";
}

TEST(CAbiShutdownAttached, ShutdownWhileThreadsAllocateFreeAndStep) {
  CoordinatorProcess coordinator(MEMCOORD_CLI, memcoord::testing::FreeLoopbackPort());
  ASSERT_TRUE(coordinator.start()) << coordinator.output();
  const ScopedEnv env({{"MEMCOORD_BACKEND", "host"},
                       {"MEMCOORD_COORDINATOR", coordinator.address()},
                       {"MEMCOORD_RANK", "0"},
                       {"MEMCOORD_LOCAL_RANK", "0"},
                       {"MEMCOORD_WORLD_SIZE", "1"},
                       {"MEMCOORD_LOG_LEVEL", "off"}});
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  ASSERT_TRUE(WaitFor([&] { return RankLive(coordinator.address()); }, milliseconds(15000)))
      << "rank 0 never attached: " << coordinator.output();

  std::atomic<bool> stop{false};
  Counts counts;
  std::vector<std::thread> threads;
  for (int kind : {0, 1, 2, 0}) threads.emplace_back(Hammer, kind, std::cref(stop), std::ref(counts));
  for (int round = 0; round < 12; ++round) {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_EQ(memcoord_shutdown(), 0) << memcoord_last_error();
    std::this_thread::sleep_for(milliseconds(2));
    ASSERT_EQ(memcoord_init(), 0) << "round " << round << ": " << memcoord_last_error();
  }
  std::this_thread::sleep_for(milliseconds(50));
  stop = true;
  for (auto& t : threads) t.join();

  // Still one live rank of a group that was never aborted, with the session of the last init.
  EXPECT_TRUE(WaitFor([&] { return RankLive(coordinator.address()); }, milliseconds(5000)))
      << coordinator.output();
  memcoord_abort_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(memcoord_abort_info_get(&info), 0) << memcoord_last_error();
  EXPECT_EQ(info.aborted, 0) << info.reason;
  EXPECT_EQ(memcoord_step_end(), 0) << memcoord_last_error();
  EXPECT_EQ(memcoord_shutdown(), 0);
  EXPECT_GT(counts.ok.load(), 100);
  EXPECT_GT(counts.steps.load(), 10);
  EXPECT_EQ(counts.other.load(), 0);
  RecordProperty("ok", std::to_string(counts.ok.load()));
  RecordProperty("steps", std::to_string(counts.steps.load()));
  RecordProperty("not_initialized", std::to_string(counts.not_initialized.load()));
}

}  // namespace
