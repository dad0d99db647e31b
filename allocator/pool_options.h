// PoolOptions: how a CachingPool (and the CorePool inside it) grows, packs and is named. Plain data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memcoord {

enum class PoolGrowth {
  kAuto,  // mapping when the backend supports it, else segments
  kMapping,
  kSegments,
};

// When a mapping arena packs: unmaps idle free chunks elsewhere in its cache and maps them where a miss
// needs memory, instead of growing. Packing keeps reserved memory near what live blocks need but costs
// driver calls (tens of microseconds a chunk on a GPU), and memory moved away may be wanted back.
enum class RemapPolicy {
  // Default. Under pressure (a limit that would be exceeded, a device nearly out of free memory) packs
  // whatever idle cache the miss needs, from both arenas. Without pressure, packs only at the pool's
  // high-water mark: from the request's arena, and from the other one too until it has moved 1/16 of the mark
  // that way in all; past that, each byte moved raises the mark by 1/64 of a byte (up to 1/64 of it). Memory
  // moved from one arena to the other is not taken back at an unchanged mark: that miss grows the pool
  // instead. A loop that keeps missing stops calling the driver after a round or two, a loop over the same
  // sizes after its first round, and a loop whose small and large requests take each other's idle chunks
  // after the first chunk that would have come back. Against raising the mark from the first byte moved and
  // packing only the request's arena, over 24 copies of each trace of bench/traces with every size but powers
  // of two scaled by a random 0.9-1.1 (bench/allocator/perturbed_side_by_side.py, 2026-12-05), the peaks
  // below expandable_segments' model on average: the alternating GPT-2/ResNet-50 run 14.8 MiB (1.2 before; no
  // higher in 23 copies of 24, 15 before), ResNet-50 37.0 (29.0), GPT-2 fp32 4.2 (0.8), GPT-2 bf16's variable
  // lengths 1,427 (1,435), GPT-2 generation 1.5 (6.2); units mapped +5%, +3%, 0, +0.3% and +5%. The rule on
  // coming back came later that day: before it, ResNet-50 on an H100 traded three units each way every step
  // of the 16 measured. With it, on the same copies: the alternating run 6.1 MiB below (no higher in 17 of
  // 24), ResNet-50 36.0, the others unchanged, and 4% fewer units on the alternating run. Arena::fit's rule
  // (806d1b0) moved them again: the README ("The caching pool") has its figures.
  kUnderPressure,
  // Packs from both arenas on every miss at the high-water mark and never raises the mark: a driver call on
  // each such miss even in a steady loop (on 24 perturbed copies of GPT-2 generation's trace it maps 2.6
  // times the default's units). For comparison (benchmarks) only.
  kEveryMiss,
};

