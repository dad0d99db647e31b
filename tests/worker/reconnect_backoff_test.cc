#include "worker/detail/reconnect_backoff.h"

#include <gtest/gtest.h>

#include <set>

namespace memcoord::detail {
namespace {

using std::chrono::milliseconds;

TEST(ReconnectBackoff, GrowsToTheCapWithEqualJitterAndResets) {
  ReconnectBackoff backoff(milliseconds(20), milliseconds(250), 7);
  // Steps 20, 40, 80, 160, 250, 250...: each wait lies in [step / 2, step].
  const std::int64_t steps[] = {20, 40, 80, 160, 250, 250, 250};
  for (std::int64_t step : steps) {
    const std::int64_t wait = backoff.next().count();
    EXPECT_GE(wait, step / 2);
    EXPECT_LE(wait, step);
  }
  backoff.reset();
  EXPECT_LE(backoff.next().count(), 20);
}

TEST(ReconnectBackoff, WorkersWithDifferentSeedsSpreadTheirRetries) {
  std::set<std::int64_t> waits;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    ReconnectBackoff backoff(milliseconds(250), milliseconds(250), seed);
    waits.insert(backoff.next().count());
  }
  EXPECT_GT(waits.size(), 32u);  // 64 workers losing the coordinator together do not retry together
}

TEST(ReconnectBackoff, DegenerateBoundsStayPositiveAndOrdered) {
  ReconnectBackoff zero(milliseconds(0), milliseconds(0), 1);
  EXPECT_EQ(zero.next().count(), 1);
  ReconnectBackoff inverted(milliseconds(100), milliseconds(10), 1);
  for (int i = 0; i < 5; ++i) {
    EXPECT_GE(inverted.next().count(), 50);
    EXPECT_LE(inverted.next().count(), 100);
  }
}

}  // namespace
}  // namespace memcoord::detail
