"""memcoord as PyTorch's CUDA allocator, and PyTorch's memory API reading memcoord's numbers.

enable() does, in order:
  1. refuses when CUDA is already initialised in this process (PyTorch cannot swap an allocator in use),
     naming what initialised it;
  2. memcoord_init(): the worker starts, attaching to the coordinator when MEMCOORD_COORDINATOR is set;
  3. installs the allocator: through the C++ shim (memcoord/csrc/torch_shim.cpp: record_stream, empty_cache,
     CUDA graph pools, OutOfMemoryError) when it is built or can be built now, else through
     torch.cuda.memory.CUDAPluggableAllocator with Python stand-ins for record_stream and empty_cache. Without
     the shim, torch.cuda.CUDAGraph.capture_begin and torch.cuda.graph(...) raise RuntimeError saying that
     graph capture needs the shim (PyTorch's pluggable path would ignore the capture's private pool without a
     hook); an allocation failure cannot raise torch.OutOfMemoryError (PyTorch's pluggable path does not
     check for null). With the shim, a CUDAGraph.capture_end (or capture_begin) that raises has the shim end
     and release the pool route that the failed capture left open (PyTorch does not);
  4. points torch._C's statistics and snapshot entry points at memcoord (torch.cuda.memory_allocated,
     max_memory_allocated, memory_reserved, max_memory_reserved, memory_stats, reset_peak_memory_stats,
     reset_accumulated_memory_stats, memory_summary, torch.cuda.memory._snapshot/_dump_snapshot, and
     torch.accelerator's equivalents where they exist). PyTorch's Python functions call these by attribute
     at each call, so replacing the attributes is enough; C++ code asking the allocator directly
     (getDeviceStats) still gets PyTorch's "not supported" error;
  5. starts the abort watcher (memcoord/_abort.py).
The allocation path itself never enters Python: PyTorch calls memcoord's C functions.
"""

import functools
import os
import sys
import threading
import warnings
from pathlib import Path

from . import _abort, _capi

_lock = threading.Lock()
_state = {"enabled": False, "shim": None, "hooks": {}, "patched": [], "watch_aborts": True, "options": {}}


def is_enabled():
    return _state["enabled"]


def watcher_declined():
    """Whether enable(watch_aborts=False) turned the abort watcher off."""
    return _state["enabled"] and not _state["watch_aborts"]


def aborts_left_to_caller():
    """Whether an abort seen at a step's begin or end (memcoord.step(), the integrations) goes to the caller as
    AbortedError unanswered: enable(watch_aborts=False) turned the watcher off and no watcher was started since
    (memcoord.watch_aborts()), so nothing of memcoord's answers aborts: the user handles them at step ends."""
    if not watcher_declined():
        return False
    watcher = _abort._watcher  # read once: stop_watcher() may clear it meanwhile
    return watcher is None or not (watcher.alive or watcher.facts is not None)


def enabled_details():
    """How enable() installed memcoord: {"shim": bool, "hooks": {...}, "patched": [names]}."""
    return {"shim": bool(_state["shim"]), "hooks": dict(_state["hooks"]), "patched": list(_state["patched"])}


# The shim must use the process's shared libstdc++ (the one PyTorch uses). A toolchain that links C++
# extensions with -static-libstdc++ gives the shim its own copy, and two libstdc++ copies in one process
# corrupt each other's locale state: formatting a number into an error message then crashes (SIGSEGV in
# std::ostream, seen on the H200 with torch 2.11). Naming the shared library first on the link line makes the
# linker take every libstdc++ symbol from it. setup.py passes the same flag.
SHARED_LIBSTDCXX_FLAGS = ["-l:libstdc++.so.6"]


