// Private pools for CUDA graph capture (capture.h states the contract) and the entry points
// memcoord_begin_allocate_to_pool / memcoord_end_allocate_to_pool / memcoord_release_pool.
//
// Why capture broke before: a pool miss maps memory (cuMemCreate/cuMemMap, or cudaMalloc on the segment
// backend) and a reuse of a block recorded on another stream queries that stream (cudaStreamQuery); under
// cudaStreamCaptureModeGlobal these "potentially unsafe" calls are refused while any capture runs and the
// capture is invalidated ("operation failed due to a previous error during capture"). A private pool serves
// a capture's allocations on the capture's stream: reuse there is stream-ordered (no query), and misses run
// with this thread's capture mode relaxed, as PyTorch's own allocator does for its cudaMalloc.
#include "worker/capi/capture.h"

#include <fmt/format.h>

#include <algorithm>

#include "worker/capi/errors.h"
#ifdef MEMCOORD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace memcoord::capi {
namespace {

using PoolId = std::pair<std::uint64_t, std::uint64_t>;

// Relaxes this thread's capture mode for its lifetime (CUDA builds; nothing elsewhere).
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(bool cuda) : cuda_(cuda) {
#ifdef MEMCOORD_HAVE_CUDA
    if (cuda_) {
      mode_ = cudaStreamCaptureModeRelaxed;
      (void)cudaThreadExchangeStreamCaptureMode(&mode_);
    }
#endif
  }
  ~RelaxedCaptureMode() {
#ifdef MEMCOORD_HAVE_CUDA
    if (cuda_) (void)cudaThreadExchangeStreamCaptureMode(&mode_);
#endif
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  bool cuda_;
#ifdef MEMCOORD_HAVE_CUDA
  cudaStreamCaptureMode mode_{};
#endif
};

std::string IdText(const PoolId& id) { return fmt::format("({}, {})", id.first, id.second); }

CapturePool* FindLocked(DeviceSlot& slot, const PoolId& id) {
  for (auto& c : slot.captures) {
    if (c->id == id) return c.get();
  }
  return nullptr;
}

Result<DeviceSlot*> SlotOf(Runtime& runtime, int& device) {
  if (device == -1) device = runtime.primary_device;
  if (device < 0 || device >= runtime.device_count || device >= kMaxDevices) {
    return InvalidArgument(
        fmt::format("device {} is out of range: this process has {} device(s) (-1: primary)", device,
                    runtime.device_count));
  }
  return &runtime.devices[device];
}

// Destroys released private pools with no live block. REQUIRES: slot.captures_mu held.
void CollectLocked(DeviceSlot& slot) {
  auto dead = std::remove_if(slot.captures.begin(), slot.captures.end(), [](const auto& c) {
    return c->released && !c->routing && c->pool->stats().live_blocks == 0;
  });
  slot.captures.erase(dead, slot.captures.end());
}

// Tells every pool of `device` (-1: the primary) whether a capture is underway there: while one is, none
// of them may query an event or a stream (CachingPool::set_captures_underway). The private capture pools
// never query. A pool made during a capture is told by TellNewPool.
void TellPools(Runtime& runtime, int device, bool captures_underway) {
  const int on = device == -1 ? runtime.primary_device : device;
  for (const auto& [pool_device, pool] : runtime.worker->pools_with_devices()) {
    if (pool_device == on) pool->set_captures_underway(captures_underway);
  }
}

Status Begin(Runtime& runtime, int device, PoolId id, memcoord_stream_filter filter, void* user) {
  if (filter == nullptr) {
    return InvalidArgument(
        "memcoord_begin_allocate_to_pool: filter is NULL (it must say which streams "
        "belong to the capture)");
  }
  MEMCOORD_ASSIGN_OR_RETURN(DeviceSlot * slot, SlotOf(runtime, device));
  MEMCOORD_ASSIGN_OR_RETURN(CachingPool * main, DevicePool(runtime, device));
  std::lock_guard lock(slot->captures_mu);
  CapturePool* c = FindLocked(*slot, id);
  if (c != nullptr && c->routing) {
    return FailedPrecondition(
        fmt::format("memcoord_begin_allocate_to_pool: pool {} on device {} is already routing allocations "
                    "(end it first)",
                    IdText(id), device));
  }
  if (c == nullptr) {
    auto made = std::make_unique<CapturePool>();
    made->id = id;
    PoolOptions options = runtime.worker->pool_options(fmt::format("capture{}@{}", IdText(id), device));
    // Its streams may be capturing: packing must never synchronize them (that would end the capture).
    options.pack_waits_for_streams = false;
    made->pool = std::make_unique<CachingPool>(main->backend(), std::move(options));
    slot->captures.push_back(std::move(made));
    c = slot->captures.back().get();
  }
  c->filter = filter;
  c->user = user;
  c->routing = true;
  c->released = false;
  if (slot->routing_captures.fetch_add(1, std::memory_order_release) == 0) {
    TellPools(runtime, device, /*captures_underway=*/true);  // before the capture begins
  }
  return Status::Ok();
}

// REQUIRES: slot.captures_mu held. One route fewer; the device's pools may query events again once none is
// left (the routes begin before their captures and end after them).
void StopRoutingLocked(Runtime& runtime, int device, DeviceSlot& slot) {
  if (slot.routing_captures.fetch_sub(1, std::memory_order_release) != 1) return;
  TellPools(runtime, device, /*captures_underway=*/false);
}

Status End(Runtime& runtime, int device, PoolId id) {
  MEMCOORD_ASSIGN_OR_RETURN(DeviceSlot * slot, SlotOf(runtime, device));
  std::lock_guard lock(slot->captures_mu);
  CapturePool* c = FindLocked(*slot, id);
  if (c == nullptr || !c->routing) {
    return FailedPrecondition(fmt::format(
        "memcoord_end_allocate_to_pool: pool {} on device {} is not routing allocations (no begin)",
        IdText(id), device));
  }
  c->routing = false;
  c->filter = nullptr;
  StopRoutingLocked(runtime, device, *slot);
  return Status::Ok();
}

Status Release(Runtime& runtime, int device, PoolId id) {
  MEMCOORD_ASSIGN_OR_RETURN(DeviceSlot * slot, SlotOf(runtime, device));
  std::lock_guard lock(slot->captures_mu);
  CapturePool* c = FindLocked(*slot, id);
  if (c == nullptr) {
    return NotFound(
        fmt::format("memcoord_release_pool: no private pool {} on device {}", IdText(id), device));
  }
  if (c->routing) {
    c->routing = false;
    c->filter = nullptr;
    StopRoutingLocked(runtime, device, *slot);
  }
  c->released = true;
  CollectLocked(*slot);
  return Status::Ok();
}

}  // namespace

