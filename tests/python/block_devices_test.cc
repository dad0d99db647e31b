// The shim's record of which device each block belongs to (python/memcoord/csrc/block_devices.h), without
// PyTorch or a GPU: one GPU on the device machines never reaches its other devices' path.
#include "block_devices.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace memcoord::shim {
namespace {

void* Address(std::uintptr_t n) { return reinterpret_cast<void*>(n * 512); }

TEST(BlockDevicesTest, TheFirstDevicesBlocksAreNotRecorded) {
  BlockDevices devices;
  EXPECT_EQ(devices.first_device(), -1);
  devices.remember(Address(1), 3);
  devices.remember(Address(2), 3);
  EXPECT_EQ(devices.first_device(), 3);
  EXPECT_EQ(devices.recorded(), 0u);
  EXPECT_EQ(devices.take(Address(2)), 3);
  EXPECT_EQ(devices.take(Address(1)), 3);
}

TEST(BlockDevicesTest, OtherDevicesBlocksGoBackToTheirOwnDevice) {
  BlockDevices devices;
  devices.remember(Address(1), 0);
  devices.remember(Address(2), 1);
  devices.remember(Address(3), 2);
  devices.remember(Address(4), 0);
  EXPECT_EQ(devices.recorded(), 2u);
  EXPECT_EQ(devices.take(Address(3)), 2);
  EXPECT_EQ(devices.take(Address(4)), 0);  // looked for, not found: the first device's
  EXPECT_EQ(devices.take(Address(2)), 1);
  EXPECT_EQ(devices.recorded(), 0u);  // each record dropped by its free
  EXPECT_EQ(devices.take(Address(1)), 0);
}

TEST(BlockDevicesTest, AnAddressReusedOnAnotherDeviceTakesItsNewDevice) {
  BlockDevices devices;
  devices.remember(Address(1), 0);
  devices.remember(Address(9), 1);
  EXPECT_EQ(devices.take(Address(9)), 1);
  devices.remember(Address(9), 0);  // the address again, now the first device's
  EXPECT_EQ(devices.take(Address(9)), 0);
  devices.remember(Address(9), 2);
  devices.remember(Address(9), 1);  // a record never taken (a leaked block) is replaced, not kept
  EXPECT_EQ(devices.take(Address(9)), 1);
  EXPECT_EQ(devices.recorded(), 0u);
}

// Threads allocate on their own devices and free blocks allocated by the others, as PyTorch frees a tensor on
// whichever thread drops it: every block goes back to the device it came from, and one device is the first.
TEST(BlockDevicesTest, ThreadsAgreeOnTheFirstDeviceAndEveryBlocksDevice) {
  BlockDevices devices;
  constexpr int kThreads = 4;
  constexpr int kBlocks = 2000;
  std::vector<std::thread> allocating;
  for (int t = 0; t < kThreads; ++t) {
    allocating.emplace_back([&devices, t] {
      for (int i = 0; i < kBlocks; ++i) devices.remember(Address(1 + t * kBlocks + i), t);
    });
  }
  for (std::thread& thread : allocating) thread.join();
  const int first = devices.first_device();
  ASSERT_GE(first, 0);
  ASSERT_LT(first, kThreads);
  EXPECT_EQ(devices.recorded(), static_cast<std::size_t>((kThreads - 1) * kBlocks));
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> freeing;
  for (int t = 0; t < kThreads; ++t) {
    freeing.emplace_back([&devices, &wrong, t] {
      const int owner = (t + 1) % kThreads;  // another thread's blocks
      for (int i = 0; i < kBlocks; ++i) {
        if (devices.take(Address(1 + owner * kBlocks + i)) != owner) ++wrong[t];
      }
    });
  }
  for (std::thread& thread : freeing) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_EQ(devices.recorded(), 0u);
}

}  // namespace
}  // namespace memcoord::shim