def _private_libstdcxx(module):
    """Why the loaded shim cannot be used (it carries its own libstdc++), or None when it shares the process's."""
    import ctypes

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                    ("dli_saddr", ctypes.c_void_p)]

    probe = "_ZNSt6locale7classicEv"  # std::locale::classic(): where the shim's lookup finds it
    try:
        address = ctypes.cast(getattr(ctypes.CDLL(module.__file__), probe), ctypes.c_void_p).value
        info = DlInfo()
        if not ctypes.CDLL(None).dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
            return None
        owner = os.path.realpath(info.dli_fname.decode())
    except (OSError, AttributeError, TypeError):
        return None  # cannot tell; nothing suggests a private copy
    if owner != os.path.realpath(module.__file__):
        return None
    return (f"{module.__file__} carries its own copy of libstdc++ (linked with -static-libstdc++), which corrupts "
            "the locale state PyTorch's libstdc++ uses and crashes on the first error message; rebuild it with "
            f"`pip install --no-build-isolation ./python` (the build links {SHARED_LIBSTDCXX_FLAGS[0]})")


def _load_shim(mode):
    """The compiled shim module, or None. mode: "auto" (built one, else build now, else None), "required"
    (raise when neither works), "off"."""
    if mode == "off":
        return None
    module = _built_or_jit_shim(mode)
    if module is None:
        return None
    problem = _private_libstdcxx(module)
    if problem is None:
        return module
    if mode == "required":
        raise RuntimeError(f"memcoord.enable(shim='required'): {problem}")
    warnings.warn(f"memcoord: the C++ shim is not used: {problem}", RuntimeWarning, stacklevel=3)
    return None


def _built_or_jit_shim(mode):
    try:
        import torch  # noqa: F401 - loads libtorch and libc10, which the built shim links to

        from . import _torch_shim  # built by pip install where torch was present

        return _torch_shim
    except ImportError as built_error:
        first = built_error
    try:
        from torch.utils import cpp_extension

        source = Path(__file__).resolve().parent / "csrc" / "torch_shim.cpp"
        # Without TORCH_CUDA_ARCH_LIST, cpp_extension asks torch.cuda for each device's capability, which
        # initialises CUDA and PyTorch's own allocator, after which no allocator can be swapped in. The shim
        # has no CUDA kernels: the list only has to be set, not right.
        saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
        os.environ["TORCH_CUDA_ARCH_LIST"] = saved or "9.0"
        try:
            return cpp_extension.load(name="memcoord_torch_shim", sources=[str(source)], with_cuda=True, verbose=False,
                                      extra_ldflags=SHARED_LIBSTDCXX_FLAGS)
        finally:
            if saved is None:
                del os.environ["TORCH_CUDA_ARCH_LIST"]
    except Exception as build_error:
        if mode == "required":
            raise RuntimeError(
                f"memcoord.enable(shim='required'): the C++ shim is neither installed ({first}) nor buildable "
                f"now ({build_error}); reinstall with `pip install --no-build-isolation ./python` where torch "
                "and the CUDA toolkit are present"
            ) from build_error
        warnings.warn(
            f"memcoord: the C++ shim is unavailable ({build_error}); using PyTorch's Python pluggable-allocator "
            "API: record_stream and empty_cache go through Python, CUDA graph capture raises RuntimeError, "
            "and an out-of-memory cannot raise torch.OutOfMemoryError (python/README.md: building the shim)",
            RuntimeWarning,
            stacklevel=4,
        )
        return None


def _check_not_initialized(torch):
    if torch.cuda.is_initialized():
        try:
            backend = torch.cuda.memory.get_allocator_backend()
        except Exception:
            backend = "unknown"
        raise RuntimeError(
            "memcoord.enable() must run before CUDA is initialised in this process, but CUDA was already "
            f"initialised with PyTorch's '{backend}' allocator (something allocated a CUDA tensor, or called "
            "torch.cuda.init()/set_device()/synchronize(), before enable()). Call memcoord.enable() right after "
            "`import torch`, before building the model."
        )


