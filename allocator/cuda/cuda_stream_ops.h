// CudaStreamOps: the stream half of DeviceBackend for the CUDA backends (cuda, cuda-vmm, pinned-host), which
// hold one each and forward wait_for / stream_idle / synchronize to it.
//   wait_for(waiter, producer): records an event on `producer` and makes `waiter` wait for it on the device
//     (cudaEventRecord + cudaStreamWaitEvent); the host never blocks. Events come from a small reusable pool
//     (created with cudaEventDisableTiming, the cheap kind) and go back to it at once: cudaStreamWaitEvent
//     captures the event's state when called, so re-recording it later cannot release the earlier waiter.
//   stream_idle(stream): cudaStreamQuery, never blocks. An error other than "not ready" is logged and answers
//     false, so a pool never reuses memory whose last use it cannot vouch for.
//   synchronize(stream): cudaStreamSynchronize.
//   record_marker(stream): an event from the same pool, recorded on `stream` (kNoMarker, logged, on error);
//     marker_reached: cudaEventQuery (an error other than "not ready" is logged and answers false);
//     wait_marker: cudaEventSynchronize; release_marker: the event goes back to the pool.
// Stream ids are cudaStream_t values (0: the legacy default stream). Every stream passed in must belong to
// `device`. Thread safety: all methods are thread-safe (one mutex guards the free events).
#pragma once

#include <mutex>
#include <vector>

#include "allocator/device_backend.h"
#include "common/result.h"

namespace memcoord {

class CudaStreamOps {
 public:
  explicit CudaStreamOps(int device) : device_(device) {}
  ~CudaStreamOps();  // destroys the pooled events
  CudaStreamOps(const CudaStreamOps&) = delete;
  CudaStreamOps& operator=(const CudaStreamOps&) = delete;

  Status wait_for(StreamId waiter, StreamId producer);
  bool stream_idle(StreamId stream);
  Status synchronize(StreamId stream);
  MarkerId record_marker(StreamId stream);
  bool marker_reached(MarkerId marker);
  Status wait_marker(MarkerId marker);
  void release_marker(MarkerId marker) noexcept;

 private:
  Result<void*> take_event();  // a pooled event or a new one (a cudaEvent_t)
  void give_back_event(void* event);

  const int device_;
  std::mutex mu_;  // guards free_events_
  std::vector<void*> free_events_;
};

}  // namespace memcoord
