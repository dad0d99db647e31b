/* memcoord C ABI: the worker runtime for programs that cannot use C++ (ctypes, PyTorch's pluggable
 * allocator). One process-wide worker, made by an explicit memcoord_init() (the only global state in
 * memcoord). Every call is thread-safe; no exception or C++ type crosses this boundary.
 *
 * Environment read by memcoord_init(): rank discovery as Worker::init (MEMCOORD_RANK / Open MPI / PMIx /
 * Slurm), MEMCOORD_COORDINATOR (attach to a coordinator; unset: standalone), MEMCOORD_TOKEN(_FILE),
 * MEMCOORD_BACKEND (auto, host, cuda, cuda-vmm, virtual; default auto).
 *
 * Errors: calls returning int give 0 on success, otherwise a status code (gRPC numbering: 3 invalid
 * argument, 5 not found, 8 out of memory, 9 failed precondition, 14 unavailable); memcoord_last_error()
 * then describes the last failure on the calling thread. */
#ifndef MEMCOORD_WORKER_MEMCOORD_H_
#define MEMCOORD_WORKER_MEMCOORD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates the process's worker. Calling it again while initialized does nothing and returns 0. */
int memcoord_init(void);
/* Allocates from the named pool (NULL: "default"), created on first use. NULL on failure. */
void* memcoord_alloc(const char* pool, size_t bytes, uintptr_t stream);
/* Returns a block to its pool (NULL: "default"). 5 (not found) for a pointer the pool did not hand out. */
int memcoord_free(const char* pool, void* ptr);
/* Safe points of the training loop: commands from the coordinator run inside memcoord_step_end(). */
int memcoord_step_begin(void);
int memcoord_step_end(void);
/* Last completed step, -1 before memcoord_init(). */
int64_t memcoord_step(void);
/* Detaches from the coordinator and releases every pool. Blocks still live are lost. */
int memcoord_shutdown(void);
/* The last error on this thread ("" when none). Valid until the next memcoord call on this thread. */
const char* memcoord_last_error(void);

/* PyTorch pluggable allocator (torch.cuda.memory.CUDAPluggableAllocator(path, "memcoord_torch_malloc",
 * "memcoord_torch_free")): the "default" pool; memcoord_init() is called on first use. */
void* memcoord_torch_malloc(ptrdiff_t size, int device, void* stream);
void memcoord_torch_free(void* ptr, ptrdiff_t size, int device, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* MEMCOORD_WORKER_MEMCOORD_H_ */