def _python_record_stream(torch, lib):
    """Tensor.record_stream for the pluggable path without the shim (Python callers only). Like PyTorch's own
    allocator, it does nothing for a tensor with no memory (data_ptr 0) or memory memcoord did not hand out
    (another allocator's: NOT_FOUND, one warning per process)."""
    original = torch.Tensor.record_stream
    record = lib.function("memcoord_record_stream")
    warned = []

    def record_stream(self, stream):
        if self.is_cuda:
            ptr = self.untyped_storage().data_ptr()
            if ptr:
                code = record(ptr, int(stream.cuda_stream))
                if code == _capi.NOT_FOUND:
                    if not warned:
                        warned.append(True)
                        warnings.warn(
                            f"memcoord: Tensor.record_stream on memory memcoord did not allocate ({lib.last_error()}) "
                            "is ignored, as PyTorch's allocator ignores blocks it does not own (warned once)",
                            RuntimeWarning, stacklevel=2)
                else:
                    lib.check("memcoord_record_stream", code)
        return original(self, stream)

    torch.Tensor.record_stream = record_stream


GRAPH_CAPTURE_NEEDS_SHIM = (
    "CUDA graph capture under memcoord needs memcoord's C++ shim (memcoord/csrc/torch_shim.cpp), which this "
    "process runs without: PyTorch's Python pluggable-allocator API has no hook for the capture's private "
    "memory pool, so the captured graph's memory would not be kept for its replays. Build the shim as "
    "python/README.md says (`pip install --no-build-isolation ./python` where torch and the CUDA toolkit are "
    "present, or enable(shim='required') to see why it cannot be built), or capture without memcoord.enable()"
)


def _refusing(original):
    """A stand-in for `original` that raises GRAPH_CAPTURE_NEEDS_SHIM; `__wrapped__` is the original."""

    @functools.wraps(original)
    def refuse(*args, **kwargs):
        raise RuntimeError(GRAPH_CAPTURE_NEEDS_SHIM)

    return refuse


def _refuse_graph_capture(torch):
    """Without the shim, torch.cuda.CUDAGraph.capture_begin raises GRAPH_CAPTURE_NEEDS_SHIM (a RuntimeError)
    instead of capturing a graph whose memory memcoord does not keep, and so does making a torch.cuda.graph
    context (its __enter__ switches the current stream before capture_begin, and a failure there would leave
    it switched). The originals stay as `__wrapped__` and in _state["graph_originals"]."""
    for owner_name, attribute in (("CUDAGraph", "capture_begin"), ("graph", "__init__")):
        owner = getattr(torch.cuda, owner_name, None)
        original = getattr(owner, attribute, None) if isinstance(owner, type) else None
        if original is None:
            continue
        setattr(owner, attribute, _refusing(original))
        _state.setdefault("graph_originals", {})[f"{owner_name}.{attribute}"] = original
        _state["patched"].append(f"{owner_name}.{attribute}")


def _abandoning_on_failure(original, shim, capture_failed):
    """`original` (CUDAGraph.capture_end when `capture_failed`, else capture_begin), having the shim abandon the
    pool route it left open (shim.abandon_capture) before re-raising whatever it raised: after a capture_end
    that raised before ending its route (this thread's routes as many as before), the route this thread began
    last; after a capture_begin, only a route that this call began. A capture_end that ended its route and
    then raised leaves the rest to PyTorch, and another capture this thread has open stays open.
    `__wrapped__` is the original."""

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        begun = shim.routes_begun()
        try:
            return original(*args, **kwargs)
        except BaseException:
            now = shim.routes_begun()
            if (now == begun > 0) if capture_failed else (now > begun):
                shim.abandon_capture(capture_failed)
            raise

    return wrapper


