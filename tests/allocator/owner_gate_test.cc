// OwnerGate (allocator/detail/owner_gate.h): an owner that enters often and intruders that exclude it never
// run their sections at once. A plain (non-atomic) counter that both sides increment ends exact, and under
// ThreadSanitizer an overlap would be reported as a data race. An excluded owner is turned away until the
// intruder admits it again.
#include "allocator/detail/owner_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace memcoord::detail {
namespace {

TEST(OwnerGate, AnExcludedOwnerIsTurnedAwayUntilAdmitted) {
  OwnerGate gate;
  ASSERT_TRUE(gate.try_enter());
  gate.leave();
  gate.exclude();
  EXPECT_FALSE(gate.try_enter());
  EXPECT_FALSE(gate.try_enter());
  gate.admit();
  EXPECT_TRUE(gate.try_enter());
  gate.leave();
}

class OwnerGateModes : public ::testing::TestWithParam<bool> {};

// Both owner paths: relying on membarrier (where the kernel offers it) and paying a seq_cst fence.
TEST_P(OwnerGateModes, OwnerAndIntrudersNeverOverlap) {
  OwnerGate gate(GetParam() && MembarrierRegistered());
  std::mutex intruders;  // serializes intruders; the owner takes it when the gate turns it away
  std::uint64_t counter = 0;
  std::uint64_t turned_away = 0;
  constexpr std::uint64_t kOwnerRounds = 200000;
  constexpr std::uint64_t kIntruderRounds = 300;
  constexpr int kIntruders = 2;
  std::atomic<bool> start{false};
  std::thread owner([&] {
    while (!start.load()) {
    }
    for (std::uint64_t i = 0; i < kOwnerRounds; ++i) {
      if (gate.try_enter()) {
        counter = counter + 1;
        gate.leave();
      } else {
        std::lock_guard lock(intruders);
        counter = counter + 1;
        ++turned_away;
      }
    }
  });
  std::vector<std::thread> others;
  for (int t = 0; t < kIntruders; ++t) {
    others.emplace_back([&] {
      while (!start.load()) {
      }
      for (std::uint64_t i = 0; i < kIntruderRounds; ++i) {
        std::lock_guard lock(intruders);
        gate.exclude();
        counter = counter + 1;
        gate.admit();
      }
    });
  }
  start.store(true);
  owner.join();
  for (auto& t : others) t.join();
  EXPECT_EQ(counter, kOwnerRounds + kIntruders * kIntruderRounds);
  EXPECT_LE(turned_away, kOwnerRounds);
}

INSTANTIATE_TEST_SUITE_P(OwnerGate, OwnerGateModes, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& mode) {
                           return mode.param ? std::string("Membarrier") : std::string("Fences");
                         });

}  // namespace
}  // namespace memcoord::detail
