// CachingPool as a composition: the core alone, the optional layers attached and detached at run time
// (tags, recorder, OOM hook) with figures that stay right across the change, peak reset and snapshots.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "allocator/caching_pool.h"
#include "allocator/core_pool.h"
#include "allocator/limit_adaptor.h"
#include "allocator/trace.h"
#include "allocator/trace_recorder.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"
#include "tests/allocator/stream_test_backend.h"

namespace memcoord {
namespace {

// The core on its own, under a LimitAdaptor: a miss over the budget packs the other arena's cache first,
// and the last-resort pass frees cache on a busy stream before the core reports out of memory.
TEST(CorePool, UnderALimitAdaptorPacksAndReleasesBeforeFailing) {
  testing::StreamTestBackend backend;
  LimitAdaptor limit(backend, 40 * kMiB);
  CorePool core(limit);
  std::vector<void*> small;
  for (int i = 0; i < 16; ++i) small.push_back(core.allocate(kMiB)->ptr);
  for (void* p : small) ASSERT_TRUE(core.deallocate(p).ok());
  Result<Allocation> big = core.allocate(30 * kMiB, 0x51);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_LE(core.reserved_bytes(), 40 * kMiB);
  EXPECT_EQ(limit.used_bytes(), core.reserved_bytes());
  ASSERT_TRUE(core.deallocate(big->ptr).ok());
  backend.busy.insert(0x51);
  Result<Allocation> other = core.allocate(36 * kMiB, 0x52);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  Result<Allocation> too_much = core.allocate(8 * kMiB, 0x52);
  EXPECT_EQ(too_much.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_much.status().message().find("the limit of pool"), std::string::npos)
      << too_much.status().message();
  Result<Allocation> freed = core.deallocate(other->ptr);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(freed->stream, 0x52u);
  EXPECT_EQ(freed->requested, 36 * kMiB);
  EXPECT_TRUE(core.check_invariants().ok()) << core.check_invariants().ToString();
}

TEST(PoolComposition, TagsRegisteredAfterUntaggedBlocksKeepEveryFigureRight) {
  VirtualBackend backend;
  CachingPool pool(backend);
  void* before = *pool.allocate(3 * kMiB);  // the tag layer is not in the stack yet
  ASSERT_EQ(pool.tag_usage().size(), 1u);
  EXPECT_EQ(pool.tag_usage()[0].tag, "untagged");
  EXPECT_EQ(pool.tag_usage()[0].live_bytes, 3 * kMiB);
  const TagId act = *pool.tag("activations");
  void* tagged = *pool.allocate(kMiB, kDefaultStream, act);
  std::vector<TagUsage> usage = pool.tag_usage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].tag, "untagged");
  EXPECT_EQ(usage[0].live_bytes, 3 * kMiB);
  EXPECT_EQ(usage[1].tag, "activations");
  EXPECT_EQ(usage[1].live_blocks, 1u);
  ASSERT_TRUE(pool.deallocate(before).ok());  // allocated before the layer, freed through it
  usage = pool.tag_usage();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].tag, "activations");
  EXPECT_EQ(usage[0].live_bytes, kMiB);
  ASSERT_TRUE(pool.deallocate(tagged).ok());
  EXPECT_TRUE(pool.tag_usage().empty());
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
}

TEST(PoolComposition, ARecorderAttachedAndDetachedRecordsOnlyWhileAttached) {
  const std::string path = ::testing::TempDir() + "/pool_composition_" + std::to_string(getpid()) + ".trace";
  VirtualBackend backend;
  CachingPool pool(backend);
  void* unrecorded = *pool.allocate(4096);
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.open(path).ok());
  pool.set_recorder(&recorder);
  const TagId t = *pool.tag("t");  // rewires the stack with the recorder on top of the tags
  void* a = *pool.allocate(1000, 0x51, t);
  ASSERT_TRUE(pool.deallocate(a).ok());
  pool.set_recorder(nullptr);
  ASSERT_TRUE(pool.deallocate(unrecorded).ok());
  ASSERT_TRUE(recorder.close().ok());
  Result<Trace> trace = ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->events.size(), 2u);
  EXPECT_EQ(trace->events[0].bytes, 1000u);
  EXPECT_EQ(trace->events[0].stream, 0x51u);
  EXPECT_EQ(trace->events[1].kind, TraceEvent::Kind::kFree);
  std::remove(path.c_str());
}

