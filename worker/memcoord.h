/* memcoord C ABI: the worker runtime for programs that cannot use C++ (ctypes, PyTorch's pluggable
 * allocator). One process-wide worker, made by an explicit memcoord_init() (the only global state in
 * memcoord). Every call may be made from any thread (memcoord_step_begin/step_end mark the training loop's
 * steps: call them from that loop's thread, or their steps interleave in no useful order); no exception or
 * C++ type crosses this boundary: every entry point
 * turns a failure (bad argument, call before memcoord_init() or after memcoord_shutdown(), host out of
 * memory, an internal error) into a status code and memcoord_last_error(), never a crash.
 *
 * Environment read by memcoord_init(): rank discovery as Worker::init (MEMCOORD_RANK / Open MPI / PMIx /
 * Slurm), MEMCOORD_COORDINATOR (attach to a coordinator; unset: standalone), MEMCOORD_TOKEN(_FILE),
 * MEMCOORD_BACKEND (auto, host, cuda, cuda-vmm, virtual; default auto), MEMCOORD_DEVICES (host/virtual:
 * number of simulated devices, default 1), MEMCOORD_ALLOC_CONF (the options of every pool the C ABI makes,
 * "key:value,...": allocator/pool_conf.h; a bad entry fails memcoord_init() naming it).
 *
 * Errors: calls returning int give 0 on success, otherwise a status code (gRPC numbering, MEMCOORD_ERR_*
 * below); memcoord_last_error() then describes the last failure on the calling thread.
 *
 * Devices: `device` is a CUDA ordinal (on host/virtual a simulated device index); -1 means the primary
 * device (the one bound from the local rank). Each device has its own default pool, created on first use
 * on that device.
 *
 * Lifetime: memcoord_shutdown() may run while other threads are inside any memcoord call. It first stops
 * new calls from reaching the worker (they fail with MEMCOORD_ERR_FAILED_PRECONDITION, allocations return
 * NULL, memcoord_wait_abort() returns at once), then waits for the calls in flight to leave, then destroys
 * the worker and releases every pool. Blocks still live then are lost (their memory goes back to the
 * device); freeing them afterwards is an error, not a crash. memcoord_shutdown() must not be called from the
 * abort callback (MEMCOORD_ERR_FAILED_PRECONDITION). memcoord_init() called from inside another memcoord call
 * (a stream filter) or the abort callback returns 0 while memcoord is initialized, and
 * MEMCOORD_ERR_FAILED_PRECONDITION while a shutdown runs (which waits for that very call to return). The
 * allocation hot path (memcoord_torch_malloc/free, memcoord_alloc/free with a NULL pool) takes no
 * process-wide lock: a hit in the thread's cache takes none, and a miss takes the device pool's mutex. */
#ifndef MEMCOORD_WORKER_MEMCOORD_H_
#define MEMCOORD_WORKER_MEMCOORD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (the subset memcoord returns). */
#define MEMCOORD_OK 0
#define MEMCOORD_ERR_INVALID_ARGUMENT 3
#define MEMCOORD_ERR_NOT_FOUND 5
#define MEMCOORD_ERR_RESOURCE_EXHAUSTED 8
#define MEMCOORD_ERR_FAILED_PRECONDITION 9
#define MEMCOORD_ERR_ABORTED 10 /* the coordinator aborted this process's group: restart the job */
#define MEMCOORD_ERR_UNIMPLEMENTED 12
#define MEMCOORD_ERR_INTERNAL 13
#define MEMCOORD_ERR_UNAVAILABLE 14
#define MEMCOORD_ERR_DEADLINE_EXCEEDED 4

/* The exit code a process uses when it ends because its group was aborted (a peer rank died), so launchers
 * (torchrun, mpirun, memcoord-launch) can tell it from a crash (1), a signal (128+N) and success, and
 * restart the job. 75 is EX_TEMPFAIL in <sysexits.h>: "try again later". */
