// Packing at the high-water mark when the stream that last used the free memory still has queued work, as
// on a GPU in training (kernels are queued ahead of the CPU, so the stream is almost never idle). Idle blocks
// go first. A busy block is packed after the host waits for its last use, up to the first marker recorded
// after its free (a miss records one, and so does a large free while the pool grows: stream_marks.h), not to
// the stream's end: the GPU keeps the work queued after that marker. Without pressure the pool waits only for
// a marker older than the miss's own (waiting for that one would drain the queue) and otherwise grows; under
// pressure it waits for any marker, and backends without markers synchronize the stream. Before
// PoolOptions::pack_waits_for_streams, busy chunks were skipped and a real run reserved ~4% more than the
// replay of its own trace (GPT-2 fp32 on the H200: 1.039 against 1.0047).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <optional>
#include <thread>
#include <vector>

#include "allocator/caching_pool.h"
#include "stream_test_backend.h"

namespace memcoord {
namespace {

constexpr std::size_t kMiB = 1 << 20;
const StreamId kTrainingStream = 7;

// A mapping pool on a stream test backend whose training stream holds A (64 MiB) then B (64 MiB): the pool
// is at its high-water mark. A miss of D (96 MiB) cannot fit in A's place once A is freed (B follows it), so
// it either packs A's chunks (reserved 160 MiB) or grows (224 MiB).
struct TwoBlocksAtTheMark {
  // `free_markers`: large frees record markers (at each, as PoolOptions::large_free_marker_interval_us 0
  // does); else never (an interval of an hour). `capacity`: the device's bytes (small ones make pressure).
  // `growing_window_ms`: PoolOptions::free_marker_growing_window_ms (0: the pool never counts as growing, as
  // in a steady loop whose misses are seconds apart). `pack_waits_at_mark`, `limit_bytes`: PoolOptions'.
  explicit TwoBlocksAtTheMark(bool backend_markers = true, bool pack_waits_for_streams = true,
                              bool free_markers = false, std::uint64_t capacity = 8ULL << 30,
                              std::uint32_t growing_window_ms = 1000, bool pack_waits_at_mark = true,
                              std::uint64_t limit_bytes = 0)
      : backend(capacity) {
    backend.markers = backend_markers;  // read when the allocations below record their markers
    PoolOptions options;
    options.growth = PoolGrowth::kMapping;
    options.grow_to_unit_end = false;  // exact shortfalls: the figures below count units miss by miss
    options.pack_waits_for_streams = pack_waits_for_streams;
    options.large_free_marker_interval_us = free_markers ? 0 : testing::kNoFreeMarkers;
    options.free_marker_growing_window_ms = growing_window_ms;
    options.pack_waits_at_mark = pack_waits_at_mark;
    options.limit_bytes = limit_bytes;
    pool.emplace(backend, options);
    a = *pool->allocate(64 * kMiB, kTrainingStream);
    b = *pool->allocate(64 * kMiB, kTrainingStream);
  }
  Result<void*> allocate_d() { return pool->allocate(96 * kMiB, kTrainingStream); }
  // Frees B, D and `others`, then destroys the pool (which gives its markers back).
  void close(Result<void*>& d, std::initializer_list<void*> others = {}) {
    EXPECT_TRUE(pool->deallocate(b).ok());
    if (d.ok()) {
      EXPECT_TRUE(pool->deallocate(*d).ok());
    }
    for (void* p : others) EXPECT_TRUE(pool->deallocate(p).ok());
    pool.reset();
  }
  std::size_t synchronizations() const {
    return static_cast<std::size_t>(
        std::count(backend.synchronized.begin(), backend.synchronized.end(), kTrainingStream));
  }

