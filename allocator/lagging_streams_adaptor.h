// LaggingStreamsAdaptor: a DeviceBackend over `upstream` (a replay's virtual backend) whose streams run a
// fixed number of host events behind the host, as a GPU runs behind the CPU that queues its kernels in
// training. Replays on a plain backend see every stream idle, so a pool packs any free block at once; real
// runs see the blocks freed in the last few milliseconds still in use, and pack only what their markers
// prove done (stream_marks.h). This adaptor gives a replay that second view.
//
// The model: the replay calls advance() once per trace event (one host event, queueing work on every
// stream). The device has completed the work queued up to event clock() - lag(), or further where the host
// waited: a marker recorded at event t is reached once t <= that point; wait_marker(m) makes the host wait
// until it is (the completed point moves to t); synchronize() moves it to the present. stream_idle() is true
// only once everything queued is done (lag 0, or right after a synchronization). With lag 0 every marker is
// reached as it is recorded, and a replay packs as on the plain backend.
// What it leaves out: the trace has no synchronizations (a training loop's loss.item() drains the queue each
// step), so the device is always `lag` events behind between the host's own waits; and lag is counted in
// events, not in time.
// Counts: waits for a marker not yet reached, and the events of GPU work they waited for (the host's stall,
// in events; each one is work the GPU had queued and the host could not run ahead of).
// Not thread-safe (replays are single-threaded). Ownership: does not own `upstream`, which must outlive it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "allocator/backend_adaptor.h"

namespace memcoord {

class LaggingStreamsAdaptor final : public BackendAdaptor {
 public:
  LaggingStreamsAdaptor(DeviceBackend& upstream, std::uint64_t lag_events)
      : BackendAdaptor(upstream), lag_(lag_events) {}

  // One host event: work queued on the streams.
  void advance() { ++clock_; }
  std::uint64_t clock() const { return clock_; }
  std::uint64_t lag() const { return lag_; }
  std::uint64_t waits() const { return waits_; }                  // waits for a marker not yet reached
  std::uint64_t waited_events() const { return waited_events_; }  // GPU events those waits covered
  std::uint64_t synchronizations() const { return synchronizations_; }

  bool stream_idle(StreamId stream) override;
  Status synchronize(StreamId stream) override;
  MarkerId record_marker(StreamId stream) override;
  bool marker_reached(MarkerId marker) override;
  Status wait_marker(MarkerId marker) override;
  void release_marker(MarkerId marker) noexcept override;

 private:
  // The last event whose work the device has completed.
  std::uint64_t completed() const { return clock_ > lag_ ? std::max(clock_ - lag_, waited_to_) : waited_to_; }
  void wait_until(std::uint64_t event);

  const std::uint64_t lag_;
  std::uint64_t clock_ = 0;
  std::uint64_t waited_to_ = 0;  // the host waited for the device up to here
  MarkerId next_marker_ = 1;
  std::unordered_map<MarkerId, std::uint64_t> marker_events_;  // outstanding marker -> event it follows
  std::uint64_t waits_ = 0, waited_events_ = 0, synchronizations_ = 0;
};

}  // namespace memcoord
