// memcoord_shutdown() against threads inside alloc/free (the use-after-free the old C ABI had): threads
// hammer the allocation entry points while the main thread shuts down and re-initializes repeatedly. Every
// call either succeeds or fails with a clear "not initialized"/"not found"; nothing crashes (run it under
// the asan and tsan presets too).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/worker/c_abi_test_support.h"
#include "worker/memcoord.h"

namespace {

using memcoord::testing::CallCounts;
using memcoord::testing::Classify;
using memcoord::testing::CountedDeviceAlloc;
using memcoord::testing::CountedTorchPair;
using memcoord::testing::NextHammerSize;

// One thread's loop: the torch hooks or the device calls (neither re-initializes after a shutdown).
void Hammer(bool torch, const std::atomic<bool>& stop, CallCounts& counts) {
  std::size_t size = 512;
  while (!stop.load(std::memory_order_relaxed)) {
    size = NextHammerSize(size);
    if (torch) {
      CountedTorchPair(size, counts);
    } else if (void* p = CountedDeviceAlloc(size, counts)) {
      Classify(counts, memcoord_device_free(0, p, 0), "memcoord_device_free");
    }
  }
}

TEST(CAbiLifetime, ShutdownWhileThreadsAllocateAndFree) {
  setenv("MEMCOORD_BACKEND", "host", 1);
  unsetenv("MEMCOORD_COORDINATOR");
  unsetenv("MEMCOORD_DEVICES");
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  std::atomic<bool> stop{false};
  CallCounts counts;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(Hammer, t % 2 == 0, std::cref(stop), std::ref(counts));
  for (int round = 0; round < 30; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    ASSERT_EQ(memcoord_shutdown(), 0) << memcoord_last_error();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (round % 2 == 0) {
      ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(memcoord_shutdown(), 0);
  EXPECT_GT(counts.ok.load(), 100);
  EXPECT_EQ(counts.other.load(), 0);
  RecordProperty("ok", std::to_string(counts.ok.load()));
  RecordProperty("not_initialized", std::to_string(counts.not_initialized.load()));
}

// Shutdown wakes a thread blocked in memcoord_wait_abort instead of waiting for it forever.
TEST(CAbiLifetime, ShutdownWakesAbortWaiters) {
  setenv("MEMCOORD_BACKEND", "host", 1);
  unsetenv("MEMCOORD_COORDINATOR");
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  std::atomic<int> result{-1};
  std::thread waiter([&] { result = memcoord_wait_abort(-1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(memcoord_shutdown(), 0);
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(result.load(), MEMCOORD_ERR_FAILED_PRECONDITION);
}

}  // namespace
