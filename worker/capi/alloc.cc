// Allocation entry points (memcoord.h): one CallGuard, one acquire load for the device's pool, then the
// pool. No process-wide lock (a miss in the thread's cache takes the device pool's mutex); a named pool is
// found by comparing the names the C ABI made (NamedPoolTable), also without a lock, but for pools beyond the
// table's (runtime.h), which the Worker's list finds under its lock. Allocations and frees
// on a device's default pool (PyTorch's malloc and free among them) try the thread cache first
// (CachingPool::allocate_cached, free_cached: no Result or Status built) and take the full path only when
// it declines.
// A cache hit makes no CUDA call: the capture check (a cudaStreamIsCapturing per call, which also takes a
// driver lock every thread shares) runs only when the pool's driver-free hit refuses, i.e. only before an
// allocation that could map memory, make a stream wait, query a stream or record the marker a large free
// owed (at most once per marker interval per stream).
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <string_view>

#include "worker/capi/capture.h"
#include "worker/capi/errors.h"
#include "worker/capi/runtime.h"

namespace {

using memcoord::Result;
using memcoord::Status;
using memcoord::StreamId;
using memcoord::capi::Boundary;
using memcoord::capi::CallGuard;
using memcoord::capi::Fail;
using memcoord::capi::FailNotInitialized;
using memcoord::capi::Runtime;

bool IsDefaultName(const char* pool) { return pool == nullptr || std::strcmp(pool, "default") == 0; }

// "default@N" names device N's default pool in the Worker's list: never a named pool of the C ABI, so it is
// refused before any lookup (the Worker's list, searched once the table is full, would find device N's).
bool IsReservedName(std::string_view name) { return name.starts_with("default@"); }

// The device's default pool when it exists and no capture routes allocations (one acquire load each), so
// that a thread-cache hit or free needs nothing else; nullptr sends the call down the full path.
memcoord::CachingPool* PoolWithoutCaptures(Runtime& runtime, int device) {
  if (device == -1) device = runtime.primary_device;
  if (device < 0 || device >= memcoord::capi::kMaxDevices) return nullptr;
  const auto& d = runtime.devices[device];
  if (d.routing_captures.load(std::memory_order_acquire) > 0) return nullptr;
  return d.default_pool.load(std::memory_order_acquire);
}

// The full path: capture routing, the pool made on first use, and the capture check before the pool may
// reach the driver. `cache_tried`: the caller already asked the device's default pool for a cached block.
Result<void*> AllocateOnDevice(Runtime& runtime, int device, std::size_t bytes, StreamId stream,
                               bool cache_tried = false) {
  if (device == -1) device = runtime.primary_device;
  if (device >= 0 && device < memcoord::capi::kMaxDevices &&
      runtime.devices[device].routing_captures.load(std::memory_order_acquire) > 0) {
    if (auto routed = memcoord::capi::AllocateForCapture(runtime, device, bytes, stream)) return *routed;
  }
  MEMCOORD_ASSIGN_OR_RETURN(memcoord::CachingPool * pool, memcoord::capi::DevicePool(runtime, device));
  if (!cache_tried) {
    if (void* hit = pool->allocate_cached(bytes, stream)) return hit;
  }
  if (runtime.capture_check != nullptr) MEMCOORD_RETURN_IF_ERROR(runtime.capture_check(stream));
  return pool->allocate(bytes, stream);
}

// Frees `ptr` into `pool`, first recording `stream` when the caller names one it used the block on (the
// pool ignores the block's own allocation stream). NOT_FOUND when `ptr` is no live block of `pool`.
Status FreeInto(memcoord::CachingPool& pool, void* ptr, StreamId stream) {
  if (stream != memcoord::kDefaultStream) MEMCOORD_RETURN_IF_ERROR(pool.record_stream(ptr, stream));
  return pool.deallocate(ptr);
}

Status FreeOnDevice(Runtime& runtime, int device, void* ptr, StreamId stream) {
  if (ptr == nullptr) return memcoord::InvalidArgument("free of a NULL pointer");
  MEMCOORD_ASSIGN_OR_RETURN(memcoord::CachingPool * pool, memcoord::capi::DevicePool(runtime, device));
  Status status = FreeInto(*pool, ptr, stream);
  if (status.code() != memcoord::StatusCode::kNotFound) return status;
  if (device == -1) device = runtime.primary_device;
  Status captured = memcoord::capi::ReleaseFromCapture(runtime, device, ptr, stream, /*free_block=*/true);
  if (captured.code() != memcoord::StatusCode::kNotFound) return captured;
  // Said here rather than by the pool, whose text would name the record_stream of a free with a stream.
  return memcoord::NotFound(fmt::format(
      "free of {} on device {}: not a live block of that device's default pool '{}' (never allocated "
      "there, or already freed)",
      ptr, device, pool->name()));
}

// The named pool of the C ABI holding `ptr`, for an error's hint (failure paths only: a lookup per pool).
const memcoord::capi::NamedPoolTable::Entry* NamedPoolHolding(const Runtime& runtime, const void* ptr) {
  const memcoord::capi::NamedPoolTable& table = runtime.named_pools;
  const int count = table.count.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    if (table.entries[i].pool->block_size(ptr).ok()) return &table.entries[i];
  }
  return nullptr;
}

