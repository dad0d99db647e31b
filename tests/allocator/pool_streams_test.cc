#include <gtest/gtest.h>

#include <algorithm>

#include "allocator/caching_pool.h"
#include "common/bytes.h"
#include "stream_test_backend.h"

namespace memcoord {
namespace {

constexpr StreamId kStreamA = 0xA000;
constexpr StreamId kStreamB = 0xB000;

TEST(PoolStreams, SameStreamReuseNeedsNoWait) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  void* p = *pool.allocate(4 * kMiB, kStreamA);
  ASSERT_TRUE(pool.deallocate(p).ok());
  void* q = *pool.allocate(4 * kMiB, kStreamA);
  EXPECT_EQ(p, q);
  EXPECT_TRUE(backend.waits.empty());
  ASSERT_TRUE(pool.deallocate(q).ok());
}

TEST(PoolStreams, CrossStreamReuseWaitsOnTheDeviceNeverTheHost) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  void* p = *pool.allocate(4 * kMiB, kStreamA);
  ASSERT_TRUE(pool.deallocate(p).ok());
  backend.busy.insert(kStreamA);  // A still has work queued on the freed block
  void* q = *pool.allocate(4 * kMiB, kStreamB);
  EXPECT_EQ(p, q);                      // reused from A's cache ...
  ASSERT_EQ(backend.waits.size(), 1u);  // ... after B waits on A's queued work
  EXPECT_EQ(backend.waits[0], std::make_pair(kStreamB, kStreamA));
  EXPECT_TRUE(backend.synchronized.empty());  // and the host never blocked
  ASSERT_TRUE(pool.deallocate(q).ok());
}

TEST(PoolStreams, RecordStreamMakesTheNextUserWaitForTheExtraStream) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  void* p = *pool.allocate(kMiB, kStreamA);
  ASSERT_TRUE(pool.record_stream(p, kStreamB).ok());
  ASSERT_TRUE(pool.deallocate(p).ok());
  void* q = *pool.allocate(kMiB, kStreamA);
  EXPECT_EQ(p, q);
  ASSERT_EQ(backend.waits.size(), 1u);
  EXPECT_EQ(backend.waits[0], std::make_pair(kStreamA, kStreamB));
  ASSERT_TRUE(pool.deallocate(q).ok());
  int local = 0;
  EXPECT_EQ(pool.record_stream(&local, kStreamB).code(), StatusCode::kNotFound);
}

TEST(PoolStreams, TrimSynchronizesOnlyTheStreamsThatUsedTheMemory) {
  testing::StreamTestBackend backend;
  // No marker at frees: with one (recorded on the then idle stream, so reached) the block would be idle and
  // need no synchronization, depending on how long the test took since its miss.
  CachingPool pool(backend, PoolOptions{.large_free_marker_interval_us = testing::kNoFreeMarkers});
  void* p = *pool.allocate(64 * kMiB, kStreamA);
  ASSERT_TRUE(pool.deallocate(p).ok());
  backend.busy.insert(kStreamA);
  TrimResult r = pool.trim(0);
  EXPECT_GE(r.released_bytes, 64 * kMiB);
  EXPECT_NE(std::find(backend.synchronized.begin(), backend.synchronized.end(), kStreamA),
            backend.synchronized.end());
  EXPECT_EQ(std::find(backend.synchronized.begin(), backend.synchronized.end(), kStreamB),
            backend.synchronized.end());
}

