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
import numbers
import operator
import re
import sys
import threading

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
    "fail",
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
    MEMCOORD_ALLOC_CONF (the pools' options, e.g. "thread_cache:0,large_map_unit:80MiB"; keys: large_map_unit,
    thread_cache, thread_cache_block, device_reserve, remap, growth, free_marker_interval_us, thread_cache_fence,
    thread_cache_idle_misses, merge_unit_ends, grow_to_unit_end, mark_waits, address_range, large_grow_step;
    README "PyTorch" says what each does) and the rank (MEMCOORD_RANK/WORLD_SIZE/LOCAL_RANK, else torchrun's RANK/WORLD_SIZE/LOCAL_RANK, Open MPI,
    PMIx, Slurm).
    A bad value raises MemcoordError naming the variable it came from (torchrun's RANK, not the MEMCOORD_RANK
    it is read as), and leaves no copy of it behind."""
    import os

    copied = []  # (theirs, ours) copied into os.environ for the worker to read
    if "MEMCOORD_RANK" not in os.environ and "RANK" in os.environ:
        for theirs, ours in _LAUNCHER_RANKS:
            if theirs in os.environ and ours not in os.environ:
                os.environ[ours] = os.environ[theirs]
                copied.append((theirs, ours))
    settings = {name: os.environ.get(name, "") for name in _INIT_SETTINGS}
    try:
        _lib().call("memcoord_init")
    except MemcoordError as error:
        if not copied:
            raise
        # The worker named memcoord's variable; the user set the launcher's. The copies go, so that a retry
        # (or a child process) does not read a value nobody set under that name.
        message, named = error.message, []
        for theirs, ours in copied:
            os.environ.pop(ours, None)
            message, count = re.subn(rf"\b{ours}\b", theirs, message)
            if count:
                named.append(f"{theirs} as {ours}")
        if not named:  # the failure is about something else: its message stands as it is
            raise
        raise MemcoordError(error.function, error.code, f"{message} (memcoord reads the launcher's "
                            f"{', '.join(named)} when MEMCOORD_RANK is unset)") from None
    global _exit_hook_registered, _init_settings
    if _init_settings is None:
        _init_settings = settings
    if not _exit_hook_registered:
        atexit.register(_shutdown_at_exit)
        _abort.record_exit_status()  # how the process ends decides how it detaches (_shutdown_at_exit)
        _exit_hook_registered = True


_exit_hook_registered = False
# The variables memcoord_init() reads that enable() may also be given (alloc_conf, coordinator, backend).
_INIT_SETTINGS = ("MEMCOORD_ALLOC_CONF", "MEMCOORD_COORDINATOR", "MEMCOORD_BACKEND")
# _INIT_SETTINGS as the worker read them at init() ("" for unset); None while no worker made by init() lives.
_init_settings = None


def initialized_settings():
    """{variable: value} of _INIT_SETTINGS the live worker was made with ("" for unset), or None when init() has
    not made one since the last shutdown()."""
    return dict(_init_settings) if _init_settings is not None else None


def initialized_alloc_conf():
    """The MEMCOORD_ALLOC_CONF the live worker was made with ("" for the defaults), or None when init() has not
    made one since the last shutdown()."""
    return _init_settings["MEMCOORD_ALLOC_CONF"] if _init_settings is not None else None


def _shutdown_at_exit():
    """A process that ends normally detaches from the coordinator cleanly: a session that merely breaks marks
    the rank dead and aborts its group, which would end the ranks still finishing with EXIT_ABORTED. A process
    that ends on an uncaught exception or a non-zero sys.exit() detaches as failed first (fail(): "exited on
    ValueError: boom", "exited with code 3"), so the coordinator aborts its peers at once instead of leaving
    them in a collective until NCCL's timeout; _abort.failure_at_exit says what can be told apart at exit and
    what cannot. That comes before anything that may wait (a synchronize behind a collective that never ends).
    Queued GPU work is waited for next, since the shutdown returns the pools' memory to the device.

    This runs also when memcoord is PyTorch's allocator (enable()), where shutdown() refuses: PyTorch may
    still free tensors during the interpreter's teardown, after atexit. Those frees cannot corrupt anything:
    after memcoord_shutdown() the C ABI answers memcoord_torch_free with a logged no-op (and
    memcoord_torch_malloc with NULL and an error; it does not make a new worker), and every device memcoord
    holds memory on was synchronized above, so no queued kernel touches the released memory. Skipping the
    shutdown instead would let the coordinator see this rank's session break at exit, mark it dead and abort
    the ranks still finishing (a checkpoint being written, say). What remains: GPU work that another thread
    still launches during teardown, on tensors whose memory is gone; PyTorch's own teardown launches none."""
    try:
        reason = _abort.failure_at_exit()
        if reason is not None:
            fail(reason)
    except Exception:  # the shutdown below still runs
        pass
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
        _shutdown()
    except Exception:
        pass


def fail(reason):
    """Tells the coordinator this rank is failing, so it aborts the rank's group now: every peer learns "rank R
    (host h, pid p) is dead: <reason>" and (with the default abort handling) ends with EXIT_ABORTED instead of
    waiting in a collective. Call it just before the process ends on an error it handles itself (one it lets
    escape, or a non-zero sys.exit(), is reported at exit by memcoord itself). This process's coordinator
    session ends (no command or abort reaches it afterwards); its pools stay usable until the process ends or
    shutdown(). Returns True when the session ended as failed (also when it was already over, or standalone:
    nothing is sent then), False when no worker is initialized. `reason`: text (str; bytes are decoded),
    at most 1000 bytes are sent. Bounded: about 0.5 s when the coordinator does not answer."""
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    if not isinstance(reason, str):
        raise TypeError(f"memcoord.fail(reason): reason must be str, got {type(reason).__name__}")
    lib = _lib()
    if not lib.has("memcoord_fail"):
        raise MissingSymbolError("memcoord_fail", lib.path)
    code = lib.function("memcoord_fail")(reason.encode("utf-8", "replace"))
    if code == _capi.FAILED_PRECONDITION and lib.function("memcoord_step")() < 0:
        return False  # not initialized (or shut down): no session to end
    lib.check("memcoord_fail", code)
    return True


def shutdown():
    """Detaches from the coordinator and releases every pool (blocks still live are lost). It also wakes the
    abort watcher, which then ends. A process that exits normally does this by itself (atexit).

    Refused (RuntimeError) while memcoord is PyTorch's allocator (after enable()): PyTorch cannot change its
    allocator once it has allocated, so its tensors live in memcoord's pools until the process ends, and a
    shutdown would free their memory under them."""
    if is_enabled():
        raise RuntimeError(
            "memcoord.shutdown(): memcoord is PyTorch's CUDA allocator in this process (memcoord.enable()), and "
            "PyTorch cannot change its allocator once it has allocated: its tensors live in memcoord's pools, "
            "and a shutdown would free their memory under them. memcoord detaches by itself when the process "
            "exits; end the process instead"
        )
    _shutdown()


def _shutdown():
    global _init_settings
    try:
        _lib().call("memcoord_shutdown")
        _init_settings = None
    finally:
        # The next worker starts its accumulated counts at 0: a baseline of this one would hide them.
        _stats.clear_baselines()
        _abort.stop_watcher()


# Integer arguments are checked here: ctypes silently keeps the low bits of an int too wide for its C type
# (alloc(2**64 + 4096) asked for 4096 bytes, stats(2**40) read device 0).
_U64_MAX = 2**64 - 1
_I32_MAX = 2**31 - 1


def _integer(function, name, value, low, high, accepted):
    """`value` as an int when it is an integer (bool excluded) in [low, high]; TypeError/ValueError naming
    `function`'s argument `name` and `accepted` otherwise."""
    try:
        if isinstance(value, bool):  # an int to Python, but True is no size, device or stream
            raise TypeError
        value = operator.index(value)  # int, numpy integers; not float, str or bytes
    except TypeError:
        raise TypeError(f"{function}: {name} must be an integer, got {value!r} ({type(value).__name__}); "
                        f"accepted: {accepted}") from None
    if not low <= value <= high:
        raise ValueError(f"{function}: {name} {value} is out of range; accepted: {accepted}")
    return value


def _size(function, value, name="nbytes"):
    return _integer(function, name, value, 1, _U64_MAX, "an int from 1 to 2**64-1")


def _device(function, value, name="device"):
    return _integer(function, name, value, -1, _I32_MAX, "an int from -1 (the primary device) to 2**31-1")


def _devices(function, device):
    """[device] checked, or every device for None."""
    if device is None:
        return list(range(max(device_count(), 1)))
    return [_device(function, device)]


def _stream(function, value, name="stream"):
    return _integer(function, name, value, 0, _U64_MAX, "an int from 0 to 2**64-1 (a cudaStream_t's value)")


def _pointer(function, value, name="ptr"):
    return _integer(function, name, value, 0, _U64_MAX, "an address: an int from 0 to 2**64-1")


def device_count():
    """Devices this process may use (-1 before init())."""
    return int(_lib().memcoord_device_count())


def alloc(nbytes, device=-1, stream=0):
    """Allocates `nbytes` from `device`'s default pool (-1: the primary device); returns the address (int)."""
    nbytes = _size("alloc", nbytes)
    device = _device("alloc", device)
    stream = _stream("alloc", stream)
    lib = _lib()
    ptr = lib.memcoord_device_alloc(device, nbytes, stream)
    if not ptr:
        raise lib.fail_pointer("memcoord_device_alloc")
    return int(ptr)


def free(ptr, device=-1, stream=0):
    """Returns a block from alloc() to its pool; `stream` is the stream it was last used on."""
    ptr = _pointer("free", ptr)
    device = _device("free", device)
    stream = _stream("free", stream)
    _lib().call("memcoord_device_free", device, ctypes.c_void_p(ptr), stream)


def record_stream(ptr, stream):
    """Marks the live block at `ptr` as also used on `stream` (Tensor.record_stream)."""
    ptr = _pointer("record_stream", ptr)
    stream = _stream("record_stream", stream)
    _lib().call("memcoord_record_stream", ctypes.c_void_p(ptr), stream)


def stats(device=-1):
    """memcoord's own figures for `device` (every pool on it summed): a dict of DeviceStats' fields."""
    device = _device("stats", device)
    lib = _lib()
    out = _capi.DeviceStats()
    out.struct_size = ctypes.sizeof(_capi.DeviceStats)
    lib.call("memcoord_device_stats_get", device, ctypes.byref(out))
    return out.as_dict()


def memory_stats(device=-1, nested=False):
    """`device`'s figures under PyTorch's key names ("allocated_bytes.all.current", "num_ooms", ...), as
    torch.cuda.memory_stats gives them (nested=True: as torch.cuda.memory_stats_as_nested_dict)."""
    raw = stats(_device("memory_stats", device))
    result = _stats.torch_stats(raw["device"], raw)
    return result if nested else _stats.flatten(result)


HISTORY_MAX_ENTRIES = 10_000_000  # MEMCOORD_HISTORY_MAX_ENTRIES


def record_history(enabled=True, max_entries=100_000, device=None):
    """Keeps the last `max_entries` allocations and frees of every pool on `device` (None: every device) for
    snapshot() (its "device_traces", which memory_viz draws), as torch.cuda.memory._record_memory_history
    does; `enabled` False stops recording and keeps what was recorded. Turning it on starts an empty history
    and turns the pools' per-thread caches off meanwhile (every call is recorded)."""
    lib = _lib()
    if enabled not in (True, False):  # not bool(): "no" would start recording
        raise TypeError(f"record_history(enabled={enabled!r}): accepted: True or False")
    # Read only when recording starts (stopping keeps what was recorded).
    entries = _integer("record_history", "max_entries", max_entries, 1, HISTORY_MAX_ENTRIES,
                       f"an int from 1 to {HISTORY_MAX_ENTRIES}") if enabled else 0
    devices = _devices("record_history", device)
    for d in devices:
        lib.call("memcoord_record_history", d, 1 if enabled else 0, entries if enabled else 0)


def reset_peak_stats(device=-1):
    """Peaks (allocated, reserved, requested, active) of every pool on `device` restart from their current values."""
    _lib().call("memcoord_reset_peak_stats", _device("reset_peak_stats", device))


def reset_accumulated_stats(device=-1):
    """Accumulated counts in memory_stats() ("allocated"/"freed", num_ooms, ...) restart from 0."""
    raw = stats(_device("reset_accumulated_stats", device))
    _stats.reset_accumulated(raw["device"], raw)


def empty_cache(device=None):
    """Returns every cached (free) byte of memcoord's pools to the device; live blocks stay. `device` None:
    every device. Returns the bytes released."""
    devices = _devices("empty_cache", device)
    lib = _lib()
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
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
        raise TypeError(f"set_memory_fraction: fraction must be a number, got {fraction!r} "
                        f"({type(fraction).__name__}); accepted: more than 0 and at most 1")
    _lib().call("memcoord_set_memory_fraction", _device("set_memory_fraction", device), float(fraction))


def memory_fraction(device=-1):
    """`device`'s default pool's cap as a fraction of the device's memory: 1.0 when it has none."""
    device = _device("memory_fraction", device)
    out = ctypes.c_double(0)
    _lib().call("memcoord_memory_fraction", device, ctypes.byref(out))
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
    `device` (None: every device). With `path` (a file name: str, bytes or os.PathLike), also writes it as the
    pickle PyTorch's memory_viz opens; anything else is TypeError, before any work (an int would be taken by
    open() as a file descriptor, written to and closed)."""
    if path is not None:
        _snapshot.check_path("snapshot", path)
    devices = _devices("snapshot", device)
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
    """AbortFacts (dead_rank, reason) when the coordinator aborted this process's group, else None (also before
    init(), when there is no group to abort)."""
    if step_count() < 0:
        return None
    return _abort.abort_facts()


def watch_aborts(on_abort=None, poll_ms=500):
    """Starts the abort watcher thread (enable() starts it too): on an abort, prints which rank died and
    why, aborts torch.distributed's process groups, and exits with EXIT_ABORTED. `on_abort(facts)` replaces
    that response. Called while the watcher runs (after enable(), say), it changes the running watcher's
    handler and poll_ms to these (on_abort=None: the default response again)."""
    init()
    poll_ms = _integer("watch_aborts", "poll_ms", poll_ms, 1, _I32_MAX, "an int from 1 to 2**31-1 (milliseconds)")
    if on_abort is not None and not callable(on_abort):
        raise TypeError(f"watch_aborts: on_abort must be callable (on_abort(facts)) or None, got {on_abort!r}")
    return _abort.start_watcher(on_abort=on_abort, poll_ms=poll_ms)


# How many memcoord.step() contexts are open on each thread: only the outermost is a step.
_step_depth = threading.local()


class step(contextlib.ContextDecorator):
    """A training step between two safe points, for hand-written loops:

        for batch in loader:
            with memcoord.step():
                loss = model(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()

    Entering calls memcoord_step_begin(); leaving normally calls memcoord_step_end(), where coordinator
    trims and quotas land (the same step on every rank). When the group was aborted, `on_abort="exit"` (the
    default) answers as the abort watcher does: the handler given to watch_aborts(on_abort=...) when there is
    one (then AbortedError is raised once it returns), else the process ends (message naming the dead rank,
    EXIT_ABORTED); `on_abort="raise"` raises AbortedError instead, and so does "exit" after
    enable(watch_aborts=False) while no watcher was started since (the user handles aborts, so memcoord does
    not end the process). A step whose body raised does not end (no safe point).

    Nested steps on one thread (a decorated train_step() called inside `with memcoord.step()`) are one step:
    the outermost owns it, and an inner one begins and ends nothing, so no coordinator command runs in the
    middle of the outer step and the step count goes up once."""

    def __init__(self, on_abort="exit"):
        if callable(on_abort):  # @memcoord.step over a function, without the parentheses
            raise TypeError("memcoord.step is used as @memcoord.step() (with parentheses) or `with memcoord.step():`; "
                            f"got the function {getattr(on_abort, '__name__', on_abort)!r} as on_abort")
        if on_abort not in ("exit", "raise"):
            raise ValueError(f"step(on_abort=...): got {on_abort!r}; accepted: 'exit', 'raise'")
        self.on_abort = on_abort

    def __enter__(self):
        depth = getattr(_step_depth, "value", 0)
        if depth == 0:
            init()
            self._guard(step_begin)
        _step_depth.value = depth + 1
        return self

    def __exit__(self, exc_type, exc, tb):
        _step_depth.value -= 1
        if _step_depth.value == 0 and exc_type is None:
            self._guard(step_end)
        return False

    def _guard(self, call):
        try:
            call()
        except AbortedError as error:
            if self.on_abort == "raise":
                raise
            # enable(watch_aborts=False) with no watcher started since: the user answers aborts, from this error.
            torch_side = sys.modules.get(__name__ + "._torch")
            if torch_side is not None and torch_side.aborts_left_to_caller():
                raise
            # As the watcher answers: the user's watch_aborts(on_abort=...) handler when one is set (called once,
            # by whichever sees the abort first), else exit_aborted, which does not return. The step did not
            # complete and the group cannot go on: the error goes on to the loop.
            _abort.answer_abort(_abort.AbortFacts(error.dead_rank, error.reason, 0))
            raise


def enable(**options):
    """Makes memcoord PyTorch's CUDA allocator (call before the first CUDA allocation); see
    memcoord._torch.enable for the options."""
    from . import _torch

    return _torch.enable(**options)


def is_enabled():
    """Whether enable() made memcoord PyTorch's allocator in this process."""
    module = sys.modules.get(__name__ + "._torch")
    return bool(module and module.is_enabled())