// A free without a device (memcoord_free(NULL, p)): the primary device first, then the others.
Status FreeAnywhere(Runtime& runtime, void* ptr, StreamId stream) {
  Status status = FreeOnDevice(runtime, -1, ptr, stream);
  if (status.code() != memcoord::StatusCode::kNotFound) return status;
  for (int d = 0; d < runtime.device_count && d < memcoord::capi::kMaxDevices; ++d) {
    if (d == runtime.primary_device || runtime.devices[d].default_pool.load() == nullptr) continue;
    Status other = FreeOnDevice(runtime, d, ptr, stream);
    if (other.code() != memcoord::StatusCode::kNotFound) return other;
  }
  std::string text = fmt::format(
      "memcoord_free: {} is not a live block of any device's default pool (never allocated there, or already "
      "freed)",
      ptr);
  if (const auto* named = NamedPoolHolding(runtime, ptr)) {
    text += fmt::format(
        "; it is a block of pool '{}': a named pool's block is freed with its pool's name, "
        "memcoord_free(\"{}\", ptr)",
        named->name, named->name);
  }
  return memcoord::NotFound(text);
}

// The C ABI's pool named `name`, or nullptr: a scan of the published entries (no lock), then, once the
// table is full, the Worker's list.
memcoord::CachingPool* FindNamedPool(Runtime& runtime, std::string_view name) {
  if (IsReservedName(name)) return nullptr;
  const memcoord::capi::NamedPoolTable& table = runtime.named_pools;
  const int count = table.count.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    if (table.entries[i].name == name) return table.entries[i].pool;
  }
  return count == memcoord::capi::kMaxNamedPools ? runtime.worker->pool(name) : nullptr;
}

// The pool named `name`, made on first use on the primary device. Names the Worker refuses (pool_name.h)
// and the device pools' own ("default@N") are INVALID_ARGUMENT.
Result<memcoord::CachingPool*> NamedPool(Runtime& runtime, std::string_view name) {
  if (IsReservedName(name)) {
    return memcoord::InvalidArgument(
        fmt::format("pool name '{}' is reserved: 'default@N' names device N's default pool (use "
                    "memcoord_device_alloc/memcoord_device_free for it)",
                    name));
  }
  if (memcoord::CachingPool* pool = FindNamedPool(runtime, name)) return pool;
  memcoord::capi::NamedPoolTable& table = runtime.named_pools;
  std::lock_guard lock(table.add_mu);
  if (memcoord::CachingPool* pool = FindNamedPool(runtime, name)) return pool;  // made meanwhile
  MEMCOORD_ASSIGN_OR_RETURN(memcoord::CachingPool * pool,
                            runtime.worker->create_pool(runtime.worker->pool_options(std::string(name))));
  memcoord::capi::TellNewPool(runtime, runtime.primary_device, *pool);  // named pools: the primary device
  const int count = table.count.load(std::memory_order_relaxed);
  if (count < memcoord::capi::kMaxNamedPools) {
    table.entries[count] = {std::string(name), pool};
    table.count.store(count + 1, std::memory_order_release);
  }
  return pool;
}