#define MEMCOORD_EXIT_ABORTED 75

/* Creates the process's worker. Calling it again while initialized does nothing and returns 0. */
int memcoord_init(void);
/* Allocates from the named pool (NULL or "default": the primary device's default pool; another name: an
 * isolated pool on the primary device, created on first use). A name is 1 to 128 bytes of UTF-8 text
 * without control characters, not starting with "default@" (the device pools' names); anything else is
 * INVALID_ARGUMENT, as is 0 bytes. NULL on failure. */
void* memcoord_alloc(const char* pool, size_t bytes, uintptr_t stream);
/* Returns a block to its pool (NULL: whichever device default pool holds it). 5 (not found) for a pointer
 * the pool did not hand out. */
int memcoord_free(const char* pool, void* ptr);
/* Safe points of the training loop: commands from the coordinator run inside memcoord_step_end(). After the
 * coordinator aborted the group, memcoord_step_end() returns MEMCOORD_ERR_ABORTED (10) and
 * memcoord_last_error() names the dead rank and the reason. */
int memcoord_step_begin(void);
int memcoord_step_end(void);
/* Last completed step, -1 before memcoord_init(). */
int64_t memcoord_step(void);
/* Detaches from the coordinator and releases every pool (see Lifetime above). 0 also when not initialized.
 * A process that ends without memcoord_shutdown() (nor memcoord_fail()) is treated as dead by the
 * coordinator: its session breaks, and the group's other ranks are aborted ("session stream broke"). End a
 * successful run with memcoord_shutdown(), a failed one with memcoord_fail() (and then, optionally,
 * memcoord_shutdown()); _exit(), a signal or a crash counts as a death. */
int memcoord_shutdown(void);
/* The process is about to end because it failed: ends its coordinator session as failed, so the coordinator
 * marks this rank dead at once and aborts its group, every live peer learning "rank R (host h, pid p) is
 * dead: <reason>" (MEMCOORD_ERR_ABORTED at its next step end, memcoord_wait_abort, the abort callback). Pools
 * stay usable (frees during teardown are fine); a later memcoord_shutdown() releases them and sends nothing
 * more. Bounded like memcoord_shutdown()'s detach (about 0.5 s when the coordinator does not answer).
 * `reason`: UTF-8 text ("exited on ValueError: boom"); NULL or "" gives a generic one, longer than 1000 bytes
 * is cut, and invalid UTF-8 bytes become '?'. 0 also when not attached (standalone, or the coordinator
 * unreachable: nothing is sent) and when called again (the session already ended).
 * MEMCOORD_ERR_FAILED_PRECONDITION before memcoord_init(), after memcoord_shutdown(), or from inside the
 * abort callback. */
int memcoord_fail(const char* reason);
/* The last error on this thread ("" when none). Valid until the next memcoord call on this thread, also in
 * the thread's pthread key destructors; at most 4095 bytes (a longer text ends in "... (truncated)"). */
const char* memcoord_last_error(void);

/* --- devices and streams ---------------------------------------------------------------------------- */
/* Devices this process may use (CUDA ordinals 0..n-1, or simulated devices); -1 before memcoord_init(). */
int memcoord_device_count(void);
/* Allocates from `device`'s default pool (-1: the primary device). 0 bytes is INVALID_ARGUMENT. NULL on
 * failure. */
void* memcoord_device_alloc(int device, size_t bytes, uintptr_t stream);
/* Frees a block of `device`'s default pool. `stream` is the stream the caller last used the block on (the
 * stream it was allocated on, in PyTorch): when it is not the allocation stream, the block is reused only
 * after that stream's queued work. 0 means "no other stream" here (only the allocation stream's work is
 * waited for): to name CUDA's legacy default stream, record it with memcoord_record_stream first. */
