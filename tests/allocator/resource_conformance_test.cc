// Every layer of a pool's stack keeps the MemoryResource contract, alone over a simple upstream and as the
// core over a backend.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "allocator/core_pool.h"
#include "allocator/limit_adaptor.h"
#include "allocator/oom_retry_adaptor.h"
#include "allocator/recorder_adaptor.h"
#include "allocator/stats_adaptor.h"
#include "allocator/tag_adaptor.h"
#include "allocator/thread_cache_adaptor.h"
#include "allocator/thread_safe_adaptor.h"
#include "allocator/trace_recorder.h"
#include "allocator/virtual_backend.h"
#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

// One stack under test: what it owns, and its top.
struct Stack {
  std::unique_ptr<testing::FakeResource> fake = std::make_unique<testing::FakeResource>();
  std::unique_ptr<VirtualBackend> backend;
  std::unique_ptr<LimitAdaptor> limit;
  std::unique_ptr<TraceRecorder> recorder;
  std::vector<std::unique_ptr<MemoryResource>> layers;  // under top, bottom first
  std::unique_ptr<MemoryResource> top;

  Stack() = default;
  Stack(Stack&&) = default;
  // Top down: a layer may still call the one below it as it goes (a thread cache returns its blocks).
  ~Stack() {
    top.reset();
    while (!layers.empty()) layers.pop_back();
  }
};

// CachingPool's composition: each fixed layer names the concrete type below it and calls it directly.
Stack CachingPoolsStack() {
  Stack s;
  s.backend = std::make_unique<VirtualBackend>(kGiB);
  auto core = std::make_unique<CorePool>(*s.backend);
  auto stats = std::make_unique<StatsAdaptor<CorePool>>(*core);
  auto tags = std::make_unique<TagAdaptor<StatsAdaptor<CorePool>>>(*stats);
  auto locked = std::make_unique<ThreadSafeAdaptor>(*tags);
  auto cache = std::make_unique<ThreadCacheAdaptor>(
      *locked, LiveFigures{&stats->allocated_counter(), &stats->requested_counter()}, ThreadCacheLimits{},
      "pool 'conformance'");
  auto oom =
      std::make_unique<OomRetryAdaptor<ThreadCacheAdaptor>>(*cache, [](std::size_t) { return OomEvent{}; });
  oom->set_hook([](const OomEvent&) { return false; });
  s.layers.push_back(std::move(core));
  s.layers.push_back(std::move(stats));
  s.layers.push_back(std::move(tags));
  s.layers.push_back(std::move(locked));
  s.layers.push_back(std::move(cache));
  s.top = std::move(oom);
  return s;
}

using Factory = std::function<Stack()>;

std::map<std::string, Factory> Factories() {
  return {
      {"CachingPoolsStack", CachingPoolsStack},
      {"CorePoolMapping",
       [] {
         Stack s;
         s.backend = std::make_unique<VirtualBackend>(kGiB);
         s.top = std::make_unique<CorePool>(*s.backend, PoolOptions{.growth = PoolGrowth::kMapping});
         return s;
       }},
      {"CorePoolSegmentsUnderALimit",
       [] {
         Stack s;
         s.backend = std::make_unique<VirtualBackend>(kGiB);
         s.limit = std::make_unique<LimitAdaptor>(*s.backend, 64 * kMiB);
         s.top = std::make_unique<CorePool>(*s.limit, PoolOptions{.growth = PoolGrowth::kSegments});
         return s;
       }},
      {"StatsAdaptor",
       [] {
         Stack s;
         s.top = std::make_unique<StatsAdaptor<>>(*s.fake);
         return s;
       }},
      {"TagAdaptor",
       [] {
         Stack s;
         s.top = std::make_unique<TagAdaptor<>>(*s.fake);
         return s;
       }},
      {"RecorderAdaptor",
       [] {
         Stack s;
         s.recorder = std::make_unique<TraceRecorder>();  // never opened: records nothing
         s.top = std::make_unique<RecorderAdaptor>(*s.fake, *s.recorder);
         return s;
       }},
      {"ThreadSafeAdaptor",
       [] {
         Stack s;
         s.top = std::make_unique<ThreadSafeAdaptor>(*s.fake);
         return s;
       }},
      {"ThreadCacheAdaptor",
       [] {
         Stack s;
         auto stats = std::make_unique<StatsAdaptor<>>(*s.fake);
         s.top = std::make_unique<ThreadCacheAdaptor>(
             *stats, LiveFigures{&stats->allocated_counter(), &stats->requested_counter()},
             ThreadCacheLimits{}, "pool 'conformance'");
         s.layers.push_back(std::move(stats));
         return s;
       }},
      {"OomRetryAdaptor",
       [] {
         Stack s;
         auto oom = std::make_unique<OomRetryAdaptor<>>(*s.fake, [](std::size_t) { return OomEvent{}; });
         oom->set_hook([](const OomEvent&) { return true; });
         s.top = std::move(oom);
         return s;
       }},
  };
}

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, KeepsTheMemoryResourceContract) {
  Stack s = Factories().at(GetParam())();
  testing::ExpectConformingResource(*s.top);
}

// The adaptors over a FakeResource that fails: the failure reaches the caller and nothing stays allocated.
class AdaptorOverAFailingUpstream : public ::testing::TestWithParam<std::string> {};

TEST_P(AdaptorOverAFailingUpstream, LeavesNothingBehind) {
  Stack s = Factories().at(GetParam())();
  s.fake->fail_next_allocations = GetParam() == "OomRetryAdaptor" ? 2 : 1;  // and the OOM adaptor's retry
  EXPECT_EQ(s.top->allocate(4096).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(s.fake->live.empty());
  testing::ExpectConformingResource(*s.top);
}

INSTANTIATE_TEST_SUITE_P(Adaptors, AdaptorOverAFailingUpstream,
                         ::testing::Values("StatsAdaptor", "TagAdaptor", "RecorderAdaptor",
                                           "ThreadSafeAdaptor", "ThreadCacheAdaptor", "OomRetryAdaptor"),
                         [](const auto& param_info) { return param_info.param; });

INSTANTIATE_TEST_SUITE_P(Layers, Conformance,
                         ::testing::Values("CachingPoolsStack", "CorePoolMapping",
                                           "CorePoolSegmentsUnderALimit", "StatsAdaptor", "TagAdaptor",
                                           "RecorderAdaptor", "ThreadSafeAdaptor", "ThreadCacheAdaptor",
                                           "OomRetryAdaptor"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace memcoord
