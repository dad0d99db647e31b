"""The CUDA driver's memory calls this process made, as bench/gpu/driver_call_timer.so counts them when it is
LD_PRELOADed (it wraps cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease, cudaMalloc and
cudaFree for PyTorch's allocators and memcoord alike; with DRIVER_CALL_TIMER_BESIDE=1 also the calls beside them,
cudaMemGetInfo, events, stream queries and the current device, which the training itself makes too). Without it,
read() returns None."""

import ctypes
import os

# The calls that get and give back device memory: the allocator's driver cost.
MEMORY_CALLS = ("cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cudaMalloc", "cudaFree")

# The threads the timer keeps figures for (DCT_MAX_THREADS in driver_call_timer.c).
MAX_THREADS = 64


def preload(env, lib):
    """Puts the timer library `lib` first in env's LD_PRELOAD (after it, whatever was preloaded already)."""
    path = os.path.abspath(lib)
    env["LD_PRELOAD"] = path + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")


def read():
    """{call name: (calls, ms)} so far, or None when the timer is not loaded."""
    try:
        lib = ctypes.CDLL(None)
        kinds = lib.driver_call_timer_kinds()
    except (AttributeError, OSError):
        return None
    lib.driver_call_timer_names.restype = ctypes.POINTER(ctypes.c_char_p)
    names = lib.driver_call_timer_names()
    calls = (ctypes.c_ulonglong * kinds)()
    ns = (ctypes.c_ulonglong * kinds)()
    lib.driver_call_timer_read(calls, ns)
    return {names[i].decode(): (int(calls[i]), ns[i] / 1e6) for i in range(kinds)}


def read_threads():
    """{Linux thread id: (memory calls, ms)} of each thread that made a memory call (MEMORY_CALLS) so far, or
    None when the timer is not loaded (or is one without per-thread figures)."""
    try:
        lib = ctypes.CDLL(None)
        threads = lib.driver_call_timer_threads
    except (AttributeError, OSError):
        return None
    most = MAX_THREADS
    tids, calls, ns = (ctypes.c_int * most)(), (ctypes.c_ulonglong * most)(), (ctypes.c_ulonglong * most)()
    filled = threads(tids, calls, ns, most)
    return {int(tids[i]): (int(calls[i]), ns[i] / 1e6) for i in range(filled)}


def by_thread_name(before, after):
    """{thread name: [memory calls, ms]} made between two read_threads() readings, each thread named by its
    /proc/self/task/TID/comm (threads of one name pooled; a thread that has ended: "tid TID"); None when
    either reading is None."""
    if before is None or after is None:
        return None
    out = {}
    for tid, (calls, ms) in after.items():
        was_calls, was_ms = before.get(tid, (0, 0.0))
        if calls == was_calls:
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            name = f"tid {tid}"
        pooled = out.setdefault(name, [0, 0.0])
        pooled[0] += calls - was_calls
        pooled[1] = round(pooled[1] + ms - was_ms, 3)
    return out


def since(before, after):
    """after - before, per call (either may be None: then None)."""
    if before is None or after is None:
        return None
    return {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in after}


def memory_ms(figures):
    """Milliseconds in the memory calls (MEMORY_CALLS) of a read()/since() dict."""
    return sum(ms for k, (_, ms) in figures.items() if k in MEMORY_CALLS)


def memory_calls(figures):
    """How many memory calls (MEMORY_CALLS) a read()/since() dict counts."""
    return sum(c for k, (c, _) in figures.items() if k in MEMORY_CALLS)


def memory_pair(figures, digits):
    """[memory calls, their ms rounded to `digits` places] of a read()/since() dict: how the bench keeps a step's."""
    return [memory_calls(figures), round(memory_ms(figures), digits)]


def summary(figures):
    """One phrase: the memory calls' total and each call made, then the other calls, e.g.
    "41.2 ms in memory calls: 812 cuMemCreate (20.1 ms), ...; beside them: 256 cudaMemGetInfo (1.2 ms)"."""
    if figures is None:
        return "driver timer not loaded"
    made = [(k, c, ms) for k, (c, ms) in figures.items() if c and k in MEMORY_CALLS]
    other = [(k, c, ms) for k, (c, ms) in figures.items() if c and k not in MEMORY_CALLS]
    text = f"{memory_ms(figures):.1f} ms in memory calls: " + (
        ", ".join(f"{c} {k} ({ms:.1f} ms)" for k, c, ms in made) if made else "none")
    if other:
        text += "; beside them: " + ", ".join(f"{c} {k} ({ms:.1f} ms)" for k, c, ms in other)
    return text
