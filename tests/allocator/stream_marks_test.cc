// StreamMarks (allocator/detail/stream_marks.h) over the stream test backend's simulated events: stamps,
// which marker covers a stamp, non-blocking checks, waits that stop at the covering marker, the cap on
// outstanding markers, and every marker given back.
#include "allocator/detail/stream_marks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "stream_test_backend.h"

namespace memcoord::detail {
namespace {

const StreamId kStream = 5;

class StreamMarksTest : public ::testing::Test {
 protected:
  testing::StreamTestBackend backend_;
  std::vector<StreamId> stream_ids_{kDefaultStream, kStream};
};

TEST_F(StreamMarksTest, StampZeroIsNeverUsedMemoryAndIsIdleWithoutAQuery) {
  StreamMarks marks(backend_, stream_ids_);
  backend_.busy.insert(kStream);
  EXPECT_TRUE(marks.reached(1, 0));
  EXPECT_EQ(backend_.recorded_markers(), 0u);
}

TEST_F(StreamMarksTest, AStampIsCoveredByTheFirstMarkerRecordedAfterIt) {
  StreamMarks marks(backend_, stream_ids_);
  backend_.busy.insert(kStream);
  const detail::MarkerNumber before_any = marks.stamp(1);
  EXPECT_EQ(before_any, 1u);
  EXPECT_FALSE(marks.reached(1, before_any));  // nothing recorded: not covered
  auto none = marks.wait(1, before_any);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);  // the caller synchronizes the stream instead
  marks.record(1);      // marker 1
  const detail::MarkerNumber after_first = marks.stamp(1);
  marks.record(1);  // marker 2
  EXPECT_FALSE(marks.reached(1, before_any));
  auto waited = marks.wait(1, before_any);
  ASSERT_TRUE(waited.ok());
  EXPECT_TRUE(*waited);
  EXPECT_EQ(backend_.marker_waits, std::vector<MarkerId>{1});  // not marker 2: the queue after stays
  EXPECT_TRUE(marks.reached(1, before_any));
  EXPECT_EQ(marks.reached_through(1), 1u);
  EXPECT_EQ(marks.outstanding(1), 1u);  // marker 1 given back, marker 2 still in flight
  EXPECT_FALSE(marks.reached(1, after_first));
  backend_.pass_markers(kStream);
  EXPECT_TRUE(marks.reached(1, after_first));  // one query, no wait
  EXPECT_EQ(backend_.marker_waits.size(), 1u);
  EXPECT_TRUE(backend_.synchronized.empty());
  EXPECT_EQ(marks.outstanding(1), 0u);
  EXPECT_EQ(backend_.released_markers, 2u);
}

// Past 2^32 markers on a stream (about 50 days of large frees at one a millisecond), numbers go on: with
// 32-bit ones the next stamp wrapped to 0 or 1, below what was reached, and busy memory read as idle.
TEST_F(StreamMarksTest, NumbersPast32BitsKeepBusyMemoryBusy) {
  StreamMarks marks(backend_, stream_ids_);
  backend_.busy.insert(kStream);
  marks.skip_numbers_for_test(1, (MarkerNumber{1} << 32) - 2);
  for (int i = 0; i < 3; ++i) marks.record(1);  // numbers 2^32 - 1, 2^32, 2^32 + 1
  const MarkerNumber freed = marks.stamp(1);
  EXPECT_EQ(freed, (MarkerNumber{1} << 32) + 2);
  EXPECT_FALSE(marks.reached(1, freed));  // not covered yet: the GPU still uses it
  marks.record(1);
  EXPECT_FALSE(marks.reached(1, freed));  // covered, but the stream is busy
  backend_.pass_markers(kStream);
  EXPECT_TRUE(marks.reached(1, freed));
}

// Packing at the high-water mark waits only for a marker older than the stream's newest: waiting for the
// newest would drain the queue. No marker is queried to tell.
TEST_F(StreamMarksTest, CoveredBeforeNewestIsAnOlderOutstandingMarkerAndQueriesNothing) {
  StreamMarks marks(backend_, stream_ids_);
  backend_.busy.insert(kStream);
  const detail::MarkerNumber freed_first = marks.stamp(1);
  EXPECT_FALSE(marks.covered_before_newest(1, freed_first));  // nothing recorded
  marks.record(1);                                            // marker 1: the newest covers it
  EXPECT_FALSE(marks.covered_before_newest(1, freed_first));
  const detail::MarkerNumber freed_second = marks.stamp(1);
  marks.record(1);  // marker 2
  const std::size_t queries = backend_.queries;
  EXPECT_TRUE(marks.covered_before_newest(1, freed_first));    // marker 1, older than 2
  EXPECT_FALSE(marks.covered_before_newest(1, freed_second));  // only marker 2, the newest
  EXPECT_FALSE(marks.covered_before_newest(0, 1));             // a stream with no marker
  EXPECT_EQ(backend_.queries, queries);
}

// A large free while the pool grows records a marker only when the stream's newest is at least the interval
// old; a miss's marker counts as the newest too.
TEST_F(StreamMarksTest, RecordIfOlderRecordsAtMostOncePerInterval) {
  StreamMarks marks(backend_, stream_ids_);
  const auto t0 = std::chrono::steady_clock::now();
  const auto interval = std::chrono::milliseconds(1);
  marks.record_if_older(1, t0, interval);  // none yet: recorded
  EXPECT_EQ(backend_.recorded_markers(), 1u);
  marks.record_if_older(1, t0 + std::chrono::microseconds(500), interval);
  EXPECT_EQ(backend_.recorded_markers(), 1u);
  marks.record_if_older(1, t0 + interval, interval);
  EXPECT_EQ(backend_.recorded_markers(), 2u);
  marks.record(1, t0 + std::chrono::milliseconds(5));  // a miss
  marks.record_if_older(1, t0 + std::chrono::microseconds(5500), interval);
  EXPECT_EQ(backend_.recorded_markers(), 3u);
  marks.record_if_older(1, t0 + std::chrono::milliseconds(6), interval);
  EXPECT_EQ(backend_.recorded_markers(), 4u);
  marks.record_if_older(0, t0, std::chrono::steady_clock::duration::zero());  // another stream: its own time
  EXPECT_EQ(backend_.recorded_markers(), 5u);
}

TEST_F(StreamMarksTest, AtMostKMaxOutstandingPerStreamAndReachedOnesAreForgottenOnRecord) {
  StreamMarks marks(backend_, stream_ids_);
  backend_.busy.insert(kStream);
  for (std::size_t i = 0; i < StreamMarks::kMaxOutstanding + 6; ++i) marks.record(1);
  EXPECT_EQ(marks.outstanding(1), StreamMarks::kMaxOutstanding);
  EXPECT_EQ(backend_.recorded_markers(), StreamMarks::kMaxOutstanding);
  // A block freed now has no covering marker until the GPU frees a place.
  const detail::MarkerNumber late = marks.stamp(1);
  EXPECT_FALSE(*marks.wait(1, late));
  backend_.pass_markers(kStream);
  marks.record(1);
  EXPECT_EQ(marks.outstanding(1), 1u);
  EXPECT_EQ(backend_.released_markers, StreamMarks::kMaxOutstanding);
  EXPECT_TRUE(*marks.wait(1, late));
}

// A GPU half a second behind its host, at a marker a millisecond: 500 outstanding markers, all kept (with the
// former cap of 64, the last 436 were never recorded and the blocks freed meanwhile had no marker), found
// by binary search, and a wait stops at the covering one.
TEST_F(StreamMarksTest, HundredsOfOutstandingMarkersAreKeptAndTheCoveringOneIsWaitedFor) {
  StreamMarks marks(backend_, stream_ids_);
  backend_.busy.insert(kStream);
  detail::MarkerNumber stamp_before_400 = 0;
  for (std::uint32_t i = 1; i <= 500; ++i) {
    if (i == 400) stamp_before_400 = marks.stamp(1);
    marks.record(1);
  }
  EXPECT_EQ(marks.outstanding(1), 500u);
  EXPECT_EQ(stamp_before_400, 400u);
  EXPECT_TRUE(marks.covered_before_newest(1, stamp_before_400));
  EXPECT_FALSE(marks.covered_before_newest(1, 500));  // only the newest covers it
  EXPECT_FALSE(marks.covered_before_newest(1, 501));  // nothing covers it yet
  EXPECT_FALSE(marks.reached(1, stamp_before_400));
  ASSERT_TRUE(*marks.wait(1, stamp_before_400));
  ASSERT_FALSE(backend_.marker_waits.empty());
  EXPECT_EQ(backend_.marker_waits.back(), MarkerId{400});
  EXPECT_EQ(marks.outstanding(1), 100u);  // 1..400 reached and given back
  EXPECT_EQ(marks.reached_through(1), 400u);
}

TEST_F(StreamMarksTest, StreamsAreIndependentAndTheDestructorGivesEveryMarkerBack) {
  {
    StreamMarks marks(backend_, stream_ids_);
    backend_.busy.insert(kStream);
    marks.record(0);  // the default stream is idle: reached at once
    marks.record(1);
    marks.record(1);
    EXPECT_TRUE(marks.reached(0, 1));
    EXPECT_FALSE(marks.reached(1, 1));
    EXPECT_EQ(marks.outstanding(1), 2u);
  }
  EXPECT_EQ(backend_.markers_outstanding(), 0u);
  EXPECT_EQ(backend_.released_markers, 3u);
}

// A record_if_older that records nothing leaves the stream uncovered (a marker owed) until one is recorded,
// by a miss or by a later record_if_older; a backend without markers owes none once it was asked.
TEST_F(StreamMarksTest, ADeclinedRecordIfOlderLeavesTheStreamUncoveredUntilAMarkerIsRecorded) {
  StreamMarks marks(backend_, stream_ids_);
  const auto t0 = std::chrono::steady_clock::now();
  const auto interval = std::chrono::milliseconds(1);
  EXPECT_FALSE(marks.uncovered(1));
  marks.record_if_older(1, t0, interval);
  EXPECT_FALSE(marks.uncovered(1));  // recorded
  marks.record_if_older(1, t0 + std::chrono::microseconds(500), interval);
  EXPECT_TRUE(marks.uncovered(1));  // declined: owed
  EXPECT_FALSE(marks.uncovered(0));
  EXPECT_FALSE(marks.owed_now(1, t0 + std::chrono::microseconds(900), interval));
  EXPECT_TRUE(marks.owed_now(1, t0 + interval, interval));
  marks.record_if_older(1, t0 + interval, interval);
  EXPECT_FALSE(marks.uncovered(1));
  EXPECT_EQ(backend_.recorded_markers(), 2u);
  marks.record_if_older(1, t0 + interval + std::chrono::microseconds(10), interval);
  EXPECT_TRUE(marks.uncovered(1));
  marks.record(1, t0 + interval + std::chrono::microseconds(20));  // a miss pays what was owed
  EXPECT_FALSE(marks.uncovered(1));

  backend_.markers = false;
  StreamMarks none(backend_, stream_ids_);
  none.record_if_older(1, t0, interval);
  none.record_if_older(1, t0 + std::chrono::microseconds(500), interval);
  EXPECT_TRUE(none.uncovered(1));
  none.record_if_older(1, t0 + interval, interval);  // asked: the backend has none, so nothing is owed
  EXPECT_FALSE(none.uncovered(1));
}

TEST_F(StreamMarksTest, ABackendWithoutMarkersCoversNothingButNeverUsedMemory) {
  backend_.markers = false;
  StreamMarks marks(backend_, stream_ids_);
  marks.record(1);
  EXPECT_EQ(marks.outstanding(1), 0u);
  EXPECT_TRUE(marks.reached(1, 0));
  EXPECT_FALSE(marks.reached(1, marks.stamp(1)));
  EXPECT_FALSE(*marks.wait(1, marks.stamp(1)));
}

}  // namespace
}  // namespace memcoord::detail
