// driver_call_timer.so: counts and times the CUDA driver's virtual-memory calls of whatever allocator runs in
// the process (PyTorch's native and expandable-segments allocators, memcoord's cuda-vmm backend), so their
// driver cost can be set side by side in one real run. LD_PRELOAD it; it interposes the runtime's
// cudaGetDriverEntryPoint and cudaGetDriverEntryPointByVersion (through which PyTorch and memcoord both fetch
// cuMemCreate and the rest), cudaMalloc/cudaFree (the native allocator's segments) and the runtime calls an
// allocator makes beside them on its slow path (cudaMemGetInfo, events, stream queries and waits, the current
// device), wrapping each call named below with a clock. PyTorch itself makes the beside calls too (it asks
// for the current device on every operation), so those are compared between allocators, not read alone, and
// are timed only with DRIVER_CALL_TIMER_BESIDE=1 (else forwarded as they are).
// Failed calls are counted like the others.
//
// What it does not see: a library that reads libcuda's symbols with dlsym on its own handle; a libcudart
// that is not in the global scope (loaded RTLD_LOCAL before anything loaded it globally: the forwarding
// dlsym(RTLD_NEXT) cannot find it, and the wrapped runtime calls fail with cudaErrorCallRequiresNewerDriver);
// code built with a per-thread default stream (its *_ptsz entry points). In a PyTorch process, torch loads
// libcudart globally. Each wrapped driver function keeps one real pointer, the last fetched (each has one
// version in the API these allocators use).
//
// Read the totals with driver_call_timer_read(calls, ns) (arrays of DCT_KINDS, in the order of
// driver_call_timer_names()), e.g. from Python through ctypes.CDLL(None); at exit they are printed to stderr
// when DRIVER_CALL_TIMER_REPORT=1. The memory calls (the kinds before cudaMemGetInfo) are also summed per
// calling thread, by Linux thread id, for the first DCT_MAX_THREADS threads that make one:
// driver_call_timer_threads(tids, calls, ns, max) fills up to `max` entries and returns how many it filled.
//
// Build: cc -O2 -shared -fPIC -o driver_call_timer.so driver_call_timer.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum {
  kCreate,
  kMap,
  kSetAccess,
  kUnmap,
  kRelease,
  kMalloc,
  kFree,
  kMemGetInfo,
  kEventRecord,
  kEventQuery,
  kEventSynchronize,
  kStreamSynchronize,
  kGetDevice,
  kSetDevice,
  kEventCreateWithFlags,
  kEventDestroy,
  kStreamWaitEvent,
  kStreamQuery,
  DCT_KINDS
};
static const char* const kNames[DCT_KINDS] = {"cuMemCreate",
                                              "cuMemMap",
                                              "cuMemSetAccess",
                                              "cuMemUnmap",
                                              "cuMemRelease",
                                              "cudaMalloc",
                                              "cudaFree",
                                              "cudaMemGetInfo",
                                              "cudaEventRecord",
                                              "cudaEventQuery",
                                              "cudaEventSynchronize",
                                              "cudaStreamSynchronize",
                                              "cudaGetDevice",
                                              "cudaSetDevice",
                                              "cudaEventCreateWithFlags",
                                              "cudaEventDestroy",
                                              "cudaStreamWaitEvent",
                                              "cudaStreamQuery"};
// What a wrapped runtime call returns when no runtime follows this library: cudaErrorCallRequiresNewerDriver.
enum { kNoRuntime = 36 };
static atomic_ullong g_calls[DCT_KINDS];
static atomic_ullong g_ns[DCT_KINDS];

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

// Per thread, the memory calls: which thread of a training process (its Python thread, PyTorch's autograd
// thread) spends the driver time. A thread takes an entry at its first memory call; a reader skips an entry
// whose thread id is not stored yet (0).
enum { DCT_MAX_THREADS = 64 };
static atomic_int g_thread_entries;
static atomic_int g_thread_tid[DCT_MAX_THREADS];
static atomic_ullong g_thread_calls[DCT_MAX_THREADS];
static atomic_ullong g_thread_ns[DCT_MAX_THREADS];
static _Thread_local int t_entry = -1;  // this thread's entry; -1 none yet, -2 the table was full

