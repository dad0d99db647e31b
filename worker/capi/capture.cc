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
#include <array>
#include <mutex>
#include <span>
#include <vector>

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

// Destroys released private pools (no user left) with no live block and no filter call in progress or
// awaited. REQUIRES: slot.captures_mu held.
void CollectLocked(DeviceSlot& slot) {
  auto dead = std::remove_if(slot.captures.begin(), slot.captures.end(), [](const auto& c) {
    return c->uses == 0 && !c->routing && c->filter_calls == 0 && c->waiting == 0 &&
           c->pool->stats().live_blocks == 0;
  });
  slot.captures.erase(dead, slot.captures.end());
}

// A private pool keeps its memory mapped, and makes no stream query, while it has a user (its graphs replay
// into blocks that are free in its view: unmapping one would fault the replay; PyTorch's own allocator frees
// a graph pool's memory only once its use count is 0) and while any capture routes the device (its streams
// may be capturing for another pool, and a trim synchronizes them). CachingPool::set_captures_underway is
// that rule: no packing, no trim, no last-resort pass. A released pool is trimmed by empty_cache otherwise.
// REQUIRES: slot.captures_mu held.
void KeepMemoryLocked(DeviceSlot& slot) {
  const bool routed = slot.routing_captures.load(std::memory_order_relaxed) > 0;
  for (auto& c : slot.captures) c->pool->set_captures_underway(c->uses > 0 || routed);
}

// This thread's filter calls in progress, innermost first (a filter may allocate, so call filters again).
// An end or release made from inside a filter does not wait for the call it is made from.
struct FilterCall {
  const CapturePool* capture = nullptr;
  const FilterCall* outer = nullptr;
};
thread_local constinit const FilterCall* t_filter_calls = nullptr;

int OwnFilterCalls(const CapturePool& c) {
  int own = 0;
  for (const FilterCall* call = t_filter_calls; call != nullptr; call = call->outer)
    own += call->capture == &c;
  return own;
}

// REQUIRES: `lock` holds slot.captures_mu and `c` stopped routing. Returns once no other thread is inside a
// call of `c`'s filter: the caller of end (or release) may then free what the filter uses, as PyTorch's shim
// frees its filter after end. The lock is released while waiting.
void WaitForFilterCalls(std::unique_lock<std::mutex>& lock, CapturePool& c) {
  const int own = OwnFilterCalls(c);
  if (c.filter_calls <= own) return;
  ++c.waiting;
  c.calls_done.wait(lock, [&] { return c.filter_calls <= own; });
  --c.waiting;
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
  CapturePool* c = FindLocked(*slot, id);  // one whose users all released it revives: not yet destroyed
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
  c->uses += 1;
  c->route += 1;  // a filter call begun under an earlier route does not choose this one (AllocateForCapture)
  if (slot->routing_captures.fetch_add(1, std::memory_order_release) == 0) {
    TellPools(runtime, device, /*captures_underway=*/true);  // before the capture begins
  }
  KeepMemoryLocked(*slot);  // before any allocation reaches the pool (they take the lock)
  return Status::Ok();
}

// REQUIRES: `lock` holds slot.captures_mu and `c` routes. Ends its route; the device's pools may query
// events again once none is left (the routes begin before their captures and end after them). Returns once
// no other thread calls its filter (WaitForFilterCalls).
void StopRoutingLocked(Runtime& runtime, int device, DeviceSlot& slot, CapturePool& c,
                       std::unique_lock<std::mutex>& lock) {
  c.routing = false;
  c.filter = nullptr;
  if (slot.routing_captures.fetch_sub(1, std::memory_order_release) == 1) {
    TellPools(runtime, device, /*captures_underway=*/false);
  }
  KeepMemoryLocked(slot);
  WaitForFilterCalls(lock, c);
}

Status End(Runtime& runtime, int device, PoolId id) {
  MEMCOORD_ASSIGN_OR_RETURN(DeviceSlot * slot, SlotOf(runtime, device));
  std::unique_lock lock(slot->captures_mu);
  CapturePool* c = FindLocked(*slot, id);
  if (c == nullptr || !c->routing) {
    return FailedPrecondition(fmt::format(
        "memcoord_end_allocate_to_pool: pool {} on device {} is not routing allocations (no begin)",
        IdText(id), device));
  }
  StopRoutingLocked(runtime, device, *slot, *c, lock);  // its user stays until its release
  CollectLocked(*slot);  // a release while this end waited for a filter call left the pool to collect
  return Status::Ok();
}

