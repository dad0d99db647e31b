// A VirtualBackend whose streams can be marked busy, and which records the cross-stream waits and
// synchronizations the pool asks for: lets tests check the pool's stream rules without a GPU.
// Markers (record_marker) model CUDA events: numbered in recording order; one recorded on an idle stream is
// reached at once; one on a busy stream is reached when the test says the GPU passed it (pass_markers),
// when it is waited for (with every earlier marker of its stream), or when its stream is synchronized.
// `markers = false` answers kNoMarker, as a backend without markers does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "allocator/virtual_backend.h"
#include "tests/support/forwarding_backend.h"

namespace memcoord::testing {

// PoolOptions::large_free_marker_interval_us for tests that want no marker at frees (an hour): whether a
// free records one would otherwise depend on how long the test took since its pool's last miss.
constexpr std::uint32_t kNoFreeMarkers = 3'600'000'000u;

class StreamTestBackend final : public ForwardingBackend<VirtualBackend> {
 public:
  explicit StreamTestBackend(std::uint64_t capacity = 8ULL << 30) : ForwardingBackend(capacity) {}

  std::string_view kind() const override { return "stream-test"; }

  Status wait_for(StreamId waiter, StreamId producer) override {
    std::lock_guard<std::mutex> lock(mu_);
    waits.emplace_back(waiter, producer);
    return Status::Ok();
  }
  bool stream_idle(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++queries;
    return busy.count(stream) == 0;
  }
  Status synchronize(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    synchronized.push_back(stream);
    busy.erase(stream);
    reached_through_[stream] = next_marker_;
    return Status::Ok();
  }

  MarkerId record_marker(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!markers) return kNoMarker;
    const MarkerId id = ++next_marker_;
    marker_stream_[id] = stream;
    if (busy.count(stream) == 0) reached_through_[stream] = id;
    return id;
  }
  bool marker_reached(MarkerId marker) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++queries;
    return marker <= reached_through_[marker_stream_.at(marker)];
  }
  Status wait_marker(MarkerId marker) override {
    std::lock_guard<std::mutex> lock(mu_);
    marker_waits.push_back(marker);
    MarkerId& through = reached_through_[marker_stream_.at(marker)];
    through = std::max(through, marker);
    return Status::Ok();
  }
  void release_marker(MarkerId marker) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    ++released_markers;
    marker_stream_.erase(marker);
  }
  // The GPU passed every marker recorded so far on `stream`; work queued after them still runs.
  void pass_markers(StreamId stream) {
    std::lock_guard<std::mutex> lock(mu_);
    reached_through_[stream] = next_marker_;
  }
  std::size_t recorded_markers() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<std::size_t>(next_marker_);
  }
  std::size_t markers_outstanding() {
    std::lock_guard<std::mutex> lock(mu_);
    return marker_stream_.size();
  }

  std::uint64_t used_bytes() const { return inner().used_bytes(); }

  std::vector<std::pair<StreamId, StreamId>> waits;  // (waiter, producer)
  std::vector<StreamId> synchronized;
  std::set<StreamId> busy;
  bool markers = true;
  std::vector<MarkerId> marker_waits;
  std::size_t released_markers = 0;
  std::size_t queries = 0;  // stream_idle and marker_reached calls (illegal during a CUDA graph capture)

 private:
  std::mutex mu_;
  MarkerId next_marker_ = kNoMarker;
  std::map<MarkerId, StreamId> marker_stream_;  // recorded, not yet released
  std::map<StreamId, MarkerId> reached_through_;
};

}  // namespace memcoord::testing
