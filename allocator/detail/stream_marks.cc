#include "allocator/detail/stream_marks.h"

#include <algorithm>

namespace memcoord::detail {

StreamMarks::StreamMarks(DeviceBackend& backend, const std::vector<StreamId>& stream_ids)
    : backend_(backend), stream_ids_(stream_ids) {}

StreamMarks::~StreamMarks() {
  for (PerStream& s : streams_) {
    for (const auto& [number, marker] : s.markers) backend_.release_marker(marker);
  }
}

void StreamMarks::record_if_older(std::uint8_t stream, std::chrono::steady_clock::time_point now,
                                  std::chrono::steady_clock::duration interval) {
  if (stream < streams_.size() && now - streams_[stream].recorded_at < interval) {
    streams_[stream].uncovered = true;
    return;
  }
  record(stream, now);
}

void StreamMarks::record(std::uint8_t stream, std::chrono::steady_clock::time_point now) {
  if (stream >= streams_.size()) streams_.resize(stream + 1);
  PerStream& s = streams_[stream];
  s.recorded_at = now;
  // The front is the oldest: forget the reached ones so the queue holds only work still in flight.
  auto last_reached = s.markers.end();
  for (auto it = s.markers.begin(); it != s.markers.end() && backend_.marker_reached(it->second); ++it) {
    last_reached = it;
  }
  if (last_reached != s.markers.end()) forget_through(s, last_reached);
  if (s.markers.size() >= kMaxOutstanding) return;  // still owed: a call after the interval tries again
  const MarkerId marker = backend_.record_marker(stream_ids_[stream]);
  s.uncovered = false;  // recorded, or the backend has no markers to owe
  if (marker == kNoMarker) return;
  s.markers.emplace_back(++s.recorded, marker);
  ++recorded_total_;
}

std::deque<std::pair<MarkerNumber, MarkerId>>::iterator StreamMarks::covering(PerStream& s,
                                                                              MarkerNumber stamp) {
  return std::lower_bound(s.markers.begin(), s.markers.end(), stamp,
                          [](const auto& m, MarkerNumber value) { return m.first < value; });
}

void StreamMarks::forget_through(PerStream& s, std::deque<std::pair<MarkerNumber, MarkerId>>::iterator last) {
  s.reached_through = last->first;
  const auto end = std::next(last);
  for (auto it = s.markers.begin(); it != end; ++it) backend_.release_marker(it->second);
  s.markers.erase(s.markers.begin(), end);
}

bool StreamMarks::reached(std::uint8_t stream, MarkerNumber stamp) {
  if (stamp == 0) return true;
  if (stream >= streams_.size()) return false;
  PerStream& s = streams_[stream];
  if (s.reached_through >= stamp) return true;
  const auto it = covering(s, stamp);
  if (it == s.markers.end() || !backend_.marker_reached(it->second)) return false;
  forget_through(s, it);
  return true;
}

bool StreamMarks::covered_before_newest(std::uint8_t stream, MarkerNumber stamp) const {
  if (stream >= streams_.size()) return false;
  const PerStream& s = streams_[stream];
  // Outstanding markers are numbered in increasing order: one below the newest number covers `stamp`
  // exactly when the oldest outstanding one numbered at least `stamp` is not the newest.
  const auto it = std::lower_bound(s.markers.begin(), s.markers.end(), stamp,
                                   [](const auto& m, MarkerNumber value) { return m.first < value; });
  return it != s.markers.end() && it->first < s.recorded;
}

Result<bool> StreamMarks::wait(std::uint8_t stream, MarkerNumber stamp) {
  // No marker query first: callers ask reached() just before, and a reached marker returns at once anyway.
  if (stamp == 0) return true;
  if (stream >= streams_.size()) return false;
  PerStream& s = streams_[stream];
  if (s.reached_through >= stamp) return true;
  const auto it = covering(s, stamp);
  if (it == s.markers.end()) return false;
  MEMCOORD_RETURN_IF_ERROR(backend_.wait_marker(it->second));
  forget_through(s, it);
  return true;
}

}  // namespace memcoord::detail