struct PoolOptions {
  std::string name = "default";
  PoolGrowth growth = PoolGrowth::kAuto;
  RemapPolicy remap = RemapPolicy::kUnderPressure;
  std::size_t small_block_limit = 1 << 20;  // requests up to this go to the small arena
  // Quota on reserved bytes; 0: no limit but the device's. Enforced by the CachingPool's LimitAdaptor; a
  // CorePool on its own ignores it (put a LimitAdaptor under it instead).
  std::uint64_t limit_bytes = 0;
  // Mapping backends: the most physical memory the large arena maps in one driver allocation (a unit, rounded
  // up to the backend's chunk), cut on a grid of its multiples, except that a miss of more than
  // detail::kMaxUnitsPerMiss (32) units maps that many equal, larger ones (detail/map_units.h). The driver's
  // cost is per allocation whatever its size: on an H200 about 40 us with the GPU idle
  // (bench/gpu/vmm_handle_cost.py) and 45-85 us in a first training step, where cuMemSetAccess costs per
  // allocation in the range it grants (2 MiB units: 20-43 ms a GiB; 20 MiB: 2-4 ms). A unit is unmapped only
  // whole, so a free range keeps the units it covers only in part. How far a miss grows is not the unit's
  // business but large_grow_step_bytes'. 0: kDefaultLargeMapUnit, 40 MiB since 2026-12-07 (20 MiB before):
  // replays of bench/traces map a quarter fewer units at the same peaks, but GPT-2 bf16's, whose packing
  // unmaps whole units only (+60 MiB at --gpu-lag 0, -18 at 200: Replay.FortyMiBUnitsMapFewerAtNoHigherPeak),
  // and perturbed copies reserve as 20 MiB units did against expandable segments' model, but GPT-2 bf16 (+36
  // MiB median, still 1.4 GB below it) and the Llama (at most +100 MiB against +152); 60 and 80 MiB units
  // raised GPT-2 bf16's replayed peak by 147 MB and the Llama's by 71 (--gpu-lag 200). On an
  // H100 (bench/pytorch_runs/2026-12-07e) ResNet-50's steps after empty_cache() made 184 driver allocations
  // where 20 MiB units made 279, and device memory was expandable segments' to the byte or below it on all
  // five workloads of bench_allocators.py. The small arena maps single chunks.
  static constexpr std::size_t kDefaultLargeMapUnit = 40 << 20;
  std::size_t large_map_unit_bytes = 0;
  // Mapping backends, with grow_to_unit_end: the multiple of the segment's base a growing large-arena miss
  // maps on to (rounded up to the backend's chunk). 0: kDefaultLargeGrowStep, 20 MiB, expandable segments'
  // page. Apart from the unit, so that how far memory grows does not change with how coarsely it is mapped.
  static constexpr std::size_t kDefaultLargeGrowStep = 20 << 20;
  std::size_t large_grow_step_bytes = 0;
  // Mapping backends: a large-arena miss's first or last piece smaller than the unit (the grid cuts one where
  // the miss starts or ends between multiples) is mapped with its whole-unit neighbour as one driver
  // allocation (detail/map_units.h): fewer allocations, at coarser unmapping. Off by default: replays
  // (memcoord replay) of the traces recorded on the GPUs under memcoord map 22%, 21%, 24% and 9% fewer units
  // (GPT-2 fp32, the alternating pair, ResNet-50, the Llama) at peaks of +0, -2, -4 and +63 MiB, and
  // bench/traces' GPT-2 bf16 replays at 1.0128 of its peak request against 1.0079 (ResNet-50: 1.0020 against
  // 1.0037; those figures with grow_to_unit_end off). The misses, and with them the cuMemSetAccess calls that
  // cost most of a first step's driver time, stay as many. For runs whose first steps matter more than those
  // megabytes. On an H100 (2026-12-06) the Llama's first step made 526 allocations against 578 and the same
  // 264 cuMemSetAccess calls, 4 ms shorter (medians of 3 processes), at 40 MB more device memory.
  bool merge_unit_ends = false;
  // Mapping backends: a large-arena miss that grows a free run upward (or starts a segment) maps on to the
  // next multiple of large_grow_step_bytes (20 MiB) from the segment's base, within the free address space
  // there: expandable segments' rule, whose 20 MiB pages leave slack that the next requests take without a
  // miss. Never where the slack would press on a limit or on the device's free memory. Off, a miss maps its
  // exact shortfall: less memory, more misses (one cuMemSetAccess call each). On by default since an H100 run
  // (2026-12-06, bench/pytorch_runs/2026-12-06b, 3-6 processes each): with it, device memory equal to
  // expandable segments' to the byte on ResNet-50 and the alternating GPT-2/ResNet-50 pair and 10.01-10.16 GB
  // against 11.10 on the Llama (off: 12-16 MiB, 4 MiB and 1.0-1.1 GB below them); first-step misses 97
  // against expandable segments' 97 cuMemSetAccess calls, 183 against 182 and 182-186 against 156 (off: 120,
  // 200 and 262-264); first-step memory calls 20.5, 37.5 and 25.3 ms against their 24.3, 49.4 and 27.5 (off:
  // 29.7, 45.3 and 38.6; medians over the processes). Replays of bench/traces (--gpu-lag 200), on against
  // off: misses 230/280 (alternating_threads), 206/258 (GPT-2 fp32), 129/163 (ResNet-50), 196/271 (GPT-2
  // bf16), 79/464 (GPT-2 generation), 254/375 (the Llama); peaks +4, +2, +34, +14, +14 and +144 MiB, at or
  // below expandable segments' model (bench/allocator/expandable_model.py) on all six. Over 24 copies of
  // each with every size but powers of two scaled by a random 0.9-1.1, the median peak against the model
  // was +2 MiB on the alternating pair (-10 off), at or below it on the other four.
  bool grow_to_unit_end = true;
  // Address space reserved per arena range on mapping backends; 0: twice the device's total memory. A miss
  // the ranges cannot hold reserves another range (of at least the miss). MEMCOORD_ALLOC_CONF's
  // address_range: lets a process that shares its address space with other reservations (or an experiment on
  // how much the driver minds large reservations) choose less.
  std::uint64_t address_range_bytes = 0;
  // A miss that would leave the device with less free memory than this packs the cache first (pressure);
  // 0: 1/32 of the device's total memory. The device's free memory is read on a miss that maps, at most every
  // 50 ms for each reserve the device has to spare beyond the miss and the reserve, up to 1 s, and on every
  // such miss with less than one to spare (what the pool maps itself is counted in between):
  // detail/device_free_reading.h.
  std::uint64_t device_reserve_bytes = 0;
  // Packing may unmap a free chunk only once the work queued on the streams that last used it is done. True:
  // when the miss's own stream is the one stream that used the chunk, the host waits for that work: up to the
  // first marker (an event the pool records on its misses, and on its large frees at most once an interval:
  // large_free_marker_interval_us) after the chunk's last free. Without pressure only when that marker is
  // older than the miss's own and pack_waits_at_mark is on (so the GPU keeps the work queued after it;
  // otherwise the pool grows a little, or, when it would grow by 4 units or more and the stream's free units
  // hold that much, waits for the miss's own marker: CorePool::drain_for_large_shortfall); under pressure for
  // any marker, or for the whole stream when no marker covers the chunk. One exception to "keeps the work
  // queued after it": when the miss is the first call on its stream after a large free left a marker owed
  // (see large_free_marker_interval_us), that call records the owed marker just before the miss's own, and
  // waiting for it waits for all the work queued before the call (once per owed marker at most). Idle chunks
  // are always taken first, and chunks of other busy streams are skipped, so an allocation never waits for
  // another stream's work. (On a GPU the training stream is almost never idle, so a pool that packed only
  // idle chunks would grow in real training while packing in a replay of the same events, where streams are
  // always idle.) False: busy chunks are always skipped (pools whose streams must never be waited for, such
  // as capture pools); no markers are recorded.
  bool pack_waits_for_streams = true;
  // With pack_waits_for_streams: whether packing at the high-water mark without pressure waits for a marker
  // older than the miss's own. False: it takes only chunks whose work is done, and grows otherwise; the drain
  // for a shortfall of 4 units or more (CorePool::drain_for_large_shortfall) and the waits under pressure
  // stay, and markers are recorded as before (those use them). Why off by default: on an H100 under PyTorch
  // (bench/pytorch_runs/2026-12-06d) off used the same device memory as on in every process of five workloads
  // and removed the alternating GPT-2/ResNet-50 pair's waits (one of 1.4-16 ms in its first step, one of
  // 33-55 ms in step 2). On GPT-2 bf16, six processes each (2026-12-06e), both waited in the same steps
  // (drains; off once fewer), 104-125 ms in all, and their median steps spread alike (off 143.6-175.4 ms, on
  // 145.8-162.4). Replays and perturbed copies: README, "Measured under PyTorch". Conf key mark_waits.
  bool pack_waits_at_mark = false;
  // A free of a block of at least a chunk records a marker on its stream when the stream's newest is at
  // least this old (microseconds; 0: at every such free) while the pool is growing (a miss within the last
  // free_marker_growing_window_ms), and ten times this old otherwise, so that blocks freed before a miss can
  // be packed at it without draining the GPU's queue. Steady loops need those markers too: a block freed at
  // the end of one step and packed at a miss of the next, more than the window after the previous miss, is
  // otherwise covered only by that miss's own marker, and the pool grows instead. A large free too soon for a
  // marker leaves one owed, which the pool's next call on that stream records once the interval has passed.
  // One event (~2 us) at most that often per stream: a thousand a second while growing, a hundred in a steady
  // loop. With pack_waits_for_streams only.
  std::uint32_t large_free_marker_interval_us = 1000;
  std::uint32_t free_marker_growing_window_ms = 1000;
  // Free blocks each thread keeps for itself in front of the pool's lock (ThreadCacheAdaptor): at most this
  // many bytes per thread, blocks of at most thread_cache_block_bytes. 0 keeps none. Cached blocks are memory
  // the pool cannot hand to another thread nor merge, so the small arena maps more beside them: up to 2 MiB
  // (one small-arena chunk) a thread. On the H200, GPT-2 and ResNet-50 trained alternately (two threads
  // allocate: the training loop and autograd's) mapped 62 MiB of small blocks with 4 MiB a thread, 60 MiB
  // with 2 MiB (both before thread_cache_fence), 56 MiB with thread caches off, as expandable_segments does.
  // Even on one thread the cache leaves one chunk more (bench/traces replays: alternating 58 against 56),
  // through the blocks' layout rather than growth, which the fence below does not prevent; a 512 KiB cache
  // avoided it on alternating (not on ResNet-50: 56 against 54) but sends capi_bench's 1 MiB pair through the
  // pool's lock (on this project's 2-core test machine 100 ns a pair on one thread and 298 on two, against 37
  // with 2 MiB).
  std::size_t thread_cache_bytes = 2 << 20;
  std::size_t thread_cache_block_bytes = 1 << 20;
  // Before the small arena grows for a request the thread caches could have held, every thread's cache goes
  // back to the pool and the request is asked again (ThreadCacheLimits::fence_small_growth): a flush at each
  // such growth (a few dozen in a training run), so that blocks idle in one thread's cache are not mapped
  // again beside them for another thread. bench/traces/alternating's events dealt to two threads in turns of
  // seven (a made-up split: the shared traces name no thread) map a 60 MiB small arena without it, 58 with
  // it and 56 with no thread caches, the H200's 60 and expandable_segments' 56; the one-thread replays of
  // bench/traces are the same with and without it (the cache's other 2 MiB there is layout, not growth). On
  // the H200 itself (2026-12-05) the alternating run still mapped 60 MiB with the fence (56 with
  // thread_cache:0): what the real run's caches add is not growth the fence sees. Its trace recorded with its
  // threads (bench/traces/alternating_threads.trace.gz) replays to the same 60 and 56: the caches change
  // where small blocks go between growths (a block idle in one thread's cache is not there for the other's
  // next request, which splits another free block), not whether the arena grows. Returning a thread's cache
  // at each of its misses restores 56 there but makes capi_bench's rotating sizes miss every time (148 ns a
  // pair on this project's test machine against 37-42); limits on the blocks' age or count moved the replays
  // by a chunk either way, with no trend.
  bool thread_cache_fence = true;
  // A thread that stops allocating gives its cache back (ThreadCacheLimits::idle_misses): once this many
  // looks in a row by requests of other threads that missed their own caches (each looks at up to four
  // slots, round robin: one look a miss with two or three threads) found it idle, its cached blocks return
  // to the pool (0: never; PoolStats::idle_cache_flushes counts them). In PyTorch the training loop's thread
  // and autograd's take turns, each idle while the other runs, and each one's cache held blocks the other's
  // requests then split other free blocks for: the layout the paragraph above describes. Replays of
  // bench/traces/alternating_threads (2026-12-05): small arena 60 MiB without it, 56 with it
  // (expandable_segments' figure, and thread_cache:0's); over 24 copies with every size but powers of two
  // scaled by a random 0.9-1.1, a mean of 59.6 without, 57.5 with, 56.3 with thread_cache:0 (all before
  // RemapPolicy's packing of the other arena, which moves chunks between the arenas at the mark: the default
  // replay now ends with 58 MiB small and peaks lower, at expandable_segments' figure). A thread made
  // idle costs one flush (a membarrier) per idle spell; a steady loop whose threads all hit their caches
  // makes no look at all.
  std::uint32_t thread_cache_idle_misses = 16;
};

}  // namespace memcoord