// A named pool's allocation: a thread-cache hit first, then the capture check before anything that could
// reach the driver, as on the device pools.
Result<void*> AllocateNamed(Runtime& runtime, std::string_view name, std::size_t bytes, StreamId stream) {
  MEMCOORD_ASSIGN_OR_RETURN(memcoord::CachingPool * pool, NamedPool(runtime, name));
  if (void* hit = pool->allocate_cached(bytes, stream)) return hit;
  if (runtime.capture_check != nullptr) MEMCOORD_RETURN_IF_ERROR(runtime.capture_check(stream));
  return pool->allocate(bytes, stream);
}

Status FreeNamed(Runtime& runtime, std::string_view name, void* ptr) {
  if (IsReservedName(name)) {
    return memcoord::NotFound(
        fmt::format("memcoord_free: no pool named '{}': 'default@N' is reserved for device N's default pool "
                    "(use memcoord_device_free for it)",
                    name));
  }
  memcoord::CachingPool* pool = FindNamedPool(runtime, name);
  if (pool == nullptr) return memcoord::NotFound(fmt::format("memcoord_free: no pool named '{}'", name));
  if (pool->free_cached(ptr, memcoord::kDefaultStream)) return Status::Ok();
  return pool->deallocate(ptr);
}

void* ReturnBlock(const Result<void*>& block) {
  if (block.ok()) return *block;
  (void)Fail(block.status());
  return nullptr;
}

int ReturnStatus(const Status& status) { return status.ok() ? 0 : Fail(status); }

// The full paths behind AllocateBlock and FreeBlock, kept out of line: their Result and Status objects would
// otherwise give the hit path a large stack frame to set up.
[[gnu::noinline]] void* AllocateAfterMiss(Runtime& runtime, int device, std::size_t bytes, StreamId stream,
                                          bool cache_tried) {
  return ReturnBlock(AllocateOnDevice(runtime, device, bytes, stream, cache_tried));
}
[[gnu::noinline]] int FreeAfterMiss(Runtime& runtime, int device, void* ptr, StreamId stream) {
  return ReturnStatus(FreeOnDevice(runtime, device, ptr, stream));
}

// The entry points' allocation and free on a device: a thread-cache hit first, which builds no Result or
// Status, then the full path (without asking the cache twice). Errors go to memcoord_last_error().
void* AllocateBlock(Runtime& runtime, int device, std::size_t bytes, StreamId stream) {
  memcoord::CachingPool* pool = PoolWithoutCaptures(runtime, device);
  if (pool != nullptr) {
    if (void* hit = pool->allocate_cached(bytes, stream)) return hit;
  }
  return AllocateAfterMiss(runtime, device, bytes, stream, /*cache_tried=*/pool != nullptr);
}

int FreeBlock(Runtime& runtime, int device, void* ptr, StreamId stream) {
  if (ptr != nullptr) {
    memcoord::CachingPool* pool = PoolWithoutCaptures(runtime, device);
    if (pool != nullptr && pool->free_cached(ptr, stream)) return 0;
  }
  return FreeAfterMiss(runtime, device, ptr, stream);
}

Status RecordStreamAnywhere(Runtime& runtime, void* ptr, StreamId stream) {
  if (ptr == nullptr) return memcoord::InvalidArgument("memcoord_record_stream: NULL pointer");
  Status status =
      memcoord::NotFound(fmt::format("memcoord_record_stream: {} is not a live block of any pool", ptr));
  for (int d = 0; d < runtime.device_count && d < memcoord::capi::kMaxDevices; ++d) {
    memcoord::CachingPool* pool = runtime.devices[d].default_pool.load(std::memory_order_acquire);
    if (pool != nullptr) {
      Status s = pool->record_stream(ptr, stream);
      if (s.code() != memcoord::StatusCode::kNotFound) return s;
    }
    Status s = memcoord::capi::ReleaseFromCapture(runtime, d, ptr, stream, /*free_block=*/false);
    if (s.code() != memcoord::StatusCode::kNotFound) return s;
  }
  const memcoord::capi::NamedPoolTable& named = runtime.named_pools;
  const int count = named.count.load(std::memory_order_acquire);
  for (int i = 0; i < count; ++i) {
    Status s = named.entries[i].pool->record_stream(ptr, stream);
    if (s.code() != memcoord::StatusCode::kNotFound) return s;
  }
  return status;
}

}  // namespace

