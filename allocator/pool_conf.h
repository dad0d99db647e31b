// PoolConf: pool options set without code, the way PyTorch users set PYTORCH_CUDA_ALLOC_CONF. A conf is a
// comma-separated list of KEY:VALUE entries (spaces around them ignored, an empty conf changes nothing):
//   large_map_unit:SIZE      PoolOptions::large_map_unit_bytes   (0: the default, 40 MiB)
//   thread_cache:SIZE        PoolOptions::thread_cache_bytes     (0: no thread caches)
//   thread_cache_block:SIZE  PoolOptions::thread_cache_block_bytes
//   device_reserve:SIZE      PoolOptions::device_reserve_bytes   (0: 1/32 of the device)
//   remap:under-pressure|every-miss                              PoolOptions::remap
//   growth:auto|mapping|segments                                 PoolOptions::growth
//   thread_cache_fence:on|off PoolOptions::thread_cache_fence
//   thread_cache_idle_misses:N PoolOptions::thread_cache_idle_misses (0..1,000,000; 0: idle threads keep
//                            their caches)
//   free_marker_interval_us:N PoolOptions::large_free_marker_interval_us (0..10,000,000; 0: a marker at every
//                            large free while the pool grows)
//   merge_unit_ends:on|off   PoolOptions::merge_unit_ends
//   grow_to_unit_end:on|off  PoolOptions::grow_to_unit_end
//   mark_waits:on|off        PoolOptions::pack_waits_at_mark
//   address_range:SIZE       PoolOptions::address_range_bytes    (0: twice the device's memory)
//   large_grow_step:SIZE     PoolOptions::large_grow_step_bytes  (0: the default, 20 MiB)
// SIZE as common/bytes.h reads it ("20MiB", "512KiB", "0"). The worker applies $MEMCOORD_ALLOC_CONF to every
// pool it makes for the C ABI and PyTorch (WorkerOptions::alloc_conf); `memcoord replay --alloc-conf` replays
// a trace with the same options, so a setting can be judged on a recorded trace before a run uses it.
// Errors: INVALID_ARGUMENT naming the entry, what is wrong with it and what is accepted (an unknown key, a
// key given twice, a missing ':', a bad or out-of-range value); nothing is applied then.
#pragma once

#include <string_view>

#include "allocator/pool_options.h"
#include "common/result.h"

namespace memcoord {

// `base` with the conf's entries applied.
Result<PoolOptions> ApplyPoolConf(std::string_view conf, PoolOptions base);

// The accepted keys, for help texts: "large_map_unit, thread_cache, ...".
std::string_view PoolConfKeys();

}  // namespace memcoord
