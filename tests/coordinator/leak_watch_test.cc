#include "coordinator/service/leak_watch.h"

#include <gtest/gtest.h>

namespace memcoord::coordinator {
namespace {

PoolUsage Pool(std::uint64_t activations, std::uint64_t optimizer) {
  PoolUsage p;
  p.name = "default";
  p.tags = {TagBytes{"activations", activations, 1}, TagBytes{"optimizer", optimizer, 1}};
  p.allocated_bytes = activations + optimizer;
  return p;
}

LeakWatchOptions Options(int window, std::uint64_t min_growth_bytes) {
  LeakWatchOptions o;
  o.window = window;
  o.min_growth_bytes = min_growth_bytes;
  return o;
}

TEST(LeakWatch, SteadyGrowthIsReportedWithRankPoolTagAndRate) {
  LeakWatch watch(Options(8, 1 << 20));
  for (int step = 1; step <= 10; ++step) {
    // Activations leak 512 KiB per step; the optimizer state is flat.
    watch.observe(3, step, {Pool(std::uint64_t(step) * (512 << 10), 64 << 20)});
  }
  auto alerts = watch.alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].rank, 3);
  EXPECT_EQ(alerts[0].pool, "default");
  EXPECT_EQ(alerts[0].tag, "activations");
  EXPECT_EQ(alerts[0].bytes_per_step, 512 << 10);
  EXPECT_EQ(alerts[0].last_step, 10);
}

TEST(LeakWatch, SteadyNonLeakingLoopRaisesNoAlarm) {
  LeakWatch watch;
  // Warm-up grows for two steps (optimizer state created), then every step ends at the same level; the
  // activations go up and down within a step, but the end-of-step samples are flat.
  std::uint64_t optimizer = 0;
  for (int step = 1; step <= 200; ++step) {
    if (step <= 2) optimizer += 256 << 20;
    watch.observe(0, step, {Pool(step % 2 ? 0 : 4096, optimizer)});
  }
  EXPECT_TRUE(watch.alerts().empty());
}

TEST(LeakWatch, SmallOrIntermittentGrowthIsNotALeak) {
  LeakWatch watch(Options(8, 1 << 20));
  for (int step = 1; step <= 20; ++step) {
    watch.observe(0, step, {Pool(std::uint64_t(step) * 1024, 0)});  // 20 KiB total: below the floor
  }
  EXPECT_TRUE(watch.alerts().empty());
  LeakWatch sawtooth(Options(8, 1 << 20));
  for (int step = 1; step <= 40; ++step) {
    sawtooth.observe(0, step, {Pool(std::uint64_t(step % 5) * (8 << 20), 0)});  // drops every 5 steps
  }
  EXPECT_TRUE(sawtooth.alerts().empty());
}

TEST(LeakWatch, AlarmClearsWhenGrowthStopsAndOnForget) {
  LeakWatch watch(Options(4, 1));
  for (int step = 1; step <= 4; ++step) watch.observe(1, step, {Pool(std::uint64_t(step) << 20, 0)});
  ASSERT_EQ(watch.alerts().size(), 1u);
  for (int step = 5; step <= 8; ++step) watch.observe(1, step, {Pool(4u << 20, 0)});
  EXPECT_TRUE(watch.alerts().empty());
  for (int step = 9; step <= 12; ++step) watch.observe(1, step, {Pool(std::uint64_t(step) << 20, 0)});
  ASSERT_EQ(watch.alerts().size(), 1u);
  watch.forget(1);
  EXPECT_TRUE(watch.alerts().empty());
}

}  // namespace
}  // namespace memcoord::coordinator