int memcoord_device_free(int device, void* ptr, uintptr_t stream);
/* Tensor.record_stream: the live block at `ptr` is also used on `stream`; when freed it is not reused
 * before the work queued on `stream` up to the free is done. Searches the device pools, the capture pools
 * and the first 64 named pools. 5 (not found) when none holds ptr. */
int memcoord_record_stream(void* ptr, uintptr_t stream);

/* --- PyTorch pluggable allocator ------------------------------------------------------------------------
 * torch.cuda.memory.CUDAPluggableAllocator(path, "memcoord_torch_malloc", "memcoord_torch_free"): `device`
 * routes to that device's default pool; memcoord_init() is called on the process's first allocation (only
 * then: after memcoord_shutdown(), or when that init failed, allocations fail until the program calls
 * memcoord_init() itself). The free's stream is used
 * as memcoord_device_free() says. A size of 0 (PyTorch's empty tensors) returns NULL and sets no error, as
 * PyTorch's own caching allocator answers 0 bytes, and memcoord_torch_free(NULL, ...) does nothing, as
 * cudaFree(NULL) does; a negative size returns NULL with INVALID_ARGUMENT. memcoord_torch_record_stream
 * has the signature of PyTorch's record_stream hook (void(void* ptr, cudaStream_t stream)). */
void* memcoord_torch_malloc(ptrdiff_t size, int device, void* stream);
void memcoord_torch_free(void* ptr, ptrdiff_t size, int device, void* stream);
void memcoord_torch_record_stream(void* ptr, void* stream);

/* --- statistics and cache control ---------------------------------------------------------------------
 * Versioned structs: the caller zeroes the struct and sets struct_size = sizeof(struct); memcoord fills only
 * the fields that fit in struct_size and that it knows (a newer header's extra fields stay zero), and
 * rejects a struct_size smaller than version 1 (MEMCOORD_ERR_INVALID_ARGUMENT). */
typedef struct memcoord_device_stats {
  size_t struct_size;
  int32_t device; /* the device these figures are for (-1 resolved to the primary) */
  int32_t pools;  /* pools summed here: the default pool, named pools and capture pools on this device */
  /* Bytes. "Peak" fields (these and peak_live_blocks) are the sum of each pool's own peak since its last
   * reset: the device's peak while one pool is used, else an upper bound of it, since pools peak at
   * different times and no device-wide counter is kept. With a CUDA graph capture pool beside the default
   * pool, 64 MiB live in one, freed, then 64 MiB in the other read 128 MiB. */
  uint64_t allocated_bytes; /* live blocks, rounded sizes */
  uint64_t peak_allocated_bytes;
  uint64_t requested_bytes; /* live blocks, sizes as asked */
  uint64_t peak_requested_bytes;
  uint64_t reserved_bytes; /* taken from the device (mapped chunks or segments) */
  uint64_t peak_reserved_bytes;
  uint64_t active_bytes; /* allocated plus freed blocks still awaiting other streams */
  uint64_t peak_active_bytes;
  uint64_t largest_free_bytes; /* largest block allocatable without calling the backend (max over pools) */
  uint64_t limit_bytes;        /* sum of pool limits; 0 when no pool has one */
  /* Counts since the pool was made. */
  uint64_t live_blocks;
  uint64_t allocations; /* successful allocations */
  uint64_t frees;       /* allocations - live_blocks */
  uint64_t cache_hits;  /* allocations served without the backend */
  uint64_t ooms;
  uint64_t backend_allocations; /* units mapped (one driver allocation each) or segments allocated */
  uint64_t backend_frees;       /* units unmapped or segments released */
  uint64_t backend_allocated_bytes;
  uint64_t backend_released_bytes;
  uint64_t trims;
  uint64_t trimmed_bytes;
  uint64_t device_total_bytes; /* as the backend reports it */
  /* Version 2. Host waits a miss made so that packing could unmap a busy free block (up to the block's
   * marker), and those of them that synchronized a whole stream (no marker covered the block). */
  uint64_t pack_waits;
  uint64_t pack_stream_syncs;
  /* Version 3. Misses (allocations the cache could not serve: each grew the pool) and the host time they
   * took in nanoseconds, packing, waits and driver calls included; pack_wait_ns is the part spent in packing
   * waits. Steady clock. */
  uint64_t misses;
  uint64_t miss_ns;
  uint64_t pack_wait_ns;
  /* Version 4. The most live_blocks reached since the pool's last peak reset (memcoord_reset_peak_stats),
   * summed over pools as the byte peaks are (see above): at least live_blocks. A pool's is exact while one
   * thread allocates from it; with several, it may count blocks the other threads keep in their caches. */
  uint64_t peak_live_blocks;
  /* Version 5. Rounded sizes of every successful allocation and of every free since the pool was made, as
   * the caller sees them (PyTorch's "allocated_bytes.all.allocated" and ".freed"): their difference is
   * allocated_bytes. Like the counts above, a capture pool's leave the sums when the pool is destroyed. */
  uint64_t allocated_bytes_total;
  uint64_t freed_bytes_total;
  /* Version 6. Exact sums of every thread cache's counters that allocations made to settle the peaks: one
   * whenever an allocation's cheap bound on a peak passes it. Each reads every thread cache's counters, which
   * their threads write at every call, so with several threads allocating a sum costs a cache miss per
   * thread: where the alloc/free cost can grow with the number of threads. One thread sums only at a new
   * peak. */
  uint64_t peak_sums;
  /* Version 7. Frees of a block that another thread allocated (a training loop's backward thread freeing the
   * forward pass's blocks): each takes the thread caches' slow path, locks instead of the lock-free free of a
   * thread's own block. */
  uint64_t other_thread_frees;
} memcoord_device_stats;
/* Bytes; sizeof(memcoord_device_stats) grows with later versions. A caller built against version 1 (192
 * bytes) gets version 1's fields; the library fills what struct_size covers. */
