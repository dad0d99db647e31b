// OomRetryAdaptor alone over a FakeResource: the hook is asked only for RESOURCE_EXHAUSTED, with the event
// `describe` gives, and a yes retries exactly once.
#include "allocator/oom_retry_adaptor.h"

#include <gtest/gtest.h>

#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

OomEvent Describe(std::size_t bytes) { return OomEvent{"p", bytes, 64, 32, 16}; }

TEST(OomRetryAdaptor, WithoutAHookItOnlyForwards) {
  testing::FakeResource fake;
  OomRetryAdaptor oom(fake, Describe);
  EXPECT_FALSE(oom.has_hook());
  fake.fail_next_allocations = 1;
  EXPECT_EQ(oom.allocate(4096).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fake.allocate_calls, 1);
}

TEST(OomRetryAdaptor, AYesRetriesOnceAndThatAnswerIsFinal) {
  testing::FakeResource fake;
  OomRetryAdaptor oom(fake, Describe);
  int calls = 0;
  oom.set_hook([&](const OomEvent& e) {
    ++calls;
    EXPECT_EQ(e.pool, "p");
    EXPECT_EQ(e.requested_bytes, 4096u);
    return true;
  });
  fake.fail_next_allocations = 1;
  Result<Allocation> a = oom.allocate(4096);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(fake.allocate_calls, 2);
  fake.fail_next_allocations = 5;
  EXPECT_EQ(oom.allocate(4096).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(calls, 2) << "the hook is asked once per allocation";
  EXPECT_EQ(fake.allocate_calls, 4);
  ASSERT_TRUE(oom.deallocate(a->ptr).ok());
}

TEST(OomRetryAdaptor, ANoOrAnotherErrorIsReturnedAsIs) {
  testing::FakeResource fake;
  OomRetryAdaptor oom(fake, Describe);
  int calls = 0;
  oom.set_hook([&](const OomEvent&) {
    ++calls;
    return false;
  });
  fake.fail_next_allocations = 1;
  EXPECT_EQ(oom.allocate(4096).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fake.allocate_calls, 1);
  EXPECT_EQ(oom.allocate(0).status().code(), StatusCode::kInvalidArgument);
  fake.fail_next_allocations = 1;
  fake.failure = Unavailable("fake: driver gone");
  EXPECT_EQ(oom.allocate(4096).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(calls, 1) << "only out-of-memory asks the hook";
  oom.set_hook(nullptr);
  EXPECT_FALSE(oom.has_hook());
}

TEST(OomRetryAdaptor, TheHookMayCallBackIntoTheResource) {
  testing::FakeResource fake;
  OomRetryAdaptor oom(fake, Describe);
  Allocation held = *oom.allocate(kMiB);
  oom.set_hook([&](const OomEvent&) { return oom.deallocate(held.ptr).ok(); });  // frees room, then retry
  fake.fail_next_allocations = 1;
  Result<Allocation> a = oom.allocate(kMiB);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(fake.live.size(), 1u);
  ASSERT_TRUE(oom.deallocate(a->ptr).ok());
}

}  // namespace
}  // namespace memcoord