TEST(PoolStreams, BusyCacheIsNotUnmappedOnTheAllocationPath) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  // Fragment A's cache so a large request misses, with A busy: the pool must grow, not synchronize A.
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(*pool.allocate(2 * kMiB, kStreamA));
  for (int i = 0; i < 16; i += 2) ASSERT_TRUE(pool.deallocate(blocks[i]).ok());
  backend.busy.insert(kStreamA);
  void* big = *pool.allocate(12 * kMiB, kStreamB);
  EXPECT_TRUE(backend.synchronized.empty());
  ASSERT_TRUE(pool.deallocate(big).ok());
  for (int i = 1; i < 16; i += 2) ASSERT_TRUE(pool.deallocate(blocks[i]).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

// allocate_cached: the hit allocate() would make, only when it needs nothing outside the pool.
TEST(PoolStreams, AllocateCachedServesOnlyOwnStreamHitsWithoutWaits) {
  testing::StreamTestBackend backend;
  PoolOptions options;
  options.thread_cache_bytes = 0;  // the pool's own cache (a thread cache would keep p for kMiB only)
  CachingPool pool(backend, options);
  EXPECT_EQ(pool.allocate_cached(kMiB, kStreamA), nullptr);  // a stream the pool has not seen
  EXPECT_EQ(pool.stats().allocations, 0u);
  EXPECT_EQ(pool.stats().backend_allocations, 0u);
  void* p = *pool.allocate(kMiB, kStreamA);
  ASSERT_TRUE(pool.deallocate(p).ok());
  const PoolStats before = pool.stats();
  EXPECT_EQ(pool.allocate_cached(2 * kMiB, kStreamA), nullptr);  // nothing that large cached: a miss
  EXPECT_EQ(pool.allocate_cached(0, kStreamA), nullptr);         // bad input is allocate()'s to report
  EXPECT_EQ(pool.allocate_cached(kMiB, kStreamB), nullptr);      // A's block on B would need a wait
  EXPECT_EQ(pool.stats().allocations, before.allocations);       // refusals change nothing
  EXPECT_EQ(pool.stats().backend_allocations, before.backend_allocations);
  void* q = pool.allocate_cached(kMiB - 100, kStreamA);
  EXPECT_EQ(q, p);
  const PoolStats hit = pool.stats();
  EXPECT_EQ(hit.allocations, before.allocations + 1);
  EXPECT_EQ(hit.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(hit.allocated_bytes, kMiB);
  EXPECT_EQ(hit.requested_bytes, kMiB - 100);
  EXPECT_EQ(hit.backend_allocations, before.backend_allocations);
  ASSERT_TRUE(pool.record_stream(q, kStreamB).ok());
  ASSERT_TRUE(pool.deallocate(q).ok());
  EXPECT_EQ(pool.allocate_cached(kMiB, kStreamA), nullptr);  // recorded on B: reuse needs a wait
  EXPECT_TRUE(backend.waits.empty());
  void* r = *pool.allocate(kMiB, kStreamA);  // allocate() makes that wait
  EXPECT_EQ(r, p);
  ASSERT_EQ(backend.waits.size(), 1u);
  ASSERT_TRUE(pool.deallocate(r).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(PoolStreams, AllocateCachedCountsTagsAndTheRecorderLikeAllocate) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  const TagId tag = *pool.tag("activations");
  ASSERT_TRUE(pool.deallocate(*pool.allocate(4096, kStreamA, tag)).ok());
  EXPECT_TRUE(pool.tag_usage().empty());  // freed (kept in this thread's cache): nothing live under the tag
  EXPECT_EQ(pool.allocate_cached(4096, kStreamA, static_cast<TagId>(tag + 1)), nullptr);  // unknown tag
  void* p = pool.allocate_cached(4096, kStreamA, tag);
  ASSERT_NE(p, nullptr);
  const std::vector<TagUsage> usage = pool.tag_usage();
  ASSERT_FALSE(usage.empty());
  EXPECT_EQ(usage[0].tag, "activations");
  EXPECT_EQ(usage[0].live_bytes, 4096u);
  ASSERT_TRUE(pool.deallocate(p).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(PoolStreams, TooManyStreamsIsAClearError) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  std::vector<void*> blocks;
  for (StreamId s = 1; s < 64; ++s) blocks.push_back(*pool.allocate(512, s * 16));
  Result<void*> r = pool.allocate(512, 0xFFFF0);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("streams"), std::string::npos);
  for (void* p : blocks) ASSERT_TRUE(pool.deallocate(p).ok());
}

// A block used on a stream past the 64 the pool indexes (Tensor.record_stream in a program that cycles
// through many streams) is still never reused before that stream's work: its free synchronizes the stream.
TEST(PoolStreams, RecordStreamPastTheIndexedStreamsSynchronizesThatStreamAtTheFree) {
  testing::StreamTestBackend backend;
  CachingPool pool(backend);
  std::vector<void*> blocks;
  for (StreamId s = 1; s < 64; ++s) blocks.push_back(*pool.allocate(512, s * 16));  // and the default stream
  constexpr StreamId kUnindexed = 0xFFFF0;
  void* p = *pool.allocate(kMiB, 16);
  ASSERT_TRUE(pool.record_stream(p, kUnindexed).ok());
  ASSERT_TRUE(pool.record_stream(p, kUnindexed).ok());
  EXPECT_TRUE(backend.synchronized.empty());
  ASSERT_TRUE(pool.deallocate(p).ok());
  EXPECT_EQ(backend.synchronized, std::vector<StreamId>{kUnindexed});  // once, at the free
  void* q = *pool.allocate(kMiB, 16);
  ASSERT_TRUE(pool.deallocate(q).ok());
  EXPECT_EQ(backend.synchronized.size(), 1u);  // the next block's free waits for nothing more
  for (void* b : blocks) ASSERT_TRUE(pool.deallocate(b).ok());
  EXPECT_TRUE(pool.check_invariants().ok());
}

}  // namespace
}  // namespace memcoord
