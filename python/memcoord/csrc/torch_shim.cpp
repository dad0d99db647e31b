// memcoord's PyTorch shim: makes memcoord PyTorch's CUDA allocator with the hooks that PyTorch's Python API
// for pluggable allocators cannot set. Built against the installed torch (at pip-install time, or on first
// use through torch.utils.cpp_extension.load); the package works without it, with fewer guarantees.
//
// It creates a torch::cuda::CUDAPluggableAllocator whose malloc/free are libmemcoord_capi.so's
// memcoord_torch_malloc/free (C function pointers handed in from Python's ctypes: the shim does not link
// memcoord), and whose allocate/raw_alloc/raw_delete and DataPtr deleter call them directly, without
// CUDAPluggableAllocator's record of every block (MemcoordAllocator below, and block_devices.h; these
// overrides follow c10::Allocator from PyTorch 2.3 on, where allocate() is not const: on an older torch the
// shim does not build and memcoord.enable() falls back to PyTorch's Python pluggable path), then sets:
//   - record_stream -> memcoord_torch_record_stream (Tensor.record_stream is honoured);
//   - reset (torch.cuda.empty_cache) -> memcoord_empty_cache on every device;
//   - begin/end allocate-to-pool and release-pool (CUDA graph capture) -> memcoord's private capture pools,
//     with PyTorch's stream filter kept alive here until the capture's end;
//   - an allocation refused for want of memory (RESOURCE_EXHAUSTED) raises c10::OutOfMemoryError with
//     memcoord's message (torch.OutOfMemoryError in Python) instead of handing PyTorch a null pointer; any
//     other refusal (a capture it cannot serve, not initialized, a bad device) a plain c10::Error, so that
//     out-of-memory handlers (cuDNN's workspace retry, batch-size finders) do not take it for one;
//   - releasePool never throws (PyTorch calls it from ~CUDAGraph, where a throw ends the process);
//   - abandon_capture(), called by memcoord/_torch.py when CUDAGraph.capture_end (or capture_begin) raises,
//     ends and releases the pool route that a failed capture leaves open (AbandonCapture below);
//   - cacheInfo answers (MemcoordAllocator below): cuDNN's convolutions ask it for their largest workspace
//     when torch.backends.cudnn.benchmark is on, and CUDAPluggableAllocator's own raises ("does not yet
//     support cacheInfo"), which ended such training.
// Statistics and snapshots are served by the Python layer (memcoord/_torch.py) from memcoord's C API.
//
// Thread-safety: install() runs once, before CUDA is initialised (PyTorch refuses to swap an allocator in
// use). The hooks run on PyTorch's threads; the only shared state, the capture filters, is guarded by
// g_filters_mu; the routes each thread began are that thread's own (t_routes_begun).
// torch/extension.h first: it brings Python.h, which must precede the standard headers.
// clang-format off
#include <torch/extension.h>
// clang-format on
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <pybind11/stl.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <torch/version.h>
// PyTorch's host allocator takes part in graph captures from 2.11 on (the version this was run against; older
// ones are not asked for it, so that the shim still builds there): see EndHostCapture.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#include <ATen/core/CachingHostAllocator.h>
#define MEMCOORD_SHIM_HOST_CAPTURES 1
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "block_devices.h"

