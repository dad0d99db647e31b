"""memcoord for Python: PyTorch's CUDA allocator backed by memcoord's pools, the step safe points, stats and
snapshots, and aborts that reach the training loop.

Three lines, before the first CUDA allocation:

    import memcoord
    memcoord.enable()          # memcoord becomes PyTorch's allocator; attaches when MEMCOORD_COORDINATOR is set

Python is for control only: allocations go from PyTorch straight into libmemcoord_capi.so (C++). Everything
except enable() works without torch (on memcoord's host backend: MEMCOORD_BACKEND=host).
"""

import atexit
import contextlib
import ctypes
import sys

from . import _abort, _capi, _snapshot, _stats
from ._capi import EXIT_ABORTED, AbortedError, MemcoordError, MissingSymbolError

__version__ = "0.1.0"

__all__ = [
    "AbortedError",
    "EXIT_ABORTED",
    "MemcoordError",
    "MissingSymbolError",
    "abort_info",
    "alloc",
    "device_count",
    "empty_cache",
    "enable",
    "free",
    "init",
    "is_enabled",
    "library_path",
    "memory_fraction",
    "memory_stats",
    "record_history",
    "record_stream",
    "reset_accumulated_stats",
    "reset_peak_stats",
    "set_memory_fraction",
    "shutdown",
    "snapshot",
    "stats",
    "step",
    "step_begin",
    "step_end",
    "step_count",
    "watch_aborts",
]


def _lib():
    return _capi.library()


def library_path():
    """The libmemcoord_capi.so this package uses."""
    return str(_lib().path)


# Launchers' rank variables that memcoord's own discovery (MEMCOORD_*, Open MPI, PMIx, Slurm) does not read:
# torchrun's. Copied to memcoord's names unless those are set.
_LAUNCHER_RANKS = (("RANK", "MEMCOORD_RANK"), ("WORLD_SIZE", "MEMCOORD_WORLD_SIZE"), ("LOCAL_RANK", "MEMCOORD_LOCAL_RANK"))


def init():
    """Creates the process's worker (idempotent): reads MEMCOORD_COORDINATOR, MEMCOORD_BACKEND,
    MEMCOORD_ALLOC_CONF (the pools' options, e.g. "thread_cache:0,large_map_unit:40MiB"; keys: large_map_unit,
    thread_cache, thread_cache_block, device_reserve, remap, growth, free_marker_interval_us, thread_cache_fence,
    thread_cache_idle_misses)
    and the rank (MEMCOORD_RANK/WORLD_SIZE/LOCAL_RANK, else torchrun's RANK/WORLD_SIZE/LOCAL_RANK, Open MPI,
    PMIx, Slurm).
    A bad value raises MemcoordError naming the variable."""
    import os

    if "MEMCOORD_RANK" not in os.environ and "RANK" in os.environ:
        for theirs, ours in _LAUNCHER_RANKS:
            if theirs in os.environ:
                os.environ.setdefault(ours, os.environ[theirs])
    conf = os.environ.get("MEMCOORD_ALLOC_CONF", "")
    _lib().call("memcoord_init")
    global _exit_hook_registered, _init_alloc_conf
    if _init_alloc_conf is None:
        _init_alloc_conf = conf
    if not _exit_hook_registered:
        atexit.register(_shutdown_at_exit)
        _exit_hook_registered = True


_exit_hook_registered = False
# MEMCOORD_ALLOC_CONF as the worker read it at init() ("" for none); None while no worker made by init() lives.
_init_alloc_conf = None


def initialized_alloc_conf():
    """The MEMCOORD_ALLOC_CONF the live worker was made with ("" for the defaults), or None when init() has not
    made one since the last shutdown()."""
    return _init_alloc_conf


def _shutdown_at_exit():
    """A process that ends normally detaches from the coordinator cleanly: a session that merely breaks marks
    the rank dead and aborts its group, which would end the ranks still finishing with EXIT_ABORTED. Queued
    GPU work is waited for first, since the shutdown returns the pools' memory to the device."""
    try:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            for device in range(torch.cuda.device_count()):
                # Only devices memcoord holds memory on: synchronizing another would create a context there.
                if stats(device)["reserved_bytes"] > 0:
                    torch.cuda.synchronize(device)
    except Exception:  # a failing CUDA context must not keep the process from detaching
        pass
    try:
        shutdown()
    except Exception:
        pass