def _recover_failed_captures(torch, shim):
    """With the shim: a torch.cuda.CUDAGraph.capture_end that raises has the shim end and release the pool
    route the failed capture left open, and end the pool's capture in PyTorch's host allocator
    (torch_shim.cpp's AbandonCapture says why PyTorch does neither), so that trims and empty_cache() work again
    on that device and a retry into the pool is taken; a capture_begin that raises after memcoord began its
    route has that route ended and released. The error still reaches the caller. The originals stay as
    `__wrapped__` and in _state["graph_originals"]."""
    owner = getattr(torch.cuda, "CUDAGraph", None)
    if not isinstance(owner, type) or not all(hasattr(shim, name) for name in ("abandon_capture", "routes_begun")):
        return False
    if not all(hasattr(owner, attribute) for attribute in ("capture_begin", "capture_end")):
        return False
    for attribute, capture_failed in (("capture_begin", False), ("capture_end", True)):
        original = getattr(owner, attribute)
        setattr(owner, attribute, _abandoning_on_failure(original, shim, capture_failed))
        _state.setdefault("graph_originals", {})[f"CUDAGraph.{attribute}"] = original
        _state["patched"].append(f"CUDAGraph.{attribute}")
    return True


def _patch(torch, name, replacement):
    if hasattr(torch._C, name):
        setattr(torch._C, name, replacement)
        _state["patched"].append(name)


def _device_arg(torch, device):
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    return torch.cuda._utils._get_device_index(device, optional=True)


# PyTorch's default max_entries is sys.maxsize ("unbounded"): memcoord then keeps this many events (40 bytes
# each, so 40 MB), as it cannot keep an unbounded history.
HISTORY_TORCH_MAX_ENTRIES = 1_000_000


def _history_entries(max_entries):
    """memcoord.record_history's max_entries for PyTorch's: its unbounded default (sys.maxsize) becomes
    HISTORY_TORCH_MAX_ENTRIES, a number above memcoord's maximum (memcoord.HISTORY_MAX_ENTRIES) that maximum,
    below 1 one; any other number is kept as asked."""
    import memcoord

    entries = int(max_entries)
    if entries >= sys.maxsize:
        return HISTORY_TORCH_MAX_ENTRIES
    return max(1, min(entries, memcoord.HISTORY_MAX_ENTRIES))


def _patch_memory_api(torch, shim_hooks):
    import memcoord

    def memory_stats(device=None):
        return memcoord.memory_stats(_device_arg(torch, device), nested=True)

    def reset_peak(device=None):
        memcoord.reset_peak_stats(_device_arg(torch, device))

    def reset_accumulated(device=None):
        memcoord.reset_accumulated_stats(_device_arg(torch, device))

    def memory_snapshot(*args, **kwargs):
        return memcoord.snapshot()

    # torch.cuda.memory._record_memory_history reaches one of these two: memcoord records its own
    # allocations and frees, which snapshot() returns as device_traces.
    def record_history(*args, **kwargs):
        # (enabled: "all" | "state" | None, context, stacks, max_entries, ...)
        enabled = args[0] if args else kwargs.get("enabled", "all")
        max_entries = args[3] if len(args) > 3 else kwargs.get("max_entries", HISTORY_TORCH_MAX_ENTRIES)
        memcoord.record_history(enabled is not None, _history_entries(max_entries))

    def record_history_legacy(*args, **kwargs):
        # (enabled: bool, record_context, trace_alloc_max_entries, ...)
        enabled = args[0] if args else kwargs.get("enabled", True)
        max_entries = args[2] if len(args) > 2 else kwargs.get("trace_alloc_max_entries", 1)
        memcoord.record_history(bool(enabled), _history_entries(max_entries))

    _patch(torch, "_cuda_memoryStats", memory_stats)
    _patch(torch, "_cuda_resetPeakMemoryStats", reset_peak)
    _patch(torch, "_cuda_resetAccumulatedMemoryStats", reset_accumulated)
    _patch(torch, "_cuda_memorySnapshot", memory_snapshot)
    _patch(torch, "_cuda_record_memory_history", record_history)
    _patch(torch, "_cuda_record_memory_history_legacy", record_history_legacy)
    _patch(torch, "_accelerator_getDeviceStats", memory_stats)
    _patch(torch, "_accelerator_resetPeakStats", reset_peak)
    _patch(torch, "_accelerator_resetAccumulatedStats", reset_accumulated)
    # torch.cuda.set_per_process_memory_fraction has checked 0 <= fraction <= 1 (memcoord refuses 0, which
    # would fail every allocation, with a message); CUDAPluggableAllocator's own raises "does not yet support".
    if memcoord._lib().has("memcoord_set_memory_fraction"):
        _patch(torch, "_cuda_setMemoryFraction",
               lambda fraction, device: memcoord.set_memory_fraction(fraction, _device_arg(torch, device)))
        _patch(torch, "_cuda_getMemoryFraction", lambda device: memcoord.memory_fraction(_device_arg(torch, device)))
    if not shim_hooks.get("empty_cache"):
        _patch(torch, "_cuda_emptyCache", lambda *args, **kwargs: memcoord.empty_cache())