#define MEMCOORD_DEVICE_STATS_V1_SIZE 192
#define MEMCOORD_DEVICE_STATS_V2_SIZE 208
#define MEMCOORD_DEVICE_STATS_V3_SIZE 232
#define MEMCOORD_DEVICE_STATS_V4_SIZE 240
#define MEMCOORD_DEVICE_STATS_V5_SIZE 256
#define MEMCOORD_DEVICE_STATS_V6_SIZE 264
#define MEMCOORD_DEVICE_STATS_V7_SIZE 272

/* Sums every pool on `device` (-1: primary): the default pool, named pools and capture pools. Most figures
 * are counters read without a lock, but it takes locks: the worker's pool list's (to copy the list), the
 * device's capture pools' (held while they are read), and each pool's own (largest_free_bytes is computed
 * from its free blocks), so it waits for a pool's allocation in progress. device_total_bytes asks the
 * backend once (cudaMemGetInfo on cuda backends). Not for an allocation's hot path. */
int memcoord_device_stats_get(int device, memcoord_device_stats* out);
/* PyTorch's cacheInfo: in `largest_bytes`, the largest block a caller may ask for on `device` (-1: the
 * primary) without running it out: the larger of the device's free memory and the largest free block cached
 * by the device's default pool (the one memcoord_torch_malloc uses; named and capture pools' blocks cannot
 * serve it). cuDNN sizes its convolution workspaces by it when torch.backends.cudnn.benchmark is on; the
 * memcoord Python package's shim answers PyTorch with it. Takes the pool's lock once. */
int memcoord_cache_info(int device, uint64_t* largest_bytes);
/* Resets the peak counters of every pool on `device` to their current values. */
int memcoord_reset_peak_stats(int device);
/* Returns every cached (free) byte of the pools on `device` to the device (trim to 0); live blocks stay.
 * `released_bytes` (may be NULL) receives the bytes returned. */