Status Release(Runtime& runtime, int device, PoolId id) {
  MEMCOORD_ASSIGN_OR_RETURN(DeviceSlot * slot, SlotOf(runtime, device));
  std::unique_lock lock(slot->captures_mu);
  CapturePool* c = FindLocked(*slot, id);
  if (c == nullptr) {
    return NotFound(
        fmt::format("memcoord_release_pool: no private pool {} on device {}", IdText(id), device));
  }
  if (c->uses == 0) {
    return FailedPrecondition(fmt::format(
        "memcoord_release_pool: pool {} on device {} was released as many times as it was begun (its "
        "blocks still live keep it until they are freed)",
        IdText(id), device));
  }
  c->uses -= 1;
  if (c->uses > 0) return Status::Ok();  // another graph still replays into it
  if (c->routing) StopRoutingLocked(runtime, device, *slot, *c, lock);
  KeepMemoryLocked(*slot);  // released: its free memory may be trimmed once no capture routes the device
  CollectLocked(*slot);
  return Status::Ok();
}

}  // namespace

namespace {

// An open route copied out of the lock, so that its filter is called without it: a filter may call memcoord
// (stats, an allocation, end) on this device, which takes the lock. Its counted filter call keeps `capture`
// alive until EndFilterCallsLocked.
struct Route {
  CapturePool* capture = nullptr;
  std::uint64_t number = 0;
  memcoord_stream_filter filter = nullptr;
  void* user = nullptr;
};
constexpr std::size_t kInlineRoutes = 8;  // open routes on one device copied without a heap allocation

// Copies the open routes of `slot` into `inline_routes` (into `more` past kInlineRoutes) and counts a filter
// call on each. REQUIRES: slot.captures_mu held.
std::span<const Route> BeginFilterCallsLocked(DeviceSlot& slot,
                                              std::array<Route, kInlineRoutes>& inline_routes,
                                              std::vector<Route>& more) {
  std::size_t open = 0;
  for (const auto& c : slot.captures) open += c->routing ? 1 : 0;
  Route* out = inline_routes.data();
  if (open > inline_routes.size()) {
    more.resize(open);
    out = more.data();
  }
  std::size_t n = 0;
  for (auto& c : slot.captures) {
    if (!c->routing || c->filter == nullptr) continue;
    c->filter_calls += 1;
    out[n++] = Route{c.get(), c->route, c->filter, c->user};
  }
  return {out, n};
}

// Ends the filter calls BeginFilterCallsLocked counted; wakes ends waiting for them and destroys a pool
// released meanwhile that nothing keeps. REQUIRES: slot.captures_mu held.
void EndFilterCallsLocked(DeviceSlot& slot, std::span<const Route> routes) {
  bool released = false;
  for (const Route& r : routes) {
    r.capture->filter_calls -= 1;
    if (r.capture->waiting > 0) r.capture->calls_done.notify_all();
    released = released || r.capture->uses == 0;
  }
  if (released) CollectLocked(slot);
}

bool Accepts(const Route& route, StreamId stream) {
  FilterCall call{route.capture, t_filter_calls};
  t_filter_calls = &call;
  struct Pop {
    const FilterCall* outer;
    ~Pop() { t_filter_calls = outer; }
  } pop{call.outer};
  return route.filter(stream, route.user) != 0;
}

}  // namespace

std::optional<Result<void*>> AllocateForCapture(Runtime& runtime, int device, std::size_t bytes,
                                                StreamId stream) {
  DeviceSlot& slot = runtime.devices[device];
  std::array<Route, kInlineRoutes> inline_routes;
  std::vector<Route> more;
  std::span<const Route> routes;
  {
    std::lock_guard lock(slot.captures_mu);
    routes = BeginFilterCallsLocked(slot, inline_routes, more);
  }
  if (routes.empty()) return std::nullopt;
  const Route* chosen = nullptr;
  try {
    for (const Route& r : routes) {
      if (Accepts(r, stream)) {
        chosen = &r;
        break;
      }
    }
  } catch (...) {  // a C++ filter that throws: the calls still end (Boundary reports the exception)
    std::lock_guard lock(slot.captures_mu);
    EndFilterCallsLocked(slot, routes);
    throw;
  }
  std::lock_guard lock(slot.captures_mu);
  // Still valid here: its counted call kept it until now, and the lock is held from the count's end on.
  CapturePool* capture = chosen != nullptr ? chosen->capture : nullptr;
  const bool still_routed = capture != nullptr && capture->routing && capture->route == chosen->number;
  EndFilterCallsLocked(slot, routes);
  // A route that ended while its filter ran: the capture is over, and the default pool serves the stream.
  if (!still_routed) return std::nullopt;
  RelaxedCaptureMode relaxed(runtime.cuda_streams);
  return capture->pool->allocate(bytes, stream);
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
    if (free_block && c->uses == 0) CollectLocked(slot);
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

std::uint64_t TrimReleasedCapturePools(Runtime& runtime, int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  DeviceSlot& slot = runtime.devices[device];
  std::lock_guard lock(slot.captures_mu);
  std::uint64_t released = 0;
  for (auto& c : slot.captures) {
    if (c->uses == 0) released += c->pool->trim(0).released_bytes;  // nothing while a capture routes here
  }
  return released;
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