def _capi_addresses(lib):
    names = [
        "memcoord_torch_malloc",
        "memcoord_torch_free",
        "memcoord_last_error",
        "memcoord_torch_record_stream",
        "memcoord_empty_cache",
        "memcoord_cache_info",
        "memcoord_device_count",
        "memcoord_begin_allocate_to_pool",
        "memcoord_end_allocate_to_pool",
        "memcoord_release_pool",
    ]
    return {name: (lib.address(name) if lib.has(name) else 0) for name in names}


# Backends whose memory a GPU kernel cannot use (host pages, or addresses with no memory behind them): for
# memcoord's API without a GPU, never for PyTorch's CUDA tensors.
_NON_DEVICE_BACKENDS = ("host", "virtual")
# Set only by tests that stand a fake torch in for the real one (tests/python/test_enable_fake_torch.py).
_allow_non_device_backends = False

# enable()'s options for the worker, the variables memcoord_init() reads them from, and what each accepts.
_WORKER_OPTIONS = {"alloc_conf": ("MEMCOORD_ALLOC_CONF", "a str such as 'thread_cache:0,large_map_unit:80MiB'"),
                   "coordinator": ("MEMCOORD_COORDINATOR", "a str 'HOST:PORT'"),
                   "backend": ("MEMCOORD_BACKEND", "a str: 'cuda-vmm', 'cuda' or 'auto'")}


def _is_given(option, value):
    """None, and "" for coordinator and backend, mean "not given"; alloc_conf="" asks for the defaults."""
    return value is not None and (value != "" or option == "alloc_conf")


def _differs(option, value, had):
    """Whether a given option asks for something other than `had` (backend "auto" is what unset means)."""
    if option == "backend" and value == "auto" and had in (None, "", "auto"):
        return False
    return value != had


def _check_option_types(given):
    for option, value in given.items():
        if option in _WORKER_OPTIONS and value is not None and not isinstance(value, str):
            raise TypeError(f"memcoord.enable({option}={value!r}): {_WORKER_OPTIONS[option][1]} or None, not "
                            f"{type(value).__name__}")


def _resolve_shim(shim):
    if not shim and "MEMCOORD_TORCH_SHIM" in os.environ:
        shim = os.environ["MEMCOORD_TORCH_SHIM"]
        if shim not in ("auto", "required", "off"):
            raise ValueError(f"memcoord.enable(): MEMCOORD_TORCH_SHIM={shim!r} in the environment; accepted: "
                             "auto, required, off")
    shim = shim or "auto"
    if shim not in ("auto", "required", "off"):
        raise ValueError(f"memcoord.enable(shim={shim!r}): accepted: 'auto', 'required', 'off'")
    return shim


def _worker_settings(memcoord):
    """{variable: value} the live worker was made with, or None when there is none."""
    made_with = memcoord.initialized_settings()
    if made_with is None and memcoord.step_count() >= 0:  # a C call made the worker, from the environment
        made_with = {variable: os.environ.get(variable, "") for variable, _ in _WORKER_OPTIONS.values()}
    return made_with