extern "C" {

void* memcoord_alloc(const char* pool, size_t bytes, uintptr_t stream) {
  return Boundary("memcoord_alloc", static_cast<void*>(nullptr), [&]() -> void* {
    CallGuard guard;
    Runtime* runtime = guard.runtime();
    if (runtime == nullptr) return (FailNotInitialized("memcoord_alloc"), nullptr);
    if (IsDefaultName(pool)) return AllocateBlock(*runtime, -1, bytes, stream);
    return ReturnBlock(AllocateNamed(*runtime, pool, bytes, stream));
  });
}

int memcoord_free(const char* pool, void* ptr) {
  return Boundary("memcoord_free", 13, [&] {
    CallGuard guard;
    Runtime* runtime = guard.runtime();
    if (runtime == nullptr) return FailNotInitialized("memcoord_free");
    if (ptr == nullptr) return Fail(memcoord::InvalidArgument("memcoord_free: NULL pointer"));
    if (pool == nullptr) return ReturnStatus(FreeAnywhere(*runtime, ptr, memcoord::kDefaultStream));
    if (IsDefaultName(pool)) return FreeBlock(*runtime, -1, ptr, memcoord::kDefaultStream);
    return ReturnStatus(FreeNamed(*runtime, pool, ptr));
  });
}

void* memcoord_device_alloc(int device, size_t bytes, uintptr_t stream) {
  return Boundary("memcoord_device_alloc", static_cast<void*>(nullptr), [&]() -> void* {
    CallGuard guard;
    if (guard.runtime() == nullptr) return (FailNotInitialized("memcoord_device_alloc"), nullptr);
    return AllocateBlock(*guard.runtime(), device, bytes, stream);
  });
}

int memcoord_device_free(int device, void* ptr, uintptr_t stream) {
  return Boundary("memcoord_device_free", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_device_free");
    return FreeBlock(*guard.runtime(), device, ptr, stream);
  });
}

int memcoord_record_stream(void* ptr, uintptr_t stream) {
  return Boundary("memcoord_record_stream", 13, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_record_stream");
    return ReturnStatus(RecordStreamAnywhere(*guard.runtime(), ptr, stream));
  });
}

void* memcoord_torch_malloc(ptrdiff_t size, int device, void* stream) {
  // An empty tensor: PyTorch's pluggable layer asks for 0 bytes (and the versions whose DataPtr holds a
  // deleter context later free the NULL they got). NULL is what PyTorch's own caching allocator gives 0
  // bytes; no memory, no error, no worker started for it.
  if (size == 0) return nullptr;
  return Boundary("memcoord_torch_malloc", static_cast<void*>(nullptr), [&]() -> void* {
    CallGuard guard;
    if (guard.runtime() == nullptr) {
      if (memcoord::capi::InitOnFirstUse("memcoord_torch_malloc") != 0)
        return nullptr;  // last_error says why
      guard.refresh();
      if (guard.runtime() == nullptr) return (FailNotInitialized("memcoord_torch_malloc"), nullptr);
    }
    if (size < 0) {
      (void)Fail(memcoord::InvalidArgument(fmt::format(
          "memcoord_torch_malloc: size must be 0 or more, got {}", static_cast<long long>(size))));
      return nullptr;
    }
    return AllocateBlock(*guard.runtime(), device, static_cast<std::size_t>(size),
                         reinterpret_cast<StreamId>(stream));
  });
}

void memcoord_torch_free(void* ptr, ptrdiff_t /*size*/, int device, void* stream) {
  if (ptr == nullptr) return;  // an empty tensor's NULL from memcoord_torch_malloc(0), as cudaFree(NULL)
  Boundary("memcoord_torch_free", 0, [&] {
    CallGuard guard;
    if (guard.runtime() == nullptr) return FailNotInitialized("memcoord_torch_free");
    return FreeBlock(*guard.runtime(), device, ptr, reinterpret_cast<StreamId>(stream));
  });
}

void memcoord_torch_record_stream(void* ptr, void* stream) {
  (void)memcoord_record_stream(ptr, reinterpret_cast<uintptr_t>(stream));
}

}  // extern "C"