  testing::StreamTestBackend backend;
  std::optional<CachingPool> pool;
  void* a = nullptr;
  void* b = nullptr;
};

struct Outcome {
  std::uint64_t peak_reserved = 0;
  std::size_t synchronizations = 0;
  std::vector<MarkerId> marker_waits;
  std::uint64_t pack_waits = 0;  // as the pool's stats count them
  std::uint64_t pack_stream_syncs = 0;
  std::uint64_t pack_drains = 0;
  std::size_t markers_recorded = 0;
  std::size_t markers_released = 0;  // after the pool is gone
};

// A is freed while its stream is busy, then D misses.
struct HighWaterMiss {
  bool pack_waits_for_streams = true;
  bool backend_markers = true;
  bool free_markers = false;
  std::uint64_t capacity = 8ULL << 30;
  std::uint32_t growing_window_ms = 1000;
  bool pack_waits_at_mark = true;
  std::uint64_t limit_bytes = 0;
};

Outcome RunHighWaterMiss(const HighWaterMiss& how) {
  TwoBlocksAtTheMark scene(how.backend_markers, how.pack_waits_for_streams, how.free_markers, how.capacity,
                           how.growing_window_ms, how.pack_waits_at_mark, how.limit_bytes);
  scene.backend.busy.insert(kTrainingStream);  // the kernels that used A are still queued
  EXPECT_TRUE(scene.pool->deallocate(scene.a).ok());
  auto d = scene.allocate_d();
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  const PoolStats stats = scene.pool->stats();
  Outcome outcome{stats.peak_reserved_bytes, scene.synchronizations(), scene.backend.marker_waits,
                  stats.pack_waits,          stats.pack_stream_syncs,  stats.pack_drains};
  scene.close(d);
  outcome.markers_recorded = scene.backend.recorded_markers();
  outcome.markers_released = scene.backend.released_markers;
  return outcome;
}

// A large free while the pool grows records a marker (3); D's miss records 4 and waits for 3 only.
TEST(PoolPackingStreams, WaitsForTheMarkerOfTheBusyBlocksFreeAndPacksInsteadOfGrowing) {
  const Outcome packed = RunHighWaterMiss({.free_markers = true});
  EXPECT_EQ(packed.peak_reserved, 160 * kMiB);  // A's 64 MiB unmapped, then 96 MiB mapped
  // Markers: A's miss (1) and B's (2), reached at once on the idle stream; A's free (3); D's miss (4); B's
  // and D's frees when the scene closes (5, 6).
  EXPECT_EQ(packed.markers_recorded, 6u);
  EXPECT_EQ(packed.marker_waits, std::vector<MarkerId>{3});
  EXPECT_EQ(packed.synchronizations, 0u);
  EXPECT_EQ(packed.pack_waits, 1u);
  EXPECT_EQ(packed.pack_drains, 0u);  // marker 3 is older than D's own
  EXPECT_EQ(packed.pack_stream_syncs, 0u);
  EXPECT_EQ(packed.markers_released, packed.markers_recorded);  // every event goes back
}

// A pool that is not growing (its last miss longer ago than the window, as in a steady training loop) still
// records markers at large frees, kSteadyMarkerSpacing times sparser: a block freed at the end of one step
// is then packed at the next step's miss after a wait for that marker, where the miss's own marker alone
// would have made the pool grow (224 MiB). With an interval of 0 the spacing is 0 too: A's free records 3.
TEST(PoolPackingStreams, OutsideTheGrowingWindowLargeFreesStillRecordMarkersAndTheMissPacks) {
  const Outcome packed = RunHighWaterMiss({.free_markers = true, .growing_window_ms = 0});
  EXPECT_EQ(packed.peak_reserved, 160 * kMiB);
  EXPECT_EQ(packed.marker_waits, std::vector<MarkerId>{3});
  EXPECT_EQ(packed.synchronizations, 0u);
  EXPECT_EQ(packed.pack_waits, 1u);
  EXPECT_EQ(packed.markers_released, packed.markers_recorded);
}

// Without a marker between A's free and D's miss, only D's own marker covers A: waiting for it would drain
// the stream's queue, so at the mark (no pressure) the pool grows instead. (A's whole units, 60 MiB, are
// under CorePool::kDrainShortfallUnits' 80 MiB: the next test is the other side of that line.)
TEST(PoolPackingStreams, ABlockCoveredOnlyByTheMissesOwnMarkerIsNotDrainedForAtTheMark) {
  const Outcome grown = RunHighWaterMiss({.free_markers = false});
  EXPECT_EQ(grown.peak_reserved, 224 * kMiB);
  EXPECT_EQ(grown.markers_recorded, 3u);
  EXPECT_TRUE(grown.marker_waits.empty());
  EXPECT_EQ(grown.synchronizations, 0u);
  EXPECT_EQ(grown.pack_waits, 0u);
}

// A shortfall of at least four units (80 MiB) that the stream's own free units can cover is worth one drain:
// only D's own marker covers A (no marker at frees), yet D waits for it and takes A's 200 MiB instead of
// growing by 240 MiB. Without this the footprint depended on where the frees' markers fell: on the H200 one
// of three alternating GPT-2/ResNet-50 processes reserved 478 MB more than the other two.
TEST(PoolPackingStreams, ALargeShortfallAtTheMarkWaitsForTheMissesOwnMarkerInsteadOfGrowing) {
  testing::StreamTestBackend backend;
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;  // exact shortfalls, as in TwoBlocksAtTheMark
  options.large_free_marker_interval_us = testing::kNoFreeMarkers;
  CachingPool pool(backend, options);
  void* a = *pool.allocate(200 * kMiB, kTrainingStream);  // marker 1, reached: the stream is idle
  void* b = *pool.allocate(64 * kMiB, kTrainingStream);   // marker 2
  backend.busy.insert(kTrainingStream);
  ASSERT_TRUE(pool.deallocate(a).ok());
  Result<void*> d = pool.allocate(240 * kMiB, kTrainingStream);  // B follows A: D does not fit in A's place
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const PoolStats stats = pool.stats();
  EXPECT_EQ(stats.peak_reserved_bytes, 304 * kMiB);           // B 64 + D 240; growing would have reached 504
  EXPECT_EQ(backend.marker_waits, std::vector<MarkerId>{3});  // D's own marker, once
  EXPECT_EQ(stats.pack_waits, 1u);
  EXPECT_EQ(stats.pack_drains, 1u);
  EXPECT_EQ(stats.pack_stream_syncs, 0u);
  EXPECT_EQ(std::count(backend.synchronized.begin(), backend.synchronized.end(), kTrainingStream), 0);
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  ASSERT_TRUE(pool.deallocate(b).ok());
  ASSERT_TRUE(pool.deallocate(*d).ok());
}

// A busy free block that holds no whole unit (its units are shared with live neighbours) has nothing to
// unmap, so packing never waits for it. On the H200, step 4 of alternating (a GPT-2 step) waited 49, 20 and
// 49 ms in three processes at a miss that then unmapped no unit, when the pool waited before it looked.
TEST(PoolPackingStreams, ABusyFreeBlockWithoutAWholeUnitIsNotWaitedFor) {
  testing::StreamTestBackend backend;
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;           // exact shortfalls, as in TwoBlocksAtTheMark
  options.large_free_marker_interval_us = 0;  // every large free records a marker: Y's is older than Z's
  CachingPool pool(backend, options);
  void* u = *pool.allocate(30 * kMiB, kTrainingStream);  // units [0, 20) and [20, 30)
  void* v = *pool.allocate(30 * kMiB, kTrainingStream);  // units [30, 40) and [40, 60)
  ASSERT_TRUE(pool.deallocate(u).ok());                  // idle: [0, 30) free
  void* w = *pool.allocate(25 * kMiB, kTrainingStream);  // [0, 25): the unit [20, 30) is in use
  void* y = *pool.allocate(5 * kMiB, kTrainingStream);   // [25, 30)
  backend.busy.insert(kTrainingStream);
  ASSERT_TRUE(pool.deallocate(y).ok());                          // busy, free, and no whole unit inside it
  Result<void*> z = pool.allocate(100 * kMiB, kTrainingStream);  // at the mark: packing looks for units
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  const PoolStats stats = pool.stats();
  EXPECT_TRUE(backend.marker_waits.empty());
  EXPECT_EQ(stats.pack_waits, 0u);
  EXPECT_EQ(stats.pack_stream_syncs, 0u);
  EXPECT_EQ(stats.peak_reserved_bytes, 160 * kMiB);  // nothing could be packed: the pool grew
  EXPECT_TRUE(pool.check_invariants().ok()) << pool.check_invariants().ToString();
  for (void* p : {v, w, *z}) ASSERT_TRUE(pool.deallocate(p).ok());
}

// The same shortfall with A's units on another stream's queue: the miss never waits for another stream's
// work, so it grows.
TEST(PoolPackingStreams, ALargeShortfallIsNotDrainedForWithAnotherStreamsFreeUnits) {
  constexpr StreamId kOtherStream = 9;
  testing::StreamTestBackend backend;
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;  // exact shortfalls, as in TwoBlocksAtTheMark
  options.large_free_marker_interval_us = testing::kNoFreeMarkers;
  CachingPool pool(backend, options);
  void* a = *pool.allocate(200 * kMiB, kOtherStream);
  void* b = *pool.allocate(64 * kMiB, kTrainingStream);
  backend.busy.insert(kOtherStream);
  ASSERT_TRUE(pool.deallocate(a).ok());
  Result<void*> d = pool.allocate(240 * kMiB, kTrainingStream);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_GE(pool.stats().peak_reserved_bytes, 500 * kMiB);
  EXPECT_TRUE(backend.marker_waits.empty());
  EXPECT_EQ(pool.stats().pack_waits, 0u);
  EXPECT_EQ(pool.stats().pack_drains, 0u);
  ASSERT_TRUE(pool.deallocate(b).ok());
  ASSERT_TRUE(pool.deallocate(*d).ok());
}

// Under pressure (a 200 MiB device: D's 96 MiB would leave less than its reserve free) a drain beats
// running out: the pool waits for D's own marker, or synchronizes the stream on a backend without markers.
TEST(PoolPackingStreams, UnderPressureABlockCoveredOnlyByTheMissesMarkerIsWaitedFor) {
  const Outcome packed = RunHighWaterMiss({.capacity = 200 * kMiB});
  EXPECT_LT(packed.peak_reserved, 224 * kMiB);
  EXPECT_EQ(packed.marker_waits, std::vector<MarkerId>{3});
  EXPECT_EQ(packed.synchronizations, 0u);
  EXPECT_EQ(packed.pack_waits, 1u);
  EXPECT_EQ(packed.pack_stream_syncs, 0u);
}

// PoolOptions::pack_waits_at_mark off: at the mark a busy block is not waited for even behind a marker older
// than the miss's own (A's free records 3, D's miss 4), so the pool grows where it packed A after a wait for
// 3; the markers are recorded as before, since drains and pressure still wait for them. (On an H100 the one
// such wait in the alternating pair's first step cost 7-18 ms of host time for one 20 MiB unit.)
TEST(PoolPackingStreams, WithoutMarkWaitsABusyBlockBehindAnOlderMarkerIsNotWaitedForAndThePoolGrows) {
  const Outcome waited = RunHighWaterMiss({.free_markers = true});
  EXPECT_EQ(waited.peak_reserved, 160 * kMiB);  // A's 64 MiB unmapped, then 96 MiB mapped
  EXPECT_EQ(waited.marker_waits, std::vector<MarkerId>{3});
  EXPECT_EQ(waited.pack_waits, 1u);
  const Outcome grown = RunHighWaterMiss({.free_markers = true, .pack_waits_at_mark = false});
  EXPECT_EQ(grown.peak_reserved, 224 * kMiB);  // B 64 + A's 64 still mapped + D 96
  EXPECT_TRUE(grown.marker_waits.empty());
  EXPECT_EQ(grown.synchronizations, 0u);
  EXPECT_EQ(grown.pack_waits, 0u);
  EXPECT_EQ(grown.pack_stream_syncs, 0u);
  EXPECT_EQ(grown.markers_recorded, 6u);
  EXPECT_EQ(grown.markers_recorded, waited.markers_recorded);
  EXPECT_EQ(grown.markers_released, grown.markers_recorded);
}

// Under a limit D's 96 MiB would pass (200 MiB: 224 with A's memory still mapped) the option changes
// nothing: running out is worse than a wait, so the pool still waits for D's own marker and packs A.
TEST(PoolPackingStreams, WithoutMarkWaitsUnderALimitABusyBlockIsStillWaitedFor) {
  for (const bool at_mark : {true, false}) {
    SCOPED_TRACE(at_mark ? "mark_waits on" : "mark_waits off");
    const Outcome packed = RunHighWaterMiss({.pack_waits_at_mark = at_mark, .limit_bytes = 200 * kMiB});
    EXPECT_EQ(packed.peak_reserved, 200 * kMiB);  // 24 of A's MiB (its 4 MiB end and a unit) unmapped
    EXPECT_EQ(packed.marker_waits, std::vector<MarkerId>{3});
    EXPECT_EQ(packed.synchronizations, 0u);
    EXPECT_EQ(packed.pack_waits, 1u);
    EXPECT_EQ(packed.pack_stream_syncs, 0u);
    EXPECT_EQ(packed.pack_drains, 0u);
  }
}

TEST(PoolPackingStreams, UnderPressureWithoutBackendMarkersTheStreamIsSynchronized) {
  const Outcome packed = RunHighWaterMiss({.backend_markers = false, .capacity = 200 * kMiB});
  EXPECT_LT(packed.peak_reserved, 224 * kMiB);
  EXPECT_EQ(packed.synchronizations, 1u);  // once: the stream is idle afterwards
  EXPECT_TRUE(packed.marker_waits.empty());
  EXPECT_EQ(packed.pack_waits, 1u);
  EXPECT_EQ(packed.pack_stream_syncs, 1u);
}

TEST(PoolPackingStreams, WithoutBackendMarkersAtTheMarkTheStreamIsNotSynchronized) {
  const Outcome grown = RunHighWaterMiss({.backend_markers = false, .free_markers = true});
  EXPECT_EQ(grown.peak_reserved, 224 * kMiB);
  EXPECT_EQ(grown.synchronizations, 0u);
  EXPECT_EQ(grown.pack_waits, 0u);
}

TEST(PoolPackingStreams, WithoutWaitingABusyStreamMakesThePoolGrowAndRecordsNoMarker) {
  const Outcome grown = RunHighWaterMiss({.pack_waits_for_streams = false, .free_markers = true});
  EXPECT_EQ(grown.peak_reserved, 224 * kMiB);
  EXPECT_EQ(grown.synchronizations, 0u);
  EXPECT_TRUE(grown.marker_waits.empty());
  EXPECT_EQ(grown.pack_waits, 0u);
  EXPECT_EQ(grown.markers_recorded, 0u);  // capture pools run so: no event on a capturing stream
}

TEST(PoolPackingStreams, AnIdleStreamPacksWithoutWaiting) {
  TwoBlocksAtTheMark scene;
  ASSERT_TRUE(scene.pool->deallocate(scene.a).ok());
  auto d = scene.allocate_d();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(scene.pool->stats().peak_reserved_bytes, 160 * kMiB);
  EXPECT_TRUE(scene.backend.synchronized.empty());
  EXPECT_TRUE(scene.backend.marker_waits.empty());
  EXPECT_EQ(scene.pool->stats().pack_waits, 0u);
  scene.close(d);
}

// Idle blocks go first: a busy block is waited for only when the idle ones do not give what the miss needs
// (here the busy block C is the larger, which size order alone would take first).
TEST(PoolPackingStreams, IdleBlocksArePackedBeforeABusyBlockIsWaitedFor) {
  testing::StreamTestBackend backend;
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;          // exact shortfalls, as in TwoBlocksAtTheMark
  options.large_map_unit_bytes = 20 * kMiB;  // the grid of the figures below
  options.large_free_marker_interval_us = 0;
  CachingPool pool(backend, options);
  void* a = *pool.allocate(64 * kMiB, kTrainingStream);
  void* b = *pool.allocate(64 * kMiB, kTrainingStream);
  void* c = *pool.allocate(96 * kMiB, kTrainingStream);
  void* e = *pool.allocate(64 * kMiB, kTrainingStream);
  void* g = *pool.allocate(64 * kMiB, kTrainingStream);
  // G goes back to the device: reserved 288 MiB under a mark of 352, so D (100 MiB, at the top) needs 36 MiB
  // of packing.
  ASSERT_TRUE(pool.deallocate(g).ok());
  pool.trim(0);
  ASSERT_EQ(pool.stats().reserved_bytes, 288 * kMiB);
  ASSERT_TRUE(pool.deallocate(a).ok());  // idle: its stream had nothing queued
  backend.busy.insert(kTrainingStream);
  ASSERT_TRUE(pool.deallocate(c).ok());  // busy, behind a marker older than D's miss
  const std::size_t syncs_before = backend.synchronized.size();
  auto d = pool.allocate(100 * kMiB, kTrainingStream);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(backend.marker_waits.empty());
  EXPECT_EQ(backend.synchronized.size(), syncs_before);
  EXPECT_EQ(pool.stats().pack_waits, 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, (288 - 44 + 100) * kMiB);  // A's top 44 MiB (whole units) unmapped
  EXPECT_EQ(pool.stats().peak_reserved_bytes, 352 * kMiB);
  for (void* p : {b, e, *d}) EXPECT_TRUE(pool.deallocate(p).ok());
}

// While a CUDA graph capture is underway on the device (CachingPool::set_captures_underway) an event or
// stream query would invalidate it: a large free records no marker and a miss at the mark grows without
// packing, querying nothing. Once the capture is over, the next miss packs again.
TEST(PoolPackingStreams, DuringACaptureNothingIsQueriedOrRecordedAndTheMissGrows) {
  TwoBlocksAtTheMark scene(/*backend_markers=*/true, /*pack_waits_for_streams=*/true, /*free_markers=*/true);
  scene.pool->set_captures_underway(true);
  const std::size_t queries_before = scene.backend.queries;
  const std::size_t markers_before = scene.backend.recorded_markers();
  scene.backend.busy.insert(kTrainingStream);
  ASSERT_TRUE(scene.pool->deallocate(scene.a).ok());
  auto d = scene.allocate_d();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(scene.backend.queries, queries_before);
  EXPECT_EQ(scene.backend.recorded_markers(), markers_before);
  EXPECT_TRUE(scene.backend.synchronized.empty());
  EXPECT_EQ(scene.pool->stats().peak_reserved_bytes, 224 * kMiB);
  scene.pool->set_captures_underway(false);
  scene.backend.busy.erase(kTrainingStream);
  auto e = scene.pool->allocate(96 * kMiB, kTrainingStream);  // at the new mark: packs A's idle units
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(scene.pool->stats().peak_reserved_bytes, (224 - 64 + 96) * kMiB);  // not 320: A's units moved
  EXPECT_GT(scene.backend.queries, queries_before);
  scene.close(d, {*e});
}

// A freed while its stream is busy, then a miss elsewhere (marker 3, a small block), then more work queued;
// `gpu_passed_marker`: the GPU got past marker 3 before D's miss (marker 4) packs A.
struct EarlierMissOutcome {
  std::size_t markers_recorded = 0;
  std::vector<MarkerId> marker_waits;
  std::size_t synchronizations = 0;
  bool stream_still_busy = false;
  std::uint64_t peak_reserved = 0;
  std::uint64_t pack_waits = 0;
};

EarlierMissOutcome PackABlockFreedBeforeAnEarlierMiss(bool gpu_passed_marker) {
  TwoBlocksAtTheMark scene;
  scene.backend.busy.insert(kTrainingStream);
  EXPECT_TRUE(scene.pool->deallocate(scene.a).ok());
  void* small = *scene.pool->allocate(4096, kTrainingStream);          // a miss of the small arena: marker 3
  if (gpu_passed_marker) scene.backend.pass_markers(kTrainingStream);  // later work is still queued
  auto d = scene.allocate_d();                                         // marker 4
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  EarlierMissOutcome out{scene.backend.recorded_markers(),
                         scene.backend.marker_waits,
                         scene.synchronizations(),
                         scene.backend.busy.count(kTrainingStream) == 1,
                         scene.pool->stats().peak_reserved_bytes,
                         scene.pool->stats().pack_waits};
  scene.close(d, {small});
  return out;
}

// D's miss packs A by waiting for marker 3 only, the point after A's last use; the work queued after it
// stays queued.
TEST(PoolPackingStreams, ABlockFreedBeforeAnEarlierMissWaitsOnlyForThatMissesMarker) {
  const EarlierMissOutcome out = PackABlockFreedBeforeAnEarlierMiss(/*gpu_passed_marker=*/false);
  EXPECT_EQ(out.markers_recorded, 4u);
  EXPECT_EQ(out.marker_waits, std::vector<MarkerId>{3});
  EXPECT_EQ(out.synchronizations, 0u);
  EXPECT_TRUE(out.stream_still_busy);                   // nothing drained the queue
  EXPECT_EQ(out.peak_reserved, 160 * kMiB + 2 * kMiB);  // + the small arena's chunk
  EXPECT_EQ(out.pack_waits, 1u);
}

// The GPU already passed the marker after A's free: A is idle and packed without any wait, though work
// queued later keeps the stream busy (a stream query alone would have said busy).
TEST(PoolPackingStreams, APassedMarkerMakesABusyStreamsBlockIdleWithoutAWait) {
  const EarlierMissOutcome out = PackABlockFreedBeforeAnEarlierMiss(/*gpu_passed_marker=*/true);
  EXPECT_TRUE(out.marker_waits.empty());
  EXPECT_EQ(out.synchronizations, 0u);
  EXPECT_TRUE(out.stream_still_busy);
  EXPECT_EQ(out.pack_waits, 0u);
  EXPECT_EQ(out.peak_reserved, 160 * kMiB + 2 * kMiB);
}

// A block another stream was recorded on is never waited for by marker (its other stream's work is not
// covered by the owner stream's markers) nor, when packing, synchronized: the pool grows instead.
TEST(PoolPackingStreams, ABlockRecordedOnAnotherStreamIsNotPackedWhileBusy) {
  TwoBlocksAtTheMark scene;
  const StreamId side = 9;
  ASSERT_TRUE(scene.pool->record_stream(scene.a, side).ok());
  scene.backend.busy.insert(kTrainingStream);
  scene.backend.busy.insert(side);
  ASSERT_TRUE(scene.pool->deallocate(scene.a).ok());
  auto d = scene.allocate_d();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(scene.backend.marker_waits.empty());
  EXPECT_TRUE(scene.backend.synchronized.empty());
  EXPECT_EQ(scene.pool->stats().peak_reserved_bytes, 224 * kMiB);
  scene.close(d);
}

// A burst of large frees within the marker interval records a marker for the first free only, and the last
// ones are covered by nothing until the next marker. The pool's next call on the stream once the interval
// has passed records the marker the burst deferred, so the next miss waits for it and packs, where D's own
// marker alone covered A and the pool grew (224 MiB, ABlockCoveredOnlyByTheMissesOwnMarker...). As at a
// training step's end: zero_grad frees the gradients at once, and the next step's first miss comes later.
// `trigger_is_allocation`: that call is an allocation (whose driver-free path refuses while the marker is
// due, and whose full path records it), else a small free.
struct DeferredMarkerOutcome {
  std::size_t markers_at_a_free = 0;  // recorded by A's free (0: the interval had not passed)
  std::size_t markers_at_trigger = 0;
  bool driver_free_hit_refused = false;
  std::vector<MarkerId> marker_waits;
  std::uint64_t peak_reserved = 0;
  PoolStats stats;  // after D's miss
};

DeferredMarkerOutcome RunDeferredMarker(bool trigger_is_allocation) {
  testing::StreamTestBackend backend(8ULL << 30);
  PoolOptions options;
  options.growth = PoolGrowth::kMapping;
  options.grow_to_unit_end = false;                 // exact shortfalls, as in TwoBlocksAtTheMark
  options.large_free_marker_interval_us = 300'000;  // a wide interval: A's free comes well within it
  options.free_marker_growing_window_ms = 600'000;  // growing throughout: the interval itself applies
  options.thread_cache_bytes = 0;                   // the small block's calls reach the pool
  options.pack_waits_at_mark = true;                // the marker wait at the mark (off by default)
  DeferredMarkerOutcome out;
  {
    CachingPool pool(backend, options);
    void* small = *pool.allocate(4096, kTrainingStream);  // markers 1, 2, 3: the misses of small, A and B
    void* a = *pool.allocate(64 * kMiB, kTrainingStream);
    void* b = *pool.allocate(64 * kMiB, kTrainingStream);
    backend.busy.insert(kTrainingStream);
    if (trigger_is_allocation) {
      EXPECT_TRUE(pool.deallocate(small).ok());  // cached in the small arena
    }
    std::size_t before = backend.recorded_markers();
    EXPECT_TRUE(pool.deallocate(a).ok());
    out.markers_at_a_free = backend.recorded_markers() - before;
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
    before = backend.recorded_markers();
    if (trigger_is_allocation) {
      out.driver_free_hit_refused = pool.allocate_cached(4096, kTrainingStream) == nullptr;
      auto again = pool.allocate(4096, kTrainingStream);  // a hit: the cached block, and marker 4
      EXPECT_TRUE(again.ok());
      small = again.ok() ? *again : nullptr;
    } else {
      EXPECT_TRUE(pool.deallocate(small).ok());  // marker 4
      small = nullptr;
    }
    out.markers_at_trigger = backend.recorded_markers() - before;
    auto d = pool.allocate(96 * kMiB, kTrainingStream);  // marker 5; waits for 4 and packs A's chunks
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    out.marker_waits = backend.marker_waits;
    out.stats = pool.stats();
    out.peak_reserved = out.stats.peak_reserved_bytes;
    for (void* p : {small, b, d.ok() ? *d : nullptr}) {
      if (p != nullptr) {
        EXPECT_TRUE(pool.deallocate(p).ok());
      }
    }
  }
  EXPECT_EQ(backend.released_markers, backend.recorded_markers());
  return out;
}

TEST(PoolPackingStreams, AFreeThatRecordedNoMarkerIsCoveredByTheStreamsNextFreeAfterTheInterval) {
  const DeferredMarkerOutcome out = RunDeferredMarker(/*trigger_is_allocation=*/false);
  ASSERT_EQ(out.markers_at_a_free, 0u) << "A's free came more than 300 ms after B's miss: the scene is void";
  EXPECT_EQ(out.markers_at_trigger, 1u);
  EXPECT_EQ(out.marker_waits, std::vector<MarkerId>{4});
  // A's place packed, and the small arena's idle chunk too (at the mark a large miss takes the other arena's
  // idle chunks before it grows).
  EXPECT_EQ(out.peak_reserved, 160 * kMiB);
  EXPECT_EQ(out.stats.markers, 5u);  // four misses and the deferred one
  EXPECT_EQ(out.stats.deferred_markers, 1u);
}

TEST(PoolPackingStreams, AFreeThatRecordedNoMarkerIsCoveredByTheStreamsNextAllocationAfterTheInterval) {
  const DeferredMarkerOutcome out = RunDeferredMarker(/*trigger_is_allocation=*/true);
  ASSERT_EQ(out.markers_at_a_free, 0u) << "A's free came more than 300 ms after B's miss: the scene is void";
  EXPECT_TRUE(out.driver_free_hit_refused);  // the marker is a CUDA call, which that path never makes
  EXPECT_EQ(out.markers_at_trigger, 1u);
  EXPECT_EQ(out.marker_waits, std::vector<MarkerId>{4});
  EXPECT_EQ(out.peak_reserved, 160 * kMiB + 2 * kMiB);
  EXPECT_EQ(out.stats.markers, 5u);
  EXPECT_EQ(out.stats.deferred_markers, 1u);
}

}  // namespace
}  // namespace memcoord