namespace {

// The C ABI's functions used here, with worker/memcoord.h's signatures.
using MallocFn = void* (*)(std::ptrdiff_t, int, void*);
using FreeFn = void (*)(void*, std::ptrdiff_t, int, void*);
using RecordStreamFn = void (*)(void*, void*);
using EmptyCacheFn = int (*)(int, std::uint64_t*);
using CacheInfoFn = int (*)(int, std::uint64_t*);
using DeviceCountFn = int (*)();
using LastErrorFn = const char* (*)();
using StreamFilterFn = int (*)(std::uintptr_t, void*);
using BeginPoolFn = int (*)(int, std::uint64_t, std::uint64_t, StreamFilterFn, void*);
using PoolFn = int (*)(int, std::uint64_t, std::uint64_t);

struct CApi {
  MallocFn malloc = nullptr;
  FreeFn free = nullptr;
  RecordStreamFn record_stream = nullptr;
  EmptyCacheFn empty_cache = nullptr;
  CacheInfoFn cache_info = nullptr;
  DeviceCountFn device_count = nullptr;
  LastErrorFn last_error = nullptr;
  BeginPoolFn begin_pool = nullptr;
  PoolFn end_pool = nullptr;
  PoolFn release_pool = nullptr;
};

// worker/memcoord.h's MEMCOORD_ERR_* codes acted on here (the shim includes none of memcoord's headers).
constexpr int kErrNotFound = 5;
constexpr int kErrFailedPrecondition = 9;

CApi g_capi;
bool g_installed = false;
std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> g_allocator;

using StreamFilter = std::function<bool(cudaStream_t)>;
using CaptureKey = std::tuple<int, std::uint64_t, std::uint64_t>;
std::mutex g_filters_mu;
std::map<CaptureKey, std::unique_ptr<StreamFilter>> g_filters;  // guarded by g_filters_mu

// The pools whose routes this thread began and has not ended, oldest first: AbandonCapture ends the last one
// when PyTorch's capture_end fails before ending it. PyTorch begins and ends a capture on one thread.
thread_local std::vector<CaptureKey> t_routes_begun;

std::string LastError() {
  const char* message = g_capi.last_error != nullptr ? g_capi.last_error() : nullptr;
  return message != nullptr && *message != '\0' ? std::string(message) : std::string("no message");
}

// Called by memcoord on the allocating thread while a capture is open; `user` is the capture's filter.
int CallFilter(std::uintptr_t stream, void* user) {
  try {
    const auto* filter = static_cast<const StreamFilter*>(user);
    return (*filter)(reinterpret_cast<cudaStream_t>(stream)) ? 1 : 0;
  } catch (...) {
    return 0;  // no exception crosses into memcoord's C code
  }
}

// The out-of-memory message, built without iostreams: this is the one path that runs while memory is
// short, and formatting numbers through std::ostream is where a shim with a private libstdc++ crashed.
std::string OomMessage(std::size_t size, int device, const std::string& why) {
  return "memcoord could not allocate " + std::to_string(size) + " bytes on device " +
         std::to_string(device) + ": " + why;
}

// Whether memcoord's last error names a code other than RESOURCE_EXHAUSTED. memcoord_torch_malloc returns
// no code, but every last error starts with its code's name ("FAILED_PRECONDITION: ..."), as
// memcoord/_capi.py's fail_pointer reads it; a text naming none is taken as out of memory, as there.
bool NamesAnotherCode(const std::string& why) {
  const std::size_t colon = why.find(':');
  if (colon == 0 || colon == std::string::npos) return false;
  for (std::size_t i = 0; i < colon; ++i) {
    if ((why[i] < 'A' || why[i] > 'Z') && why[i] != '_') return false;
  }
  return why.compare(0, colon, "RESOURCE_EXHAUSTED") != 0;
}

void* Allocate(std::size_t size, int device, cudaStream_t stream) {
  if (size == 0) return nullptr;  // PyTorch's empty tensors: no memory, no deleter call
  void* ptr = g_capi.malloc(static_cast<std::ptrdiff_t>(size), device, stream);
  if (ptr == nullptr) {
    const std::string why = LastError();
    // One std::string: c10::str then returns it as is, with no std::ostream (see OomMessage).
    TORCH_CHECK(!NamesAnotherCode(why), OomMessage(size, device, why));
    TORCH_CHECK_WITH(OutOfMemoryError, false, OomMessage(size, device, why));
  }
  return ptr;
}

void Free(void* ptr, std::size_t size, int device, cudaStream_t stream) {
  if (ptr == nullptr) return;
  g_capi.free(ptr, static_cast<std::ptrdiff_t>(size), device, stream);
}

using PluggableAllocator = torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator;

memcoord::shim::BlockDevices& Devices() {
  static auto* devices = new memcoord::shim::BlockDevices();  // never destroyed: see block_devices.h
  return *devices;
}

// The DataPtr deleter of every block (and raw_delete): PyTorch's DataPtr holds the block's address as its
// context, as CUDAPluggableAllocator's do (Allocator::raw_allocate relies on it). The free's stream is 0: the
// block's own allocation stream, as worker/memcoord.h's memcoord_device_free says, which is the stream
// CUDAPluggableAllocator would pass.
void DeleteBlock(void* ptr) {
  if (ptr == nullptr) return;
  g_capi.free(ptr, 0, Devices().take(ptr), nullptr);
}

void* AllocateOn(std::size_t size, c10::DeviceIndex device, cudaStream_t stream) {
  void* ptr = Allocate(size, device, stream);
  if (ptr == nullptr) return nullptr;
  try {
    Devices().remember(ptr, device);
  } catch (...) {  // no memory for the record: the block is returned rather than lost
    Free(ptr, size, device, stream);
    throw;
  }
  return ptr;
}

c10::DeviceIndex CurrentDevice() {
  c10::DeviceIndex device = -1;
  C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
  return device;
}

// A CUDAPluggableAllocator that answers cacheInfo as PyTorch's own allocator does: the larger of the device's
// free memory and the largest block cached (memcoord_cache_info; a library without it: the device's free
// memory alone). memcoord maps more on a miss; a request it cannot serve raises torch.OutOfMemoryError,
// after which cuDNN halves its workspace and tries again.
class MemcoordAllocator final : public PluggableAllocator {
 public:
  MemcoordAllocator(std::function<void*(std::size_t, int, cudaStream_t)> alloc_fn,
                    std::function<void(void*, std::size_t, int, cudaStream_t)> free_fn)
      : PluggableAllocator(std::move(alloc_fn), std::move(free_fn)) {}

