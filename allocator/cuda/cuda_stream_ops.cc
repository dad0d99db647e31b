#include "allocator/cuda/cuda_stream_ops.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "allocator/cuda/cuda_device.h"
#include "common/cuda_status.h"

namespace memcoord {
namespace {

cudaStream_t AsStream(StreamId id) { return reinterpret_cast<cudaStream_t>(id); }
cudaEvent_t AsEvent(void* event) { return static_cast<cudaEvent_t>(event); }

// Events given back are kept for reuse up to this many; more are created on demand. As many as a pool's
// stream may have outstanding markers (StreamMarks::kMaxOutstanding): a GPU a second behind its host
// cycles that many, and creating and destroying each would cost a driver call twice.
constexpr std::size_t kMaxPooledEvents = 1024;

}  // namespace

CudaStreamOps::~CudaStreamOps() {
  for (void* event : free_events_) {
    const Status destroyed = CudaRuntimeStatus(cudaEventDestroy(AsEvent(event)), "cudaEventDestroy");
    if (!destroyed.ok()) spdlog::warn("{}", destroyed.ToString());
  }
}

Result<void*> CudaStreamOps::take_event() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_events_.empty()) {
      void* event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
  }
  ScopedCudaDevice on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  cudaEvent_t event = nullptr;
  MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                             "cudaEventCreateWithFlags(cudaEventDisableTiming)"));
  return static_cast<void*>(event);
}

void CudaStreamOps::give_back_event(void* event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_events_.size() < kMaxPooledEvents) {
      free_events_.push_back(event);
      return;
    }
  }
  const Status destroyed = CudaRuntimeStatus(cudaEventDestroy(AsEvent(event)), "cudaEventDestroy");
  if (!destroyed.ok()) spdlog::warn("{}", destroyed.ToString());
}

Status CudaStreamOps::wait_for(StreamId waiter, StreamId producer) {
  if (waiter == producer) return Status::Ok();  // stream order already covers it
  MEMCOORD_ASSIGN_OR_RETURN(void* event, take_event());
  // The call's name is formatted only when it failed: this runs on every cross-stream reuse.
  Status status;
  cudaError_t error = cudaEventRecord(AsEvent(event), AsStream(producer));
  if (error != cudaSuccess) {
    status = CudaRuntimeStatus(error, fmt::format("cudaEventRecord(stream {:#x})", producer));
  } else if ((error = cudaStreamWaitEvent(AsStream(waiter), AsEvent(event), 0)) != cudaSuccess) {
    status = CudaRuntimeStatus(error, fmt::format("cudaStreamWaitEvent(stream {:#x})", waiter));
  }
  give_back_event(event);  // safe at once: the wait captured the event's state when it was queued
  return status;
}

bool CudaStreamOps::stream_idle(StreamId stream) {
  const cudaError_t error = cudaStreamQuery(AsStream(stream));
  if (error == cudaSuccess) return true;
  if (error == cudaErrorNotReady) return false;
  spdlog::warn("{}",
               CudaRuntimeStatus(error, fmt::format("cudaStreamQuery(stream {:#x})", stream)).ToString());
  return false;
}

Status CudaStreamOps::synchronize(StreamId stream) {
  return CudaRuntimeStatus(cudaStreamSynchronize(AsStream(stream)),
                           fmt::format("cudaStreamSynchronize(stream {:#x})", stream));
}

MarkerId CudaStreamOps::record_marker(StreamId stream) {
  Result<void*> event = take_event();
  if (!event.ok()) {
    spdlog::warn("{}", event.status().ToString());
    return kNoMarker;
  }
  const cudaError_t error = cudaEventRecord(AsEvent(*event), AsStream(stream));
  if (error != cudaSuccess) {  // the name is formatted only then: a marker is recorded on every miss
    spdlog::warn("{}",
                 CudaRuntimeStatus(error, fmt::format("cudaEventRecord(stream {:#x})", stream)).ToString());
    give_back_event(*event);
    return kNoMarker;
  }
  return reinterpret_cast<MarkerId>(*event);
}

bool CudaStreamOps::marker_reached(MarkerId marker) {
  const cudaError_t error = cudaEventQuery(AsEvent(reinterpret_cast<void*>(marker)));
  if (error == cudaSuccess) return true;
  if (error == cudaErrorNotReady) return false;
  spdlog::warn("{}", CudaRuntimeStatus(error, "cudaEventQuery").ToString());
  return false;
}

Status CudaStreamOps::wait_marker(MarkerId marker) {
  return CudaRuntimeStatus(cudaEventSynchronize(AsEvent(reinterpret_cast<void*>(marker))),
                           "cudaEventSynchronize");
}

void CudaStreamOps::release_marker(MarkerId marker) noexcept {
  if (marker != kNoMarker) give_back_event(reinterpret_cast<void*>(marker));
}

}  // namespace memcoord