int memcoord_empty_cache(int device, uint64_t* released_bytes);
/* PyTorch's torch.cuda.set_per_process_memory_fraction: caps what the default pool of `device` (-1: the
 * primary; the pool memcoord_torch_malloc uses) may reserve at `fraction` of the device's total memory,
 * rounded down to a byte. Accepted: 0 < fraction <= 1 (1: the whole device, i.e. no cap); anything else is
 * INVALID_ARGUMENT. The pool's cache is trimmed to fit; a cap below the bytes live in the pool is
 * FAILED_PRECONDITION and leaves the cap as it was (PyTorch would take it and fail later allocations). An
 * allocation the cap refuses fails as an out-of-memory does (torch.OutOfMemoryError). The cap is the pool's
 * limit: a quota the coordinator sets later replaces it, and this replaces the coordinator's. */
int memcoord_set_memory_fraction(int device, double fraction);
/* The default pool's cap on `device` as a fraction of the device's total memory, in `fraction`: 1 when it
 * has none (PyTorch's default). */
int memcoord_memory_fraction(int device, double* fraction);
/* A JSON snapshot of the pools on `device`: {"device":d,"trace":[..],"pools":[{"name":..,"stats":{..},
 * "segments_available":true,"segments":[{"address":..,"size":..,"small":bool,"mapped_bytes":..,"blocks":[{
 * "address":..,"size":..,"requested":..,"state":"active_allocated"|"inactive"|"unmapped","stream":..}]}]}]}.
 * Blocks tile their segment in address order. "mapped_bytes" appears only on pools that grow by mapping
 * memory into reserved address ranges (stats "maps_chunks": cuda-vmm, host), whose segments are such ranges
 * and whose "unmapped" blocks are address space with no memory behind it. Each pool's segments are taken at
 * one instant under its lock; its stats just before. "trace" lists the recorded allocation history
 * (memcoord_record_history below; empty when never on). NULL on failure; free it with
 * memcoord_free_string(). */
char* memcoord_snapshot_json(int device);
void memcoord_free_string(char* s);
/* Allocation history, what PyTorch's torch.cuda.memory._record_memory_history keeps: with `enabled` != 0,
 * every pool on `device` (-1: primary), present or made later, records its allocations and frees into one
 * history of the last `max_entries` events (1..MEMCOORD_HISTORY_MAX_ENTRIES; it starts empty, and the pools'
 * thread caches are off meanwhile, so each call costs a little more). memcoord_snapshot_json then carries
 * them as "trace": [{"action":"alloc"|"free","addr":..,"size":..,"stream":..,"time_us":..}], oldest first
 * (sizes as asked; no stack frames). With `enabled` == 0, recording stops and the events stay in snapshots.
 * Capture pools (memcoord_begin_allocate_to_pool) are not recorded. */
#define MEMCOORD_HISTORY_MAX_ENTRIES 10000000ULL
int memcoord_record_history(int device, int enabled, uint64_t max_entries);

/* --- aborts ----------------------------------------------------------------------------------------------
 * When the coordinator aborts this process's group (a rank died), the process learns it here. */
typedef struct memcoord_abort_info {
  size_t struct_size;
  int32_t aborted;      /* 1 once the group was aborted, else 0 (the other fields are then empty) */
  int32_t dead_rank;    /* the rank whose death caused it; -1 when the coordinator named none */
  int64_t time_unix_ms; /* when this process learned it (Unix time, ms) */
  char reason[512];     /* the coordinator's reason, NUL-terminated, truncated to fit */
} memcoord_abort_info;
#define MEMCOORD_ABORT_INFO_V1_SIZE 536 /* bytes */

int memcoord_abort_info_get(memcoord_abort_info* out);
/* Blocks until the group is aborted (returns MEMCOORD_ERR_ABORTED), `timeout_ms` passes (returns
 * MEMCOORD_ERR_DEADLINE_EXCEEDED; a negative timeout waits forever), or memcoord_shutdown() begins (returns
 * MEMCOORD_ERR_FAILED_PRECONDITION). For a watcher thread that must learn of a death while the training
 * thread is blocked inside a collective. */
