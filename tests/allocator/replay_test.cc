// The headline figure as a regression test: on each shared real trace, the default pool on the `virtual`
// backend reserves no more than the best of PyTorch's three allocator configurations.
#include <gtest/gtest.h>

#include <cmath>

#include "allocator/caching_pool.h"
#include "allocator/trace.h"
#include "allocator/trace_replay.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

struct Anchor {
  const char* trace;
  double pytorch_best_ratio;  // shared data README: best of native, expandable_segments, cudaMallocAsync
};

constexpr Anchor kAnchors[] = {
    {"gpt2_fp32", 1.0043},
    {"gpt2_bf16_varlen", 1.0717},
    {"resnet50_amp", 1.0100},
    {"gpt2_generate", 1.0737},
};

TEST(Replay, DefaultPoolBeatsPyTorchOnEveryRealTrace) {
  double log_sum = 0;
  for (const Anchor& a : kAnchors) {
    Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/" + a.trace + ".trace.gz");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    VirtualBackend backend;
    CachingPool pool(backend);
    Result<ReplayResult> r = Replay(*trace, pool);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->events, trace->allocations + trace->frees);
    EXPECT_LE(r->ratio, a.pytorch_best_ratio) << a.trace;
    EXPECT_GE(r->ratio, 1.0) << a.trace;
    log_sum += std::log(r->ratio);
    EXPECT_TRUE(pool.check_invariants().ok());
    EXPECT_EQ(pool.stats().allocated_bytes, 0u);  // the replay frees what it allocated
  }
  EXPECT_LE(std::exp(log_sum / 4), 1.02);
}

TEST(Replay, AFailingAllocationIsReportedAndThePoolIsLeftClean) {
  Result<Trace> trace = ReadTrace(std::string(MEMCOORD_TRACE_DIR) + "/gpt2_fp32.trace.gz");
  ASSERT_TRUE(trace.ok());
  VirtualBackend backend(4ULL << 30);  // far smaller than the trace's 15.8 GB peak
  CachingPool pool(backend);
  Result<ReplayResult> r = Replay(*trace, pool);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("replay event"), std::string::npos);
  EXPECT_EQ(pool.stats().allocated_bytes, 0u);
}

}  // namespace
}  // namespace memcoord
