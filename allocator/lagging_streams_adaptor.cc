#include "allocator/lagging_streams_adaptor.h"

#include <fmt/format.h>

#include <algorithm>

namespace memcoord {

bool LaggingStreamsAdaptor::stream_idle(StreamId /*stream*/) { return completed() >= clock_; }

Status LaggingStreamsAdaptor::synchronize(StreamId /*stream*/) {
  if (completed() < clock_) ++synchronizations_;
  wait_until(clock_);
  return Status::Ok();
}

MarkerId LaggingStreamsAdaptor::record_marker(StreamId /*stream*/) {
  const MarkerId id = next_marker_++;
  marker_events_[id] = clock_;
  return id;
}

bool LaggingStreamsAdaptor::marker_reached(MarkerId marker) {
  const auto it = marker_events_.find(marker);
  return it == marker_events_.end() || it->second <= completed();
}

Status LaggingStreamsAdaptor::wait_marker(MarkerId marker) {
  const auto it = marker_events_.find(marker);
  if (it == marker_events_.end()) {
    return InvalidArgument(
        fmt::format("lagging streams: wait for marker {}, which is not outstanding", marker));
  }
  if (it->second > completed()) ++waits_;
  wait_until(it->second);
  return Status::Ok();
}

void LaggingStreamsAdaptor::release_marker(MarkerId marker) noexcept { marker_events_.erase(marker); }

void LaggingStreamsAdaptor::wait_until(std::uint64_t event) {
  const std::uint64_t done = completed();
  if (event <= done) return;
  waited_events_ += event - done;
  waited_to_ = event;
}

}  // namespace memcoord