  // PyTorch's allocations and frees, straight to memcoord (AllocateOn, DeleteBlock) rather than through
  // CUDAPluggableAllocator's std::functions and its per-block record.
  c10::DataPtr allocate(std::size_t size) override {
    const c10::DeviceIndex device = CurrentDevice();
    void* ptr = AllocateOn(size, device, c10::cuda::getCurrentCUDAStream(device));
    return {ptr, ptr, &DeleteBlock, c10::Device(c10::DeviceType::CUDA, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &DeleteBlock; }
  void* raw_alloc(std::size_t size) override {
    const c10::DeviceIndex device = CurrentDevice();
    return AllocateOn(size, device, c10::cuda::getCurrentCUDAStream(device));
  }
  void* raw_alloc_with_stream(std::size_t size, cudaStream_t stream) override {
    return AllocateOn(size, CurrentDevice(), stream);
  }
  void raw_delete(void* ptr) override { DeleteBlock(ptr); }

  void cacheInfo(c10::DeviceIndex device, std::size_t* largest_block) override {
    c10::cuda::CUDAGuard on_device(device);
    std::uint64_t largest = 0;
    if (g_capi.cache_info != nullptr && g_capi.cache_info(static_cast<int>(device), &largest) == 0) {
      *largest_block = std::max(*largest_block, static_cast<std::size_t>(largest));
      return;
    }
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    *largest_block = std::max(*largest_block, free_bytes);
  }
};

void EmptyCache() {
  const int devices = g_capi.device_count();
  for (int device = 0; device < devices; ++device) {
    (void)g_capi.empty_cache(device, nullptr);
  }
}

// PyTorch's beginAllocateToPool(device, mempool_id, filter). Generic so that it fits the setter's
// std::function whichever integer type this torch uses for the device.
// The filter is made here and stored only once memcoord has accepted it: a begin for a pool already
// capturing is refused before anything changes (replacing the stored filter would leave memcoord calling a
// freed one), and a begin memcoord refuses frees its filter. g_filters_mu is held across begin_pool, so two
// begins of one pool cannot both pass the check; memcoord never calls back into code taking it.
template <typename Device, typename PoolId, typename Filter>
void BeginAllocateToPool(Device device, PoolId pool, Filter filter) {
  const CaptureKey key{static_cast<int>(device), static_cast<std::uint64_t>(pool.first),
                       static_cast<std::uint64_t>(pool.second)};
  auto owned = std::make_unique<StreamFilter>(std::move(filter));
  std::lock_guard lock(g_filters_mu);
  // The slot first (empty): a map insertion that throws after memcoord took the filter would free it.
  auto [slot, inserted] = g_filters.try_emplace(key);
  // A capture whose cudaStreamEndCapture failed leaves its pool here too: PyTorch 2.11 then skips
  // endAllocateToPool (and never releases that graph's pool), and its own allocator refuses a retry likewise.
  TORCH_CHECK(
      inserted, "memcoord: CUDA graph pool (", std::get<1>(key), ", ", std::get<2>(key), ") on device ",
      std::get<0>(key),
      " is already capturing: another capture into it is open, or one failed without ending it (PyTorch "
      "does not end a pool's capture when cudaStreamEndCapture fails); end the open one, or capture "
      "into a new pool (torch.cuda.graph_pool_handle())");
  const int code =
      g_capi.begin_pool(std::get<0>(key), std::get<1>(key), std::get<2>(key), &CallFilter, owned.get());
  if (code != 0) {
    const std::string why = LastError();
    g_filters.erase(slot);
    TORCH_CHECK(false, "memcoord could not route allocations to CUDA graph pool (", std::get<1>(key), ", ",
                std::get<2>(key), ") on device ", std::get<0>(key), ": ", why);
  }
  slot->second = std::move(owned);
  t_routes_begun.push_back(key);
}

// Ends memcoord's route of `key` and frees its filter, whatever end_pool returns: memcoord calls a filter
// only while the pool routes, and end_pool fails only where it does not (no begin, or memcoord shut down
// since), so no failure leaves memcoord holding the filter; keeping it would refuse every later begin into
// the pool. Returns end_pool's code.
int EndRoute(const CaptureKey& key) {
  const int code = g_capi.end_pool(std::get<0>(key), std::get<1>(key), std::get<2>(key));
  std::lock_guard lock(g_filters_mu);
  g_filters.erase(key);
  return code;
}

template <typename Device, typename PoolId>
void EndAllocateToPool(Device device, PoolId pool) {
  const CaptureKey key{static_cast<int>(device), static_cast<std::uint64_t>(pool.first),
                       static_cast<std::uint64_t>(pool.second)};
  if (auto it = std::find(t_routes_begun.rbegin(), t_routes_begun.rend(), key); it != t_routes_begun.rend()) {
    t_routes_begun.erase(std::next(it).base());
  }
  const int code = EndRoute(key);
  TORCH_CHECK(code == 0, "memcoord could not end CUDA graph pool (", std::get<1>(key), ", ", std::get<2>(key),
              ") on device ", std::get<0>(key), ": ", LastError());
}

// PyTorch's releasePool: called from ~CUDAGraph (implicitly noexcept: a throw there ends the process) and at
// interpreter exit, perhaps after memcoord_shutdown(), so it never throws. NOT_FOUND (no such pool: its
// begin was refused) and FAILED_PRECONDITION (memcoord not initialized, or the pool already released as
// often as begun) leave nothing to release; anything else is warned of, once.
template <typename Device, typename PoolId>
void ReleasePool(Device device, PoolId pool) noexcept {
  try {
    const int code = g_capi.release_pool(static_cast<int>(device), static_cast<std::uint64_t>(pool.first),
                                         static_cast<std::uint64_t>(pool.second));
    if (code == 0 || code == kErrNotFound || code == kErrFailedPrecondition) return;
    // One std::string, as in OomMessage.
    TORCH_WARN_ONCE("memcoord could not release CUDA graph pool (" +
                    std::to_string(static_cast<std::uint64_t>(pool.first)) + ", " +
                    std::to_string(static_cast<std::uint64_t>(pool.second)) + ") on device " +
                    std::to_string(static_cast<int>(device)) + ": " + LastError());
  } catch (...) {
    // A warning handler that raises (warnings as errors), or no memory for the text: nothing may escape.
  }
}

#ifdef MEMCOORD_SHIM_HOST_CAPTURES
// Whether this torch's host (pinned memory) allocator ends captures: PyTorch 2.11's CUDAGraph begins and ends
// each capture's pool in at::getHostAllocator(at::kCUDA) too.
template <typename Host, typename = void>
struct HostEndsCaptures : std::false_type {};
template <typename Host>
struct HostEndsCaptures<
    Host, std::void_t<decltype(std::declval<Host&>().end_allocate_to_pool(std::declval<c10::MempoolId_t>()))>>
    : std::true_type {};

template <typename Host>
void EndHostCaptureIn(Host* host, const CaptureKey& key) {
  // A template, so that a torch without the call compiles none of this.
  if constexpr (HostEndsCaptures<Host>::value) {
    using Id = c10::MempoolId_t;
    const Id pool{static_cast<Id::first_type>(std::get<1>(key)),
                  static_cast<Id::second_type>(std::get<2>(key))};
    host->end_allocate_to_pool(pool);
  }
}
#endif

// Ends the pool's capture in PyTorch's host allocator too, where it has one (else does nothing): after a
// failed capture its record of the pool as capturing refuses a retry into that pool with
// "beginAllocateToPool: already recording to mempool_id", under PyTorch's own device allocator as under
// memcoord. The host pool's user is not released: PyTorch's host allocator asserts on a begin into a pool it
// holds with no users.
void EndHostCapture([[maybe_unused]] const CaptureKey& key) {
#ifdef MEMCOORD_SHIM_HOST_CAPTURES
  EndHostCaptureIn(at::getHostAllocator(at::kCUDA), key);
#endif
}

// How many pool routes this thread began and has not ended: memcoord/_torch.py reads it around
// CUDAGraph.capture_begin, to abandon a route begun by a capture_begin that then raised.
std::size_t RoutesBegun() noexcept { return t_routes_begun.size(); }

// Called (from memcoord/_torch.py) when torch.cuda.CUDAGraph.capture_end raised on this thread
// (`capture_failed`), or capture_begin raised after beginning a route (not `capture_failed`). When the route
// this thread began last is still open (PyTorch 2.11 skips endAllocateToPool when cudaStreamEndCapture fails
// and, the capture never having ended, ~CUDAGraph skips releasePool), it would stay open for good: trims of
// the device release nothing while a capture routes it, memcoord would go on calling the dead graph's filter,
// and a retry into the pool would be refused. So the route is ended, the filter freed, and the user that
// begin added released, as PyTorch never will; for a failed capture, PyTorch's host allocator's capture of
// the pool is ended too (EndHostCapture). A capture_end that raised after ending its route left nothing open
// here: nothing is done, as PyTorch may yet release that pool itself. Never throws. Returns whether a route
// was ended.
bool AbandonCapture(bool capture_failed) noexcept {
  try {
    if (t_routes_begun.empty()) return false;
    const CaptureKey key = t_routes_begun.back();
    t_routes_begun.pop_back();
    const auto [device, hi, lo] = key;
    if (EndRoute(key) != 0) {  // not routing after all, or memcoord shut down: nothing to release
      TORCH_WARN_ONCE("memcoord could not end the failed capture's CUDA graph pool (" + std::to_string(hi) +
                      ", " + std::to_string(lo) + ") on device " + std::to_string(device) + ": " +
                      LastError());
      return false;
    }
    ReleasePool(device, std::make_pair(hi, lo));
    if (capture_failed) {
      try {
        EndHostCapture(key);
      } catch (
          const std::exception& error) {  // not capturing there (it ended, or never began): nothing to end
        TORCH_WARN_ONCE(std::string("memcoord could not end the failed capture's host pool: ") +
                        error.what());
      }
    }
    return true;
  } catch (...) {
    return false;  // a warning handler that raises, or no memory for the text
  }
}

template <typename T>
T FunctionAt(std::uintptr_t address, const char* name, bool required) {
  TORCH_CHECK(address != 0 || !required, "memcoord shim: ", name, " is missing from libmemcoord_capi.so");
  return reinterpret_cast<T>(address);
}

// install(addresses): the C ABI functions by name -> address (0: absent). Returns which hooks were set.
std::map<std::string, bool> Install(const std::map<std::string, std::uintptr_t>& addresses) {
  TORCH_CHECK(!g_installed, "memcoord shim: install() was already called in this process");
  auto at = [&](const char* name) {
    auto it = addresses.find(name);
    return it == addresses.end() ? std::uintptr_t{0} : it->second;
  };
  g_capi.malloc = FunctionAt<MallocFn>(at("memcoord_torch_malloc"), "memcoord_torch_malloc", true);
  g_capi.free = FunctionAt<FreeFn>(at("memcoord_torch_free"), "memcoord_torch_free", true);
  g_capi.last_error = FunctionAt<LastErrorFn>(at("memcoord_last_error"), "memcoord_last_error", true);
  g_capi.record_stream = FunctionAt<RecordStreamFn>(at("memcoord_torch_record_stream"), "", false);
  g_capi.empty_cache = FunctionAt<EmptyCacheFn>(at("memcoord_empty_cache"), "", false);
  g_capi.cache_info = FunctionAt<CacheInfoFn>(at("memcoord_cache_info"), "", false);
  g_capi.device_count = FunctionAt<DeviceCountFn>(at("memcoord_device_count"), "", false);
  g_capi.begin_pool = FunctionAt<BeginPoolFn>(at("memcoord_begin_allocate_to_pool"), "", false);
  g_capi.end_pool = FunctionAt<PoolFn>(at("memcoord_end_allocate_to_pool"), "", false);
  g_capi.release_pool = FunctionAt<PoolFn>(at("memcoord_release_pool"), "", false);

  // As createCustomAllocator makes a CUDAPluggableAllocator (init marks it initialized), with cacheInfo.
  auto allocator = std::make_shared<MemcoordAllocator>(&Allocate, &Free);
  allocator->init(0);
  MemcoordAllocator* pluggable = allocator.get();
  std::map<std::string, bool> hooks;
  hooks["cache_info"] = true;
  hooks["cache_info_cached_blocks"] = g_capi.cache_info != nullptr;  // else the device's free memory only
  hooks["record_stream"] = g_capi.record_stream != nullptr;
  if (g_capi.record_stream != nullptr) {
    pluggable->set_record_stream_fn(
        [](void* ptr, cudaStream_t stream) { g_capi.record_stream(ptr, stream); });
  }
  hooks["empty_cache"] = g_capi.empty_cache != nullptr && g_capi.device_count != nullptr;
  if (hooks["empty_cache"]) {
    pluggable->set_reset_fn([] { EmptyCache(); });
  }
  hooks["graph_pools"] =
      g_capi.begin_pool != nullptr && g_capi.end_pool != nullptr && g_capi.release_pool != nullptr;
  if (hooks["graph_pools"]) {
    pluggable->set_begin_allocate_to_pool(
        [](auto device, auto pool, auto filter) { BeginAllocateToPool(device, pool, std::move(filter)); });
    pluggable->set_end_allocate_to_pool_fn([](auto device, auto pool) { EndAllocateToPool(device, pool); });
    pluggable->set_release_pool([](auto device, auto pool) { ReleasePool(device, pool); });
  }
  torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(allocator);
  g_allocator = allocator;
  g_installed = true;
  return hooks;
}

bool Installed() { return g_installed; }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "memcoord's PyTorch allocator shim (see memcoord/csrc/torch_shim.cpp)";
  m.def("install", &Install, "Makes memcoord PyTorch's CUDA allocator; addresses: C ABI function -> address");
  m.def("installed", &Installed, "Whether install() ran in this process");
  m.def("abandon_capture", &AbandonCapture, pybind11::arg("capture_failed") = true,
        "After CUDAGraph.capture_end (capture_failed) or capture_begin raised on this thread: ends and "
        "releases the pool route it left open");
  m.def("routes_begun", &RoutesBegun, "How many pool routes this thread began and has not ended");
}