TEST(PoolComposition, RemovingTheOomHookTakesItOutOfThePath) {
  VirtualBackend backend;
  CachingPool pool(backend, PoolOptions{.limit_bytes = 16 * kMiB});
  int calls = 0;
  pool.set_oom_hook([&](const OomEvent&) {
    ++calls;
    return false;
  });
  EXPECT_FALSE(pool.allocate(32 * kMiB).ok());
  EXPECT_EQ(calls, 1);
  pool.set_oom_hook(nullptr);
  EXPECT_FALSE(pool.allocate(32 * kMiB).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(pool.stats().ooms, 2u);
}

TEST(PoolComposition, ResetPeakStatsStartsPeaksFromNow) {
  VirtualBackend backend;
  CachingPool pool(backend);
  void* a = *pool.allocate(64 * kMiB);
  void* b = *pool.allocate(kMiB);
  ASSERT_TRUE(pool.deallocate(a).ok());
  PoolStats s = pool.stats();
  EXPECT_EQ(s.peak_allocated_bytes, 65 * kMiB);
  EXPECT_GE(s.peak_reserved_bytes, 65 * kMiB);
  pool.trim(0);
  pool.reset_peak_stats();
  s = pool.stats();
  EXPECT_EQ(s.peak_allocated_bytes, kMiB);
  EXPECT_EQ(s.peak_requested_bytes, kMiB);
  EXPECT_EQ(s.peak_active_bytes, kMiB);
  EXPECT_EQ(s.peak_reserved_bytes, s.reserved_bytes);
  EXPECT_LT(s.peak_reserved_bytes, 65 * kMiB);
  EXPECT_EQ(s.allocations, 2u);
  void* c = *pool.allocate(8 * kMiB);
  EXPECT_EQ(pool.stats().peak_allocated_bytes, 9 * kMiB);
  for (void* p : {b, c}) ASSERT_TRUE(pool.deallocate(p).ok());
}

TEST(PoolComposition, SnapshotShowsEverySegmentTiledByItsBlocks) {
  for (PoolGrowth growth : {PoolGrowth::kMapping, PoolGrowth::kSegments}) {
    SCOPED_TRACE(growth == PoolGrowth::kMapping ? "mapping" : "segments");
    VirtualBackend backend(8 * kGiB);
    CachingPool pool(backend, PoolOptions{.growth = growth});
    const TagId t = *pool.tag("weights");
    void* small = *pool.allocate(1000, 0x51);
    void* large = *pool.allocate(5 * kMiB, kDefaultStream, t);
    void* freed = *pool.allocate(3 * kMiB);
    ASSERT_TRUE(pool.deallocate(freed).ok());
    const PoolSnapshot snap = pool.snapshot();
    std::uint64_t mapped = 0;
    std::size_t allocated = 0;
    bool saw_small = false;
    bool saw_large = false;
    for (const SegmentSnapshot& seg : snap.segments) {
      std::uintptr_t expect = seg.address;
      std::uint64_t seg_mapped = 0;
      for (const BlockSnapshot& b : seg.blocks) {
        EXPECT_EQ(b.address, expect) << "blocks must tile the segment";
        expect += b.size;
        if (b.state != BlockSnapshot::State::kUnmapped) seg_mapped += b.size;
        if (b.state != BlockSnapshot::State::kAllocated) continue;
        ++allocated;
        if (b.address == reinterpret_cast<std::uintptr_t>(small)) {
          saw_small = true;
          EXPECT_TRUE(seg.small);
          EXPECT_EQ(b.requested, 1000u);
          EXPECT_EQ(b.stream, 0x51u);
        }
        if (b.address == reinterpret_cast<std::uintptr_t>(large)) {
          saw_large = true;
          EXPECT_FALSE(seg.small);
          EXPECT_EQ(b.size, 5 * kMiB);
          EXPECT_EQ(b.tag, t);
        }
      }
      EXPECT_EQ(expect, seg.address + seg.size);
      EXPECT_EQ(seg.mapped_bytes, seg_mapped);
      mapped += seg.mapped_bytes;
    }
    EXPECT_TRUE(saw_small && saw_large);
    EXPECT_EQ(allocated, 2u);
    EXPECT_EQ(mapped, pool.stats().reserved_bytes);
    for (void* p : {small, large}) ASSERT_TRUE(pool.deallocate(p).ok());
  }
}

}  // namespace
}  // namespace memcoord
