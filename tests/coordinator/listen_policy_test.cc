// The loopback rule and address handling (listen_policy.h), and the per-session rate limiter.
#include "coordinator/service/listen_policy.h"

#include <gtest/gtest.h>

#include "coordinator/service/rate_limiter.h"

namespace memcoord::coordinator {
namespace {

TEST(ListenPolicy, LoopbackHosts) {
  for (const char* host : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "127.255.255.254", "::1",
                           "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "[::]", "10.0.0.1", "128.0.0.1", "126.0.0.1", "node01",
                           "localhost.example.com", "", "::ffff:10.0.0.1", "127.0.0"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(ListenPolicy, PortsAreNumbersFrom0To65535) {
  for (const char* good : {"127.0.0.1:0", "127.0.0.1:65535", "[::1]:7777"}) {
    EXPECT_TRUE(SplitHostPort(good, "--listen").ok()) << good;
  }
  for (const char* bad :
       {"127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:http", "127.0.0.1:-1", "h:123456"}) {
    auto split = SplitHostPort(bad, "--listen");
    ASSERT_FALSE(split.ok()) << bad;
    EXPECT_NE(split.status().message().find("must be a number from 0 to 65535"), std::string::npos)
        << split.status().message();
  }
}

TEST(ListenPolicy, NonLoopbackNeedsATokenOrInsecure) {
  EXPECT_TRUE(CheckListenPolicy("127.0.0.1:0", false, false).ok());
  EXPECT_TRUE(CheckListenPolicy("[::1]:7777", false, false).ok());
  EXPECT_TRUE(CheckListenPolicy("localhost:7777", false, false).ok());
  const Status open = CheckListenPolicy("0.0.0.0:7777", false, false);
  EXPECT_EQ(open.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(open.message().find("'0.0.0.0:7777'"), std::string::npos) << open.message();
  EXPECT_NE(open.message().find("--token-file"), std::string::npos);
  EXPECT_NE(open.message().find("--admin-token-file"), std::string::npos);
  EXPECT_NE(open.message().find("--insecure"), std::string::npos);
  EXPECT_FALSE(CheckListenPolicy("node01:7777", false, false).ok());
  EXPECT_FALSE(CheckListenPolicy("[::]:7777", false, false).ok());
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0:7777", true, false).ok());
  EXPECT_TRUE(CheckListenPolicy("0.0.0.0:7777", false, true).ok());
  EXPECT_EQ(CheckListenPolicy(":7777", true, false).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckListenPolicy("7777", true, false).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckListenPolicy("::1:7777", true, false).code(), StatusCode::kInvalidArgument);
}

TEST(ListenPolicy, InsecureWarnsOnlyWhenItIsWhatOpensTheDoor) {
  EXPECT_NE(InsecureWarning("0.0.0.0:7777", false, true).find("WITHOUT AUTHENTICATION"), std::string::npos);
  EXPECT_EQ(InsecureWarning("0.0.0.0:7777", true, true), "");
  EXPECT_EQ(InsecureWarning("127.0.0.1:7777", false, true), "");
  EXPECT_EQ(InsecureWarning("0.0.0.0:7777", false, false), "");
}

TEST(ListenPolicy, MetricsBindLoopbackUnlessAHostIsNamed) {
  EXPECT_EQ(NormalizeMetricsListen("9400"), "127.0.0.1:9400");
  EXPECT_EQ(NormalizeMetricsListen(":9400"), "127.0.0.1:9400");
  EXPECT_EQ(NormalizeMetricsListen("127.0.0.1:9400"), "127.0.0.1:9400");
  EXPECT_EQ(NormalizeMetricsListen("0.0.0.0:9400"), "0.0.0.0:9400");
  EXPECT_EQ(NormalizeMetricsListen(""), "");
}

TEST(RateLimiter, AllowsTheRateAndABurstThenRefuses) {
  using namespace std::chrono_literals;
  RateLimiter limiter(100, 100);
  auto t = RateLimiter::Clock::time_point{} + 1h;
  int allowed = 0;
  for (int i = 0; i < 150; ++i) allowed += limiter.allow(t) ? 1 : 0;  // all at one instant
  EXPECT_EQ(allowed, 100);
  t += 100ms;  // 10 more tokens
  allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += limiter.allow(t) ? 1 : 0;
  EXPECT_EQ(allowed, 10);
  // A sender at 50/s for a minute is never refused.
  RateLimiter steady(100, 100);
  for (int i = 0; i < 3000; ++i) {
    t += 20ms;
    ASSERT_TRUE(steady.allow(t)) << i;
  }
  // A sender at 200/s is refused within about a second.
  RateLimiter flood(100, 100);
  int sent = 0;
  while (flood.allow(t) && sent < 10000) {
    t += 5ms;
    ++sent;
  }
  EXPECT_GT(sent, 150);
  EXPECT_LT(sent, 250);
  RateLimiter unlimited(0, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(unlimited.allow(t));
}

}  // namespace
}  // namespace memcoord::coordinator
