// StreamMarks: markers a pool records in its streams' queues (DeviceBackend::record_marker, CUDA events), so
// that reusing or unmapping a free block can wait for the work that used it instead of for everything
// queued on its stream.
//   A block freed on stream s is stamped with stamp(s), the number the next marker recorded on s will
//   carry: every use of the block was queued before that marker. The block is idle once a marker numbered
//   at least its stamp is reached; stamp 0 means never used (freshly mapped memory), idle at once.
//   Markers are recorded on a pool's misses (record), where a driver call costs far more than an event, and
//   on its large frees, at most one an interval per stream (record_if_older); a free that records none
//   leaves the stream uncovered, and the pool's next call on it once the interval has passed records the
//   marker (so the last frees of a burst, at a step's end, are not left to the next miss's own). They are
//   waited for when packing needs a busy block's memory: the host then waits for the work queued up to the
//   first marker after the block's last free, and the GPU keeps running what was queued after it, where a
//   stream synchronization would drain the whole queue.
// Invariants: per stream, outstanding markers are in increasing number, none reached as far as this class
// knows except possibly the newest ones not yet queried; at most kMaxOutstanding per stream (a miss beyond
// that records none, and blocks freed meanwhile wait for a later marker or a stream synchronization). The
// bound is a second of GPU lag at a marker a millisecond: with 64, a GPU more than 64 ms behind its host (a
// GPT-2 step queues ~180 ms of work) left the last blocks of a step uncovered, and the pool grew instead of
// packing (alternating GPT-2 and ResNet-50 on the H200: 0.5 GB over expandable_segments; `memcoord replay
// --gpu-lag 1000` of its trace reproduces it, and packs with 1024). Lookups are binary searches.
// Numbers are 64-bit: they never wrap (32-bit ones did after 2^32 markers on a stream, about 50 days of large
// frees at one marker a millisecond, and a wrapped stamp then read as reached: busy memory as idle).
// Not thread-safe: the owning pool's mutex guards every call. Backends without markers make every stamp
// other than 0 "not covered", and callers fall back to stream_idle/synchronize.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord::detail {

// A marker's number on its stream (1, 2, ...), and a freed block's stamp (0: never used).
using MarkerNumber = std::uint64_t;

class StreamMarks {
 public:
  static constexpr std::size_t kMaxOutstanding = 1024;

  // `stream_ids` maps the pool's stream indices to backend streams; both must outlive this object.
  StreamMarks(DeviceBackend& backend, const std::vector<StreamId>& stream_ids);
  ~StreamMarks();  // gives every outstanding marker back
  StreamMarks(const StreamMarks&) = delete;
  StreamMarks& operator=(const StreamMarks&) = delete;

  // The stamp of a block freed now on `stream`.
  MarkerNumber stamp(std::uint8_t stream) const {
    return stream < streams_.size() ? streams_[stream].recorded + 1 : 1;
  }
  // Records a marker on `stream` (after forgetting the reached ones at the front).
  void record(std::uint8_t stream,
              std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // Records one when `stream`'s newest was recorded at least `interval` before `now` (or none was). Else the
  // stream is left uncovered: a block was freed after its newest marker and none was recorded for it.
  void record_if_older(std::uint8_t stream, std::chrono::steady_clock::time_point now,
                       std::chrono::steady_clock::duration interval);
  // Whether a record_if_older since `stream`'s newest marker recorded none (one load: callers ask on every
  // pool call, and record the deferred marker with record_if_older once its interval has passed).
  bool uncovered(std::uint8_t stream) const { return stream < streams_.size() && streams_[stream].uncovered; }
  // Whether `stream` is uncovered and a record_if_older(stream, now, interval) would record now.
  bool owed_now(std::uint8_t stream, std::chrono::steady_clock::time_point now,
                std::chrono::steady_clock::duration interval) const {
    return uncovered(stream) && now - streams_[stream].recorded_at >= interval;
  }
  // Whether the work before a block stamped `stamp` on `stream` has completed, as far as markers tell
  // (false when no marker covers it yet). At most one marker query; never blocks.
  bool reached(std::uint8_t stream, MarkerNumber stamp);
  // Whether an outstanding marker other than the stream's newest covers `stamp`: waiting for it leaves the
  // work queued after it running (waiting for the newest drains the queue). No marker query.
  bool covered_before_newest(std::uint8_t stream, MarkerNumber stamp) const;
  // Blocks until a marker covering `stamp` is reached: true. False when no recorded marker covers it (the
  // caller synchronizes the stream instead). A failed wait is returned as its error.
  Result<bool> wait(std::uint8_t stream, MarkerNumber stamp);

  // For tests and stats: markers outstanding on `stream`, and the highest number known reached.
  std::size_t outstanding(std::uint8_t stream) const {
    return stream < streams_.size() ? streams_[stream].markers.size() : 0;
  }
  std::uint64_t recorded_total() const { return recorded_total_; }  // markers recorded on every stream
  MarkerNumber reached_through(std::uint8_t stream) const {
    return stream < streams_.size() ? streams_[stream].reached_through : 0;
  }
  // For tests: `stream` continues as if markers 1..`number` had been recorded and reached (a long run,
  // without recording billions of markers). REQUIRES: none outstanding on it.
  void skip_numbers_for_test(std::uint8_t stream, MarkerNumber number) {
    if (stream >= streams_.size()) streams_.resize(stream + 1);
    streams_[stream].recorded = number;
    streams_[stream].reached_through = number;
  }

 private:
  struct PerStream {
    MarkerNumber recorded = 0;                              // number of the newest marker recorded
    MarkerNumber reached_through = 0;                       // every marker up to this number is reached
    std::chrono::steady_clock::time_point recorded_at{};    // when the newest was recorded (or skipped)
    bool uncovered = false;                                 // see uncovered()
    std::deque<std::pair<MarkerNumber, MarkerId>> markers;  // outstanding: (number, marker), increasing
  };
  // The first outstanding marker numbered at least `stamp`, or markers.end().
  static std::deque<std::pair<MarkerNumber, MarkerId>>::iterator covering(PerStream& s, MarkerNumber stamp);
  // Marks every marker up to and including `last` reached and gives them back.
  void forget_through(PerStream& s, std::deque<std::pair<MarkerNumber, MarkerId>>::iterator last);

  DeviceBackend& backend_;
  const std::vector<StreamId>& stream_ids_;
  std::vector<PerStream> streams_;  // by stream index, grown on record
  std::uint64_t recorded_total_ = 0;
};

}  // namespace memcoord::detail
