// CUDA graph capture at the C ABI (memcoord_begin_allocate_to_pool and friends). While a capture routes
// allocations of a device, each allocation asks the open routes' filters whether its stream belongs to a
// capture; accepted ones come from that capture's private CachingPool, entered with the thread's capture
// mode relaxed so the pool may map memory while a stream is capturing. Without a route, an allocation on a
// capturing stream (cuda backends) that the default pool cannot serve from its own stream's cache without a
// driver call fails at once with a message saying why, before anything could break the capture; one it can
// serve that way is served (nothing reaches the driver), as every cache hit skips the check. Private pools
// are not reported to the coordinator; their counters are in the device stats.
//
// Lifetime: a private pool counts its users as PyTorch counts a graph pool's: each begin adds one (making the
// pool on the first), each release takes one. While it has a user, or while any capture routes its device,
// it keeps all its memory mapped (graphs replay into its free blocks) and neither trims, packs nor queries a
// stream. At 0 it stops routing and is released: empty_cache may trim it (TrimReleasedCapturePools), it is
// destroyed once its last block is freed, and a begin before that revives it. A release at 0 is
// FAILED_PRECONDITION; one of an unknown pool NOT_FOUND.
//
// Thread safety: DeviceSlot::captures_mu guards the routes; routing_captures is checked lock-free. Filters
// are called without the lock (a filter may call memcoord on the same device); end, and a release that
// stops a route, return only once no other thread is inside a call of that route's filter.
#pragma once

#include <cstdint>
#include <optional>

#include "worker/capi/runtime.h"

namespace memcoord::capi {

// nullopt when no open capture on `device` accepts `stream`.
std::optional<Result<void*>> AllocateForCapture(Runtime& runtime, int device, std::size_t bytes,
                                                StreamId stream);
// FAILED_PRECONDITION when the CUDA stream `stream` is being captured (a cudaStreamIsCapturing call: the
// Runtime's capture_check on CUDA backends). OK in builds without CUDA.
Status CheckNotCapturing(StreamId stream);
// Frees (or, with free_block false, records `stream` on) `ptr` if a private pool of `device` holds it;
// NOT_FOUND otherwise. Destroys a released private pool once its last block is freed.
Status ReleaseFromCapture(Runtime& runtime, int device, void* ptr, StreamId stream, bool free_block);
// Trims the free memory of every released private pool of `device` (no user left; nothing while a capture
// routes the device); returns the bytes released. Pools in use keep theirs.
std::uint64_t TrimReleasedCapturePools(Runtime& runtime, int device);
// A pool of `device` (-1: the primary) made after the worker may already route a capture there (a named
// pool made mid-capture): told that captures are underway when they are, as the device's other pools were.
void TellNewPool(Runtime& runtime, int device, CachingPool& pool);
// Every private pool of `device` (for stats; valid while the caller holds its CallGuard and no pool is
// released meanwhile, so callers copy what they need under the lock through this visitor).
void ForEachCapturePool(Runtime& runtime, int device, const std::function<void(CachingPool&)>& visit);

}  // namespace memcoord::capi