def _refuse_what_the_worker_cannot_take(given, made_with):
    """A worker that exists already read its settings from the environment: another value now would be silently
    ignored, so it is an error that says so."""
    if made_with is None:
        return
    for option, (variable, _) in _WORKER_OPTIONS.items():
        value, had = given[option], made_with.get(variable, "")
        if _is_given(option, value) and _differs(option, value, had):
            raise RuntimeError(
                f"memcoord.enable({option}={value!r}): the worker already exists, made with "
                f"{variable}={had!r} (by memcoord.init() or another memcoord call before enable()), and "
                f"cannot take another; pass {option} to the first call, or call memcoord.shutdown() first")


def _refuse_a_non_device_backend(backend, made_with):
    """PyTorch would place CUDA tensors in whatever the pool hands out: on the host or virtual backend that is
    no GPU memory, and the first kernel to touch it faults far from the cause (MEMCOORD_BACKEND=host left set
    from a CPU-only test, say)."""
    if backend:
        kind, source = backend, f"backend={backend!r}"
    elif made_with is not None:
        kind, source = made_with.get("MEMCOORD_BACKEND", ""), "the existing worker's MEMCOORD_BACKEND"
    else:
        kind, source = os.environ.get("MEMCOORD_BACKEND", ""), "MEMCOORD_BACKEND in the environment"
    if kind in _NON_DEVICE_BACKENDS and not _allow_non_device_backends:
        raise RuntimeError(
            f"memcoord.enable(): {source} is {kind!r}, whose memory is not the GPU's, so CUDA tensors placed "
            "there would fault; PyTorch's allocator needs 'cuda-vmm', 'cuda' or 'auto' (MEMCOORD_BACKEND unset). "
            "memcoord's API without PyTorch (memcoord.init(), alloc(), stats(), step()) works on it")


def _init_with(given, memcoord):
    """Sets the given options' variables and makes the worker; a failure leaves the environment as it was, so
    neither a later memcoord.init() nor a child process inherits a setting that was refused."""
    before = {}
    for option, (variable, _) in _WORKER_OPTIONS.items():
        if _is_given(option, given[option]):
            before[variable] = os.environ.get(variable)
            os.environ[variable] = given[option]
    try:
        memcoord.init()  # torchrun's RANK/WORLD_SIZE/LOCAL_RANK count as memcoord's when those are unset
    except BaseException:
        for variable, value in before.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
        raise


def _refuse_other_options(given):
    """A second enable() returns at once: an option it is given that differs from the first call's cannot take
    effect, so it is an error rather than a setting silently ignored."""
    first = _state["options"]
    for option, value in given.items():
        had = first.get(option)
        if _is_given(option, value) and _differs(option, value, had):
            raise RuntimeError(
                f"memcoord.enable({option}={value!r}): memcoord is PyTorch's allocator already, enabled with "
                f"{option}={had!r}; a second enable() cannot change that (pass it to the first call)")


def _install(torch, lib, shim, patch_memory_api):
    module = _load_shim(shim)
    if module is not None:
        _state["hooks"] = dict(module.install(_capi_addresses(lib)))
        _state["shim"] = module
        if _state["hooks"].get("graph_pools"):
            _state["hooks"]["failed_capture_recovery"] = _recover_failed_captures(torch, module)
    else:
        allocator = torch.cuda.memory.CUDAPluggableAllocator(
            str(lib.path), "memcoord_torch_malloc", "memcoord_torch_free"
        )
        torch.cuda.memory.change_current_allocator(allocator)
        _state["allocator"] = allocator
        if lib.has("memcoord_record_stream"):
            _python_record_stream(torch, lib)
        _refuse_graph_capture(torch)
        _state["hooks"] = {"record_stream": lib.has("memcoord_record_stream"), "empty_cache": False,
                           "graph_pools": False}
    if patch_memory_api:
        _patch_memory_api(torch, _state["hooks"])


