// ThreadSafeAdaptor over a FakeResource that is not thread-safe at all: four threads through the adaptor
// leave exact counts (and, under TSan, no race).
#include "allocator/thread_safe_adaptor.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

TEST(ThreadSafeAdaptor, SerializesEveryCallIntoItsUpstream) {
  testing::FakeResource fake;
  ThreadSafeAdaptor safe(fake);
  constexpr int kThreads = 4;
  constexpr int kOps = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kOps; ++i) {
        Result<Allocation> a = safe.allocate(512 + static_cast<std::size_t>(i % 7) * 512);
        ASSERT_TRUE(a.ok());
        ASSERT_TRUE(safe.record_stream(a->ptr, 0x51).ok());
        ASSERT_TRUE(safe.deallocate(a->ptr).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(fake.allocate_calls, kThreads * kOps);
  EXPECT_EQ(fake.deallocate_calls, kThreads * kOps);
  EXPECT_EQ(fake.record_stream_calls, kThreads * kOps);
  EXPECT_TRUE(fake.live.empty());
}

TEST(ThreadSafeAdaptor, TheUpstreamCanBeReplacedUnderItsLock) {
  testing::FakeResource first;
  testing::FakeResource second;
  Allocation padding = *first.allocate(4096);  // so the two fakes' addresses differ
  ThreadSafeAdaptor safe(first);
  Allocation a = *safe.allocate(4096);
  {
    auto lock = safe.lock();
    safe.set_upstream(second);
  }
  Allocation b = *safe.allocate(4096);
  EXPECT_EQ(first.allocate_calls, 2);
  EXPECT_EQ(second.allocate_calls, 1);
  EXPECT_EQ(safe.deallocate(a.ptr).status().code(), StatusCode::kNotFound) << "a lives in the first";
  ASSERT_TRUE(safe.deallocate(b.ptr).ok());
  for (void* p : {padding.ptr, a.ptr}) ASSERT_TRUE(first.deallocate(p).ok());
}

}  // namespace
}  // namespace memcoord