static void account_thread(unsigned long long ns) {
  if (t_entry == -1) {
    const int i = atomic_fetch_add(&g_thread_entries, 1);
    if (i < DCT_MAX_THREADS) {
      atomic_store(&g_thread_tid[i], (int)syscall(SYS_gettid));
      t_entry = i;
    } else {
      t_entry = -2;
    }
  }
  if (t_entry < 0) return;
  atomic_fetch_add_explicit(&g_thread_calls[t_entry], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_thread_ns[t_entry], ns, memory_order_relaxed);
}

static void account(int kind, unsigned long long started) {
  const unsigned long long ns = now_ns() - started;
  atomic_fetch_add_explicit(&g_calls[kind], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_ns[kind], ns, memory_order_relaxed);
  if (kind < kMemGetInfo) account_thread(ns);
}

int driver_call_timer_threads(int* tids, unsigned long long* calls, unsigned long long* ns, int max) {
  int entries = atomic_load(&g_thread_entries);
  if (entries > DCT_MAX_THREADS) entries = DCT_MAX_THREADS;
  int filled = 0;
  for (int i = 0; i < entries && filled < max; ++i) {
    const int tid = atomic_load(&g_thread_tid[i]);
    if (tid == 0) continue;
    tids[filled] = tid;
    calls[filled] = atomic_load(&g_thread_calls[i]);
    ns[filled] = atomic_load(&g_thread_ns[i]);
    ++filled;
  }
  return filled;
}

const char* const* driver_call_timer_names(void) { return kNames; }
int driver_call_timer_kinds(void) { return DCT_KINDS; }
void driver_call_timer_read(unsigned long long* calls, unsigned long long* ns) {
  for (int i = 0; i < DCT_KINDS; ++i) {
    calls[i] = atomic_load(&g_calls[i]);
    ns[i] = atomic_load(&g_ns[i]);
  }
}

// The driver's functions, as fetched; the types are the driver API's with its handles as integers.
typedef int (*CreateFn)(unsigned long long*, size_t, const void*, unsigned long long);
typedef int (*MapFn)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
typedef int (*SetAccessFn)(unsigned long long, size_t, const void*, size_t);
typedef int (*UnmapFn)(unsigned long long, size_t);
typedef int (*ReleaseFn)(unsigned long long);
static CreateFn real_create;
static MapFn real_map;
static SetAccessFn real_set_access;
static UnmapFn real_unmap;
static ReleaseFn real_release;

static int timed_create(unsigned long long* h, size_t size, const void* prop, unsigned long long flags) {
  const unsigned long long t = now_ns();
  const int r = real_create(h, size, prop, flags);
  account(kCreate, t);
  return r;
}
static int timed_map(unsigned long long ptr, size_t size, size_t offset, unsigned long long h,
                     unsigned long long flags) {
  const unsigned long long t = now_ns();
  const int r = real_map(ptr, size, offset, h, flags);
  account(kMap, t);
  return r;
}
static int timed_set_access(unsigned long long ptr, size_t size, const void* desc, size_t count) {
  const unsigned long long t = now_ns();
  const int r = real_set_access(ptr, size, desc, count);
  account(kSetAccess, t);
  return r;
}
static int timed_unmap(unsigned long long ptr, size_t size) {
  const unsigned long long t = now_ns();
  const int r = real_unmap(ptr, size);
  account(kUnmap, t);
  return r;
}
static int timed_release(unsigned long long h) {
  const unsigned long long t = now_ns();
  const int r = real_release(h);
  account(kRelease, t);
  return r;
}

static int is_wrapper(const void* fn) {
  return fn == (void*)timed_create || fn == (void*)timed_map || fn == (void*)timed_set_access ||
         fn == (void*)timed_unmap || fn == (void*)timed_release;
}

// Replaces *fn with its timed wrapper when `symbol` is one of ours (fn non-null, the fetch succeeded). A
// pointer that is already a wrapper stays as it is: a runtime whose two entry-point functions call each
// other through the PLT enters here twice for one fetch, and wrapping the wrapper would make it call itself.
static void wrap(const char* symbol, void** fn) {
  if (fn == NULL || *fn == NULL || is_wrapper(*fn)) return;
  if (strcmp(symbol, "cuMemCreate") == 0) {
    real_create = (CreateFn)*fn;
    *fn = (void*)timed_create;
  } else if (strcmp(symbol, "cuMemMap") == 0) {
    real_map = (MapFn)*fn;
    *fn = (void*)timed_map;
  } else if (strcmp(symbol, "cuMemSetAccess") == 0) {
    real_set_access = (SetAccessFn)*fn;
    *fn = (void*)timed_set_access;
  } else if (strcmp(symbol, "cuMemUnmap") == 0) {
    real_unmap = (UnmapFn)*fn;
    *fn = (void*)timed_unmap;
  } else if (strcmp(symbol, "cuMemRelease") == 0) {
    real_release = (ReleaseFn)*fn;
    *fn = (void*)timed_release;
  }
}

int cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                     unsigned long long flags, void* status) {
  typedef int (*Fn)(const char*, void**, unsigned int, unsigned long long, void*);
  static Fn real;
  if (real == NULL) real = (Fn)dlsym(RTLD_NEXT, "cudaGetDriverEntryPointByVersion");
  if (real == NULL) return kNoRuntime;
  const int r = real(symbol, fn, version, flags, status);
  if (r == 0) wrap(symbol, fn);
  return r;
}

int cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags, void* status) {
  typedef int (*Fn)(const char*, void**, unsigned long long, void*);
  static Fn real;
  if (real == NULL) real = (Fn)dlsym(RTLD_NEXT, "cudaGetDriverEntryPoint");
  if (real == NULL) return kNoRuntime;
  const int r = real(symbol, fn, flags, status);
  if (r == 0) wrap(symbol, fn);
  return r;
}

// Whether the beside calls are timed (DRIVER_CALL_TIMER_BESIDE=1): PyTorch makes some of them on every
// operation, so off by default they are forwarded untimed and the timer does not slow a training step.
static int g_time_beside;
__attribute__((constructor)) static void read_environment(void) {
  const char* env = getenv("DRIVER_CALL_TIMER_BESIDE");
  g_time_beside = env != NULL && strcmp(env, "1") == 0;
}

// A runtime call timed in place: NAME(PARAMS) forwards ARGS to the next definition of NAME; a beside call
// (kind >= kMemGetInfo) only when g_time_beside.
#define TIMED_RUNTIME_CALL(kind, name, params, args)             \
  int name params {                                              \
    typedef int(*Fn) params;                                     \
    static Fn real;                                              \
    if (real == NULL) real = (Fn)dlsym(RTLD_NEXT, #name);        \
    if (real == NULL) return kNoRuntime;                         \
    if (kind >= kMemGetInfo && !g_time_beside) return real args; \
    const unsigned long long t = now_ns();                       \
    const int r = real args;                                     \
    account(kind, t);                                            \
    return r;                                                    \
  }

TIMED_RUNTIME_CALL(kMalloc, cudaMalloc, (void** ptr, size_t size), (ptr, size))
TIMED_RUNTIME_CALL(kFree, cudaFree, (void* ptr), (ptr))
TIMED_RUNTIME_CALL(kMemGetInfo, cudaMemGetInfo, (size_t * free_bytes, size_t* total), (free_bytes, total))
TIMED_RUNTIME_CALL(kEventRecord, cudaEventRecord, (void* event, void* stream), (event, stream))
TIMED_RUNTIME_CALL(kEventQuery, cudaEventQuery, (void* event), (event))
TIMED_RUNTIME_CALL(kEventSynchronize, cudaEventSynchronize, (void* event), (event))
TIMED_RUNTIME_CALL(kStreamSynchronize, cudaStreamSynchronize, (void* stream), (stream))
TIMED_RUNTIME_CALL(kGetDevice, cudaGetDevice, (int* device), (device))
TIMED_RUNTIME_CALL(kSetDevice, cudaSetDevice, (int device), (device))
TIMED_RUNTIME_CALL(kEventCreateWithFlags, cudaEventCreateWithFlags, (void** event, unsigned int flags),
                   (event, flags))
TIMED_RUNTIME_CALL(kEventDestroy, cudaEventDestroy, (void* event), (event))
TIMED_RUNTIME_CALL(kStreamWaitEvent, cudaStreamWaitEvent, (void* stream, void* event, unsigned int flags),
                   (stream, event, flags))
TIMED_RUNTIME_CALL(kStreamQuery, cudaStreamQuery, (void* stream), (stream))

__attribute__((destructor)) static void report(void) {
  const char* env = getenv("DRIVER_CALL_TIMER_REPORT");
  if (env == NULL || strcmp(env, "1") != 0) return;
  for (int i = 0; i < DCT_KINDS; ++i) {
    fprintf(stderr, "driver_call_timer: %-21s %8llu calls %10.3f ms\n", kNames[i], atomic_load(&g_calls[i]),
            (double)atomic_load(&g_ns[i]) / 1e6);
  }
}