def shutdown():
    """Detaches from the coordinator and releases every pool (blocks still live are lost). It also wakes the
    abort watcher, which then ends. A process that exits normally does this by itself (atexit)."""
    global _init_alloc_conf
    try:
        _lib().call("memcoord_shutdown")
        _init_alloc_conf = None
    finally:
        _abort.stop_watcher()


def device_count():
    """Devices this process may use (-1 before init())."""
    return int(_lib().memcoord_device_count())


def alloc(nbytes, device=-1, stream=0):
    """Allocates `nbytes` from `device`'s default pool (-1: the primary device); returns the address (int)."""
    if nbytes <= 0:
        raise ValueError(f"alloc: nbytes must be positive, got {nbytes}")
    lib = _lib()
    ptr = lib.memcoord_device_alloc(int(device), int(nbytes), int(stream))
    if not ptr:
        raise lib.fail_pointer("memcoord_device_alloc")
    return int(ptr)


def free(ptr, device=-1, stream=0):
    """Returns a block from alloc() to its pool; `stream` is the stream it was last used on."""
    _lib().call("memcoord_device_free", int(device), ctypes.c_void_p(int(ptr)), int(stream))


def record_stream(ptr, stream):
    """Marks the live block at `ptr` as also used on `stream` (Tensor.record_stream)."""
    _lib().call("memcoord_record_stream", ctypes.c_void_p(int(ptr)), int(stream))


def stats(device=-1):
    """memcoord's own figures for `device` (every pool on it summed): a dict of DeviceStats' fields."""
    lib = _lib()
    out = _capi.DeviceStats()
    out.struct_size = ctypes.sizeof(_capi.DeviceStats)
    lib.call("memcoord_device_stats_get", int(device), ctypes.byref(out))
    return out.as_dict()


def memory_stats(device=-1, nested=False):
    """`device`'s figures under PyTorch's key names ("allocated_bytes.all.current", "num_ooms", ...), as
    torch.cuda.memory_stats gives them (nested=True: as torch.cuda.memory_stats_as_nested_dict)."""
    raw = stats(device)
    result = _stats.torch_stats(raw["device"], raw)
    return result if nested else _stats.flatten(result)


HISTORY_MAX_ENTRIES = 10_000_000  # MEMCOORD_HISTORY_MAX_ENTRIES


def record_history(enabled=True, max_entries=100_000, device=None):
    """Keeps the last `max_entries` allocations and frees of every pool on `device` (None: every device) for
    snapshot() (its "device_traces", which memory_viz draws), as torch.cuda.memory._record_memory_history
    does; `enabled` False stops recording and keeps what was recorded. Turning it on starts an empty history
    and turns the pools' per-thread caches off meanwhile (every call is recorded)."""
    lib = _lib()
    entries = int(max_entries)
    if enabled and not 1 <= entries <= HISTORY_MAX_ENTRIES:
        raise ValueError(f"max_entries must be between 1 and {HISTORY_MAX_ENTRIES}, got {max_entries}")
    devices = [int(device)] if device is not None else list(range(max(device_count(), 1)))
    for d in devices:
        lib.call("memcoord_record_history", d, 1 if enabled else 0, entries if enabled else 0)


def reset_peak_stats(device=-1):
    """Peaks (allocated, reserved, requested, active) of every pool on `device` restart from their current values."""
    _lib().call("memcoord_reset_peak_stats", int(device))


def reset_accumulated_stats(device=-1):
    """Accumulated counts in memory_stats() ("allocated"/"freed", num_ooms, ...) restart from 0."""
    raw = stats(device)
    _stats.reset_accumulated(raw["device"], raw)


def empty_cache(device=None):
    """Returns every cached (free) byte of memcoord's pools to the device; live blocks stay. `device` None:
    every device. Returns the bytes released."""
    lib = _lib()
    devices = [int(device)] if device is not None else list(range(max(device_count(), 1)))
    released_total = 0
    for d in devices:
        released = ctypes.c_uint64(0)
        lib.call("memcoord_empty_cache", d, ctypes.byref(released))
        released_total += released.value
    return released_total