def enable(coordinator=None, backend=None, shim=None, watch_aborts=None, patch_memory_api=None, alloc_conf=None):
    """Makes memcoord PyTorch's CUDA allocator. Call it before the first CUDA allocation.

    coordinator: "HOST:PORT" to attach to (default: $MEMCOORD_COORDINATOR; unset: standalone).
    backend: memcoord's backend: "cuda-vmm", "cuda" or "auto" (default: $MEMCOORD_BACKEND, unset: auto). The
      host and virtual backends, whose memory is not the GPU's, are refused.
    alloc_conf: the pools' options, as PYTORCH_CUDA_ALLOC_CONF sets PyTorch's ("thread_cache:0,
      large_map_unit:40MiB"; default: $MEMCOORD_ALLOC_CONF; see memcoord.init).
    A worker that memcoord.init() (or another memcoord call) already made with another coordinator, backend or
    alloc_conf is an error (RuntimeError naming both values), not a setting silently ignored.
    shim: "auto" (default, or $MEMCOORD_TORCH_SHIM), "required" or "off" (see _load_shim).
    watch_aborts: start the abort watcher (default True: an abort ends the process with EXIT_ABORTED, naming the
        dead rank). False: you handle aborts; memcoord.step() and the integrations raise AbortedError at a
        step's end and do not end the process (until a watcher is started, memcoord.watch_aborts()).
    patch_memory_api: point torch.cuda's statistics and snapshot functions at memcoord (default True).
    Returns enabled_details(). A second call returns at once; an option it is given that differs from the first
    call's is an error (RuntimeError naming both), since it could not take effect. A call that raises leaves
    the environment variables it would have set as they were."""
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            f"memcoord.enable() makes memcoord PyTorch's allocator and needs torch, which is not importable ({error}); "
            "without torch, memcoord.init(), alloc(), stats(), step() and snapshot() work"
        ) from error

    given = {"coordinator": coordinator, "backend": backend, "alloc_conf": alloc_conf, "shim": shim,
             "watch_aborts": None if watch_aborts is None else bool(watch_aborts),
             "patch_memory_api": None if patch_memory_api is None else bool(patch_memory_api)}
    _check_option_types(given)
    with _lock:
        if _state["enabled"]:
            _refuse_other_options(given)
            return enabled_details()
        shim = _resolve_shim(shim)
        if not torch.cuda.is_available():
            raise RuntimeError(
                "memcoord.enable(): torch.cuda is not available (no GPU or a CPU-only torch); memcoord's Python "
                "API without PyTorch (memcoord.stats(), memcoord.step(), ...) works on the host backend"
            )
        _check_not_initialized(torch)
        import memcoord

        # Checked before anything is set: a refusal changes nothing.
        made_with = _worker_settings(memcoord)
        _refuse_what_the_worker_cannot_take(given, made_with)
        _refuse_a_non_device_backend(backend, made_with)
        lib = _capi.library()
        _init_with(given, memcoord)
        watch = watch_aborts is None or bool(watch_aborts)
        patch = patch_memory_api is None or bool(patch_memory_api)
        _install(torch, lib, shim, patch)
        if watch and lib.has("memcoord_wait_abort"):
            _abort.start_watcher(keep_running=True)  # a watcher (and handler) watch_aborts() started stays
        made_with = _worker_settings(memcoord) or {}
        _state["options"] = {option: made_with.get(variable, "")
                             for option, (variable, _) in _WORKER_OPTIONS.items()}
        _state["options"].update(shim=shim, watch_aborts=watch, patch_memory_api=patch)
        _state["watch_aborts"] = watch  # the integrations' steps respect a "no" here
        _state["enabled"] = True
        return enabled_details()


def print_details(stream=None):
    """One line saying how memcoord is installed into PyTorch (for logs)."""
    stream = stream or sys.stdout
    d = enabled_details()
    hooks = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in sorted(d["hooks"].items()))
    stream.write(f"memcoord: enabled={is_enabled()} shim={'yes' if d['shim'] else 'no'} {hooks}\n")
