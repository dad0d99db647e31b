// SplitChain against brute force: every contiguous split of small random chains over devices with unequal
// capacities, including zero-sized items, base loads and infeasible cases.
#include "coordinator/planner/contiguous_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace memcoord::planner {
namespace {

// The best bottleneck over every way to cut `items` into devices.size() contiguous (possibly empty) runs,
// or UINT64_MAX when none fits.
std::uint64_t BruteForce(const std::vector<std::uint64_t>& items, const std::vector<std::uint64_t>& caps,
                         const std::vector<std::uint64_t>& base, std::size_t device = 0, std::size_t from = 0,
                         std::uint64_t so_far = 0) {
  if (device == caps.size()) return from == items.size() ? so_far : UINT64_MAX;
  std::uint64_t best = UINT64_MAX;
  std::uint64_t load = base[device];
  for (std::size_t to = from; to <= items.size(); ++to) {
    if (to > from) load += items[to - 1];
    if (load > caps[device]) break;
    best = std::min(best, BruteForce(items, caps, base, device + 1, to, std::max(so_far, load)));
  }
  return best;
}

TEST(ContiguousSplitTest, MatchesBruteForceOnRandomSmallChains) {
  std::mt19937_64 rng(20261202);
  int feasible = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t n = 1 + rng() % 9;
    const std::size_t m = 1 + rng() % 4;
    std::vector<std::uint64_t> items(n);
    for (auto& w : items) w = (rng() % 5 == 0) ? 0 : 1 + rng() % 100;
    std::vector<std::uint64_t> caps(m);
    for (auto& c : caps) c = 50 + rng() % 400;
    std::vector<std::uint64_t> base(m, 0);
    if (trial % 3 == 0) {
      for (std::size_t j = 0; j < m; ++j) base[j] = rng() % std::min<std::uint64_t>(caps[j], 120);
    }
    const std::uint64_t expected = BruteForce(items, caps, base);
    Result<ChainSplit> split = SplitChain(items, caps, base);
    if (expected == UINT64_MAX) {
      EXPECT_FALSE(split.ok()) << "trial " << trial;
      continue;
    }
    ++feasible;
    ASSERT_TRUE(split.ok()) << "trial " << trial << ": " << split.status().ToString();
    EXPECT_EQ(split->bottleneck_bytes, expected) << "trial " << trial;
    // The split is a real partition within capacities with the loads it reports.
    ASSERT_EQ(split->first.size(), m + 1);
    EXPECT_EQ(split->first.front(), 0u);
    EXPECT_EQ(split->first.back(), n);
    for (std::size_t j = 0; j < m; ++j) {
      ASSERT_LE(split->first[j], split->first[j + 1]);
      std::uint64_t load = base[j];
      for (std::size_t i = split->first[j]; i < split->first[j + 1]; ++i) load += items[i];
      EXPECT_EQ(split->loads[j], load);
      EXPECT_LE(load, caps[j]);
    }
    if (trial % 3 != 0) {
      EXPECT_LE(ChainLowerBound(items, caps), expected);
    }
  }
  EXPECT_GT(feasible, 1500);
}

TEST(ContiguousSplitTest, EqualDevicesSplitEvenly) {
  const std::vector<std::uint64_t> items(12, 10);
  Result<ChainSplit> split = SplitChain(items, std::vector<std::uint64_t>(4, 1000));
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->bottleneck_bytes, 30u);
  EXPECT_EQ(ChainLowerBound(items, std::vector<std::uint64_t>(4, 1000)), 30u);
}

TEST(ContiguousSplitTest, SmallDeviceGetsLessWithUnequalCapacities) {
  // 10 items of 10 over devices of 20, 1000, 1000: the first device can take two items only.
  Result<ChainSplit> split = SplitChain(std::vector<std::uint64_t>(10, 10), {20, 1000, 1000});
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->loads[0], 20u);
  EXPECT_EQ(split->bottleneck_bytes, 40u);
}

TEST(ContiguousSplitTest, InfeasibleSaysWhatIsNeeded) {
  Result<ChainSplit> split = SplitChain({60, 60, 60}, {100, 100});
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(split.status().message().find("180 B"), std::string::npos) << split.status().message();
}

TEST(ContiguousSplitTest, SameInputSameSplit) {
  std::vector<std::uint64_t> items;
  for (int i = 0; i < 500; ++i) items.push_back(1000 + static_cast<std::uint64_t>(i * 7919 % 613));
  const std::vector<std::uint64_t> caps(16, 1'000'000);
  Result<ChainSplit> a = SplitChain(items, caps);
  Result<ChainSplit> b = SplitChain(items, caps);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->first, b->first);
}

}  // namespace
}  // namespace memcoord::planner