int memcoord_wait_abort(int timeout_ms);
/* Sets (NULL: clears) the function called once when the group is aborted, on a memcoord thread, with the
 * same facts as memcoord_abort_info_get(); `user` is passed back. When the group was already aborted, it is
 * called at once on the calling thread before this returns. It must not block for long, call
 * memcoord_shutdown(), nor let a C++ exception out (that ends the process: std::terminate). Setting another
 * callback, or NULL, first waits for a call of the one it replaces that is running on another thread, so
 * `user` may be freed once this returns. */
typedef void (*memcoord_abort_callback)(const memcoord_abort_info* info, void* user);
int memcoord_set_abort_callback(memcoord_abort_callback callback, void* user);
/* A backstop for a process whose own abort handling may not run in time (a Python watcher thread waits for
 * the interpreter lock, which a main thread blocked in a C call may hold for minutes): once the group is
 * aborted, if the process is still alive `grace_ms` later, memcoord writes the abort to stderr (waiting at
 * most 200 ms for it: stderr may be a full pipe) and ends it with _exit(exit_code), from a memcoord thread
 * (no atexit handlers, no flush of stdio buffers).
 * Accepted: exit_code 1..255 (MEMCOORD_EXIT_ABORTED is the convention) and grace_ms 0..600000, or
 * exit_code 0 to turn it off again (a timer already started still fires). Set after the abort, the timer
 * starts at once. Off by default. */
int memcoord_set_abort_exit(int exit_code, int grace_ms);

/* --- CUDA graph capture ---------------------------------------------------------------------------------
 * PyTorch's beginAllocateToPool/endAllocateToPool/releasePool. Between begin and end, an allocation on
 * `device` whose stream `filter(stream, user)` accepts (non-zero) comes from the private pool `pool_id`
 * (made on first use), which never synchronizes a stream nor queries one while capturing. Several captures
 * may be open at once; a begin on a pool that is routing already is refused (FAILED_PRECONDITION).
 * A pool counts its users as PyTorch's own allocator does: each begin adds one (several graphs may share a
 * pool), each memcoord_release_pool() takes one off. While it has users it keeps all its memory mapped,
 * free blocks included (the graphs replay into them): memcoord_empty_cache and trims skip it. At 0 users
 * it is destroyed once its last block is freed; until then a begin revives it and empty_cache may trim
 * its free memory. While any capture routes a device, trims of that device's pools release nothing (a
 * trim may synchronize a stream or unmap, which would invalidate the capture).
 * `filter` is called without memcoord's locks held, on the allocating thread, and may call memcoord;
 * memcoord_end_allocate_to_pool (and a release that ends a route) waits for calls of that route's filter
 * running on other threads, so `user` may be freed once it returns.
 * Without a begin, an allocation on a stream that is being captured (cuda backends) fails at once with
 * MEMCOORD_ERR_FAILED_PRECONDITION saying why, instead of breaking the capture. */
typedef int (*memcoord_stream_filter)(uintptr_t stream, void* user);
int memcoord_begin_allocate_to_pool(int device, uint64_t pool_id_hi, uint64_t pool_id_lo,
                                    memcoord_stream_filter filter, void* user);
int memcoord_end_allocate_to_pool(int device, uint64_t pool_id_hi, uint64_t pool_id_lo);
/* One user fewer (see above). NOT_FOUND for a pool this device never made, or made and destroyed already (a
 * pool with no users and no live blocks goes at once); FAILED_PRECONDITION for one whose users are all
 * released but whose live blocks keep it. */
int memcoord_release_pool(int device, uint64_t pool_id_hi, uint64_t pool_id_lo);

#ifdef __cplusplus
}
#endif

#endif /* MEMCOORD_WORKER_MEMCOORD_H_ */