std::optional<Result<void*>> AllocateForCapture(Runtime& runtime, int device, std::size_t bytes,
                                                StreamId stream) {
  DeviceSlot& slot = runtime.devices[device];
  std::lock_guard lock(slot.captures_mu);
  for (auto& c : slot.captures) {
    if (!c->routing || c->filter == nullptr || c->filter(stream, c->user) == 0) continue;
    RelaxedCaptureMode relaxed(runtime.cuda_streams);
    return c->pool->allocate(bytes, stream);
  }
  return std::nullopt;
}

Status CheckNotCapturing(StreamId stream) {
#ifdef MEMCOORD_HAVE_CUDA
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    (void)cudaGetLastError();  // a bad stream handle is the pool's to report; clear the sticky error
    return Status::Ok();
  }
  if (status == cudaStreamCaptureStatusActive) {
    return FailedPrecondition(fmt::format(
        "allocation on stream {:#x} while it is being captured into a CUDA graph, with no private pool "
        "routing this stream: the pool may map memory or query streams, which would invalidate the capture. "
        "Call memcoord_begin_allocate_to_pool(device, id, filter, user) before capturing (PyTorch's "
        "torch.cuda.graph does so through memcoord's allocator shim)",
        stream));
  }
#else
  (void)stream;
#endif
  return Status::Ok();
}

Status ReleaseFromCapture(Runtime& runtime, int device, void* ptr, StreamId stream, bool free_block) {
  const Status missing = NotFound(fmt::format("{} is not a live block of a capture pool", ptr));
  if (device < 0 || device >= kMaxDevices) return missing;
  DeviceSlot& slot = runtime.devices[device];
  std::lock_guard lock(slot.captures_mu);
  for (auto& c : slot.captures) {
    Status s = free_block && stream == kDefaultStream ? Status::Ok() : c->pool->record_stream(ptr, stream);
    if (s.ok() && free_block) s = c->pool->deallocate(ptr);
    if (s.code() == StatusCode::kNotFound) continue;
    if (free_block && c->released) CollectLocked(slot);
    return s;
  }
  return missing;
}

void TellNewPool(Runtime& runtime, int device, CachingPool& pool) {
  auto slot = SlotOf(runtime, device);
  if (!slot.ok()) return;
  // Under the lock Begin and the last End hold while they tell the device's pools: either that telling
  // already saw this pool in the worker's list, or this reads the routes it left.
  std::lock_guard lock((*slot)->captures_mu);
  if ((*slot)->routing_captures.load(std::memory_order_relaxed) > 0) pool.set_captures_underway(true);
}

void ForEachCapturePool(Runtime& runtime, int device, const std::function<void(CachingPool&)>& visit) {
  if (device < 0 || device >= kMaxDevices) return;
  DeviceSlot& slot = runtime.devices[device];
  std::lock_guard lock(slot.captures_mu);
  for (auto& c : slot.captures) visit(*c->pool);
}

}  // namespace memcoord::capi

extern "C" {

int memcoord_begin_allocate_to_pool(int device, uint64_t pool_id_hi, uint64_t pool_id_lo,
                                    memcoord_stream_filter filter, void* user) {
  using namespace memcoord::capi;
  return Boundary("memcoord_begin_allocate_to_pool", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_begin_allocate_to_pool");
    memcoord::Status s = Begin(*guard.runtime(), device, {pool_id_hi, pool_id_lo}, filter, user);
    return s.ok() ? 0 : Fail(s);
  });
}

int memcoord_end_allocate_to_pool(int device, uint64_t pool_id_hi, uint64_t pool_id_lo) {
  using namespace memcoord::capi;
  return Boundary("memcoord_end_allocate_to_pool", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_end_allocate_to_pool");
    memcoord::Status s = End(*guard.runtime(), device, {pool_id_hi, pool_id_lo});
    return s.ok() ? 0 : Fail(s);
  });
}

int memcoord_release_pool(int device, uint64_t pool_id_hi, uint64_t pool_id_lo) {
  using namespace memcoord::capi;
  return Boundary("memcoord_release_pool", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_release_pool");
    memcoord::Status s = Release(*guard.runtime(), device, {pool_id_hi, pool_id_lo});
    return s.ok() ? 0 : Fail(s);
  });
}

}  // extern "C"