def set_memory_fraction(fraction, device=-1):
    """Caps what `device`'s default pool (PyTorch's allocations; -1: the primary device) may reserve at
    `fraction` of the device's memory, as torch.cuda.set_per_process_memory_fraction caps PyTorch's allocator
    (which, under memcoord.enable(), calls this). Accepted: 0 < fraction <= 1 (1: the whole device). The cache
    is trimmed to fit; MemcoordError (FAILED_PRECONDITION) when more than that is live, the cap unchanged."""
    _lib().call("memcoord_set_memory_fraction", int(device), float(fraction))


def memory_fraction(device=-1):
    """`device`'s default pool's cap as a fraction of the device's memory: 1.0 when it has none."""
    out = ctypes.c_double(0)
    _lib().call("memcoord_memory_fraction", int(device), ctypes.byref(out))
    return out.value


def _snapshot_documents(devices):
    lib = _lib()
    documents = []
    for d in devices:
        raw = lib.memcoord_snapshot_json(d)
        if not raw:
            raise lib.fail_pointer("memcoord_snapshot_json")
        try:
            text = ctypes.string_at(raw).decode("utf-8", "replace")
        finally:
            lib.memcoord_free_string(raw)
        documents.append(_snapshot.parse_json(text))
    return documents


def snapshot(path=None, device=None):
    """The memory snapshot in torch.cuda.memory._snapshot()'s shape (segments, blocks, device_traces) for
    `device` (None: every device). With `path`, also writes it as the pickle PyTorch's memory_viz opens."""
    devices = [int(device)] if device is not None else list(range(max(device_count(), 1)))
    result = _snapshot.from_memcoord(_snapshot_documents(devices))
    if path is not None:
        _snapshot.write_pickle(result, path)
    return result


def step_begin():
    _lib().call("memcoord_step_begin")


def step_end():
    """Ends a step: coordinator commands (trims, quotas) run here. AbortedError when the group was aborted."""
    _lib().call("memcoord_step_end")


def step_count():
    """The last completed step (-1 before init())."""
    return int(_lib().memcoord_step())


def abort_info():
    """AbortFacts (dead_rank, reason) when the coordinator aborted this process's group, else None."""
    return _abort.abort_facts()


def watch_aborts(on_abort=None, poll_ms=500):
    """Starts the abort watcher thread (enable() starts it too): on an abort, prints which rank died and
    why, aborts torch.distributed's process groups, and exits with EXIT_ABORTED. `on_abort(facts)` replaces
    that response."""
    init()
    return _abort.start_watcher(on_abort=on_abort, poll_ms=poll_ms)


class step(contextlib.ContextDecorator):
    """A training step between two safe points, for hand-written loops:

        for batch in loader:
            with memcoord.step():
                loss = model(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()

    Entering calls memcoord_step_begin(); leaving normally calls memcoord_step_end(), where coordinator
    trims and quotas land (the same step on every rank). When the group was aborted, `on_abort="exit"` (the
    default) ends the process as the abort watcher does (message naming the dead rank, EXIT_ABORTED);
    `on_abort="raise"` raises AbortedError instead. A step whose body raised does not end (no safe point)."""

    def __init__(self, on_abort="exit"):
        if on_abort not in ("exit", "raise"):
            raise ValueError(f"step(on_abort=...): got {on_abort!r}; accepted: 'exit', 'raise'")
        self.on_abort = on_abort

    def __enter__(self):
        init()
        self._guard(step_begin)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self._guard(step_end)
        return False

    def _guard(self, call):
        try:
            call()
        except AbortedError as error:
            if self.on_abort == "raise":
                raise
            _abort.exit_aborted(_abort.AbortFacts(error.dead_rank, error.reason, 0))


def enable(**options):
    """Makes memcoord PyTorch's CUDA allocator (call before the first CUDA allocation); see
    memcoord._torch.enable for the options."""
    from . import _torch

    return _torch.enable(**options)


def is_enabled():
    """Whether enable() made memcoord PyTorch's allocator in this process."""
    module = sys.modules.get(__name__ + "._torch")
    return bool(module and module.is_enabled())
