// PackWhole against brute force over every assignment of small random instances, and its heuristic path.
#include "coordinator/planner/model_packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace memcoord::planner {
namespace {

std::uint64_t BruteForce(const std::vector<std::uint64_t>& items, const std::vector<std::uint64_t>& caps,
                         std::vector<std::uint64_t>& loads, std::size_t i = 0) {
  if (i == items.size()) return *std::max_element(loads.begin(), loads.end());
  std::uint64_t best = UINT64_MAX;
  for (std::size_t j = 0; j < caps.size(); ++j) {
    if (loads[j] + items[i] > caps[j]) continue;
    loads[j] += items[i];
    best = std::min(best, BruteForce(items, caps, loads, i + 1));
    loads[j] -= items[i];
  }
  return best;
}

// One random instance: PackWhole (with `base` loads, none when empty) against brute force over every
// assignment. Returns whether the instance was feasible; the expectations carry `trial`.
bool MatchesBruteForce(const std::vector<std::uint64_t>& items, const std::vector<std::uint64_t>& caps,
                       const std::vector<std::uint64_t>& base, int trial) {
  std::vector<std::uint64_t> loads = base.empty() ? std::vector<std::uint64_t>(caps.size(), 0) : base;
  const std::vector<std::uint64_t> start = loads;
  const std::uint64_t expected = BruteForce(items, caps, loads);
  Result<Packing> packing = PackWhole(items, caps, base);
  if (expected == UINT64_MAX) {
    EXPECT_FALSE(packing.ok()) << "trial " << trial;
    return false;
  }
  EXPECT_TRUE(packing.ok()) << "trial " << trial << ": " << packing.status().ToString();
  if (!packing.ok()) return true;
  EXPECT_TRUE(packing->exact);
  EXPECT_EQ(packing->bottleneck_bytes, expected) << "trial " << trial;
  std::vector<std::uint64_t> check = start;
  for (std::size_t i = 0; i < items.size(); ++i) check[packing->device_of[i]] += items[i];
  EXPECT_EQ(check, packing->loads);
  for (std::size_t j = 0; j < caps.size(); ++j) EXPECT_LE(check[j], std::max(caps[j], start[j]));
  return true;
}

TEST(ModelPackingTest, ExactOnSmallRandomInstances) {
  std::mt19937_64 rng(7);
  int feasible = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const std::size_t n = 1 + rng() % 7;
    const std::size_t m = 1 + rng() % 4;
    std::vector<std::uint64_t> items(n);
    for (auto& w : items) w = 1 + rng() % 100;
    std::vector<std::uint64_t> caps(m);
    for (auto& c : caps) c = 60 + rng() % 300;
    feasible += MatchesBruteForce(items, caps, {}, trial);
  }
  EXPECT_GT(feasible, 800);
}

TEST(ModelPackingTest, LargeInstancesUseImprovedLargestFirstWithinFewPercentOfTheBound) {
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> items(200);
  std::uint64_t total = 0;
  for (auto& w : items) total += (w = 1'000 + rng() % 9'000);
  const std::vector<std::uint64_t> caps(16, 1'000'000);
  Result<Packing> packing = PackWhole(items, caps);
  ASSERT_TRUE(packing.ok());
  EXPECT_FALSE(packing->exact);
  const double even = static_cast<double>(total) / 16.0;
  EXPECT_LT(static_cast<double>(packing->bottleneck_bytes), even * 1.02);
  Result<Packing> again = PackWhole(items, caps);
  EXPECT_EQ(again->device_of, packing->device_of);  // deterministic
}

TEST(ModelPackingTest, ModelTooLargeForAnyDeviceIsNamed) {
  Result<Packing> packing = PackWhole({10, 500}, {100, 200});
  ASSERT_FALSE(packing.ok());
  EXPECT_EQ(packing.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(packing.status().message().find("item 1"), std::string::npos);
}

TEST(ModelPackingTest, HonoursBaseLoads) {
  Result<Packing> packing = PackWhole({50, 50}, {100, 100}, {60, 0});
  ASSERT_TRUE(packing.ok());
  EXPECT_EQ(packing->device_of[0], 1u);
  EXPECT_EQ(packing->device_of[1], 1u);
  EXPECT_EQ(packing->bottleneck_bytes, 100u);
}

}  // namespace
}  // namespace memcoord::planner

namespace memcoord::planner {
namespace {

TEST(ModelPackingTest, ExactAtTheLargestExactSizeToo) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<std::uint64_t> items(kExactPackingItems - 1);
    for (auto& w : items) w = 1'000 + rng() % 9'000;
    const std::vector<std::uint64_t> caps = {60'000, 50'000, 45'000};
    std::vector<std::uint64_t> loads(caps.size(), 0);
    const std::uint64_t expected = BruteForce(items, caps, loads);
    Result<Packing> packing = PackWhole(items, caps);
    ASSERT_TRUE(packing.ok());
    EXPECT_TRUE(packing->exact);
    EXPECT_EQ(packing->bottleneck_bytes, expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace memcoord::planner

namespace memcoord::planner {
namespace {

// The exact search tries only devices dominated by fewer than `items` others (lower or equal base load,
// larger or equal capacity): with more devices than items and unequal base loads it must still find the
// optimum brute force finds over every device.
TEST(ModelPackingTest, ExactWithBaseLoadsOnMoreDevicesThanItems) {
  std::mt19937_64 rng(23);
  int feasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t n = 1 + rng() % 4;
    const std::size_t m = n + 1 + rng() % 6;
    std::vector<std::uint64_t> items(n);
    for (auto& w : items) w = 1 + rng() % 100;
    std::vector<std::uint64_t> caps(m);
    std::vector<std::uint64_t> base(m);
    for (std::size_t j = 0; j < m; ++j) {
      caps[j] = 60 + rng() % 200;
      base[j] = rng() % 3 == 0 ? 0 : rng() % 80;
    }
    feasible += MatchesBruteForce(items, caps, base, trial);
  }
  EXPECT_GT(feasible, 250);
}

}  // namespace
}  // namespace memcoord::planner
