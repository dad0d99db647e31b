"""The ctypes layer over libmemcoord_capi.so (worker/memcoord.h): finding the library, the prototypes of its
functions, the versioned structs, and errors that name what failed.

Every function is bound on first use, so a library built before a function existed still serves the others;
calling a missing one raises MissingSymbolError naming it and the library file. Nothing here imports torch.
Thread-safety: the C ABI is thread-safe; binding is guarded by a lock.
"""

import ctypes
import os
import threading
from pathlib import Path

# Status codes of worker/memcoord.h (gRPC numbering).
OK = 0
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14

# MEMCOORD_EXIT_ABORTED: a process that ends because its group was aborted exits with this (EX_TEMPFAIL), so
# torchrun, mpirun and memcoord-launch can restart the job.
EXIT_ABORTED = 75

_STATUS_NAMES = {
    OK: "OK",
    INVALID_ARGUMENT: "INVALID_ARGUMENT",
    DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
    NOT_FOUND: "NOT_FOUND",
    RESOURCE_EXHAUSTED: "RESOURCE_EXHAUSTED",
    FAILED_PRECONDITION: "FAILED_PRECONDITION",
    ABORTED: "ABORTED",
    UNIMPLEMENTED: "UNIMPLEMENTED",
    INTERNAL: "INTERNAL",
    UNAVAILABLE: "UNAVAILABLE",
}

LIBRARY_NAME = "libmemcoord_capi.so"


class MemcoordError(RuntimeError):
    """A memcoord C ABI call failed. `code` is the status code, `function` the C function."""

    def __init__(self, function, code, message):
        self.function = function
        self.code = code
        name = _STATUS_NAMES.get(code, str(code))
        # memcoord_last_error() starts with the code's name ("INVALID_ARGUMENT: ..."), which the text below
        # already gives once.
        if message and message.startswith(name + ": "):
            message = message[len(name) + 2 :]
        self.message = message
        super().__init__(f"{function} failed ({name}): {message or 'no message'}")


class MissingSymbolError(MemcoordError):
    """The loaded libmemcoord_capi.so does not define a function this package needs."""

    def __init__(self, function, path):
        self.path = path
        super().__init__(
            function,
            UNIMPLEMENTED,
            f"{path} has no {function}: it was built from an older memcoord than this Python package; "
            "rebuild libmemcoord_capi.so and reinstall the package (see the README's install section)",
        )


class AbortedError(MemcoordError):
    """The coordinator aborted this process's group (a peer rank died). `dead_rank` and `reason` say why."""

    def __init__(self, function, dead_rank, reason):
        self.dead_rank = dead_rank
        self.reason = reason
        if dead_rank >= 0 and reason.startswith(f"rank {dead_rank} "):
            what = reason
        else:
            who = f"rank {dead_rank}" if dead_rank >= 0 else "a rank the coordinator did not name"
            what = f"{who} died ({reason or 'no reason given'})"
        super().__init__(function, ABORTED, f"the job was aborted: {what}")


class DeviceStats(ctypes.Structure):
    """memcoord_device_stats, version 7 (see worker/memcoord.h for each field). A library of an earlier
    version fills only the fields it knows (it copies what its own struct holds): the later ones read 0."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_int32),
        ("pools", ctypes.c_int32),
        ("allocated_bytes", ctypes.c_uint64),
        ("peak_allocated_bytes", ctypes.c_uint64),
        ("requested_bytes", ctypes.c_uint64),
        ("peak_requested_bytes", ctypes.c_uint64),
        ("reserved_bytes", ctypes.c_uint64),
        ("peak_reserved_bytes", ctypes.c_uint64),
        ("active_bytes", ctypes.c_uint64),
        ("peak_active_bytes", ctypes.c_uint64),
        ("largest_free_bytes", ctypes.c_uint64),
        ("limit_bytes", ctypes.c_uint64),
        ("live_blocks", ctypes.c_uint64),
        ("allocations", ctypes.c_uint64),
        ("frees", ctypes.c_uint64),
        ("cache_hits", ctypes.c_uint64),
        ("ooms", ctypes.c_uint64),
        ("backend_allocations", ctypes.c_uint64),
        ("backend_frees", ctypes.c_uint64),
        ("backend_allocated_bytes", ctypes.c_uint64),
        ("backend_released_bytes", ctypes.c_uint64),
        ("trims", ctypes.c_uint64),
        ("trimmed_bytes", ctypes.c_uint64),
        ("device_total_bytes", ctypes.c_uint64),
        ("pack_waits", ctypes.c_uint64),  # version 2
        ("pack_stream_syncs", ctypes.c_uint64),
        ("misses", ctypes.c_uint64),  # version 3
        ("miss_ns", ctypes.c_uint64),
        ("pack_wait_ns", ctypes.c_uint64),
        ("peak_live_blocks", ctypes.c_uint64),  # version 4
        ("allocated_bytes_total", ctypes.c_uint64),  # version 5
        ("freed_bytes_total", ctypes.c_uint64),
        ("peak_sums", ctypes.c_uint64),  # version 6
        ("other_thread_frees", ctypes.c_uint64),  # version 7
    ]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_ if name != "struct_size"}


class AbortInfo(ctypes.Structure):
    """memcoord_abort_info, version 1."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("aborted", ctypes.c_int32),
        ("dead_rank", ctypes.c_int32),
        ("time_unix_ms", ctypes.c_int64),
        ("reason", ctypes.c_char * 512),
    ]


ABORT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(AbortInfo), ctypes.c_void_p)
# uintptr_t is size_t wide on every platform memcoord builds for (Linux, LP64).
STREAM_FILTER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p)

_u64 = ctypes.c_uint64
_uptr = ctypes.c_size_t  # uintptr_t
_vp = ctypes.c_void_p
_int = ctypes.c_int

# name: (restype, argtypes)
PROTOTYPES = {
    "memcoord_init": (_int, []),
    "memcoord_alloc": (_vp, [ctypes.c_char_p, ctypes.c_size_t, _uptr]),
    "memcoord_free": (_int, [ctypes.c_char_p, _vp]),
    "memcoord_step_begin": (_int, []),
    "memcoord_step_end": (_int, []),
    "memcoord_step": (ctypes.c_int64, []),
    "memcoord_shutdown": (_int, []),
    "memcoord_fail": (_int, [ctypes.c_char_p]),
    "memcoord_last_error": (ctypes.c_char_p, []),
    "memcoord_device_count": (_int, []),
    "memcoord_device_alloc": (_vp, [_int, ctypes.c_size_t, _uptr]),
    "memcoord_device_free": (_int, [_int, _vp, _uptr]),
    "memcoord_record_stream": (_int, [_vp, _uptr]),
    "memcoord_torch_malloc": (_vp, [ctypes.c_ssize_t, _int, _vp]),
    "memcoord_torch_free": (None, [_vp, ctypes.c_ssize_t, _int, _vp]),
    "memcoord_torch_record_stream": (None, [_vp, _vp]),
    "memcoord_device_stats_get": (_int, [_int, ctypes.POINTER(DeviceStats)]),
    "memcoord_reset_peak_stats": (_int, [_int]),
    "memcoord_empty_cache": (_int, [_int, ctypes.POINTER(_u64)]),
    "memcoord_cache_info": (_int, [_int, ctypes.POINTER(_u64)]),
    "memcoord_set_memory_fraction": (_int, [_int, ctypes.c_double]),
    "memcoord_memory_fraction": (_int, [_int, ctypes.POINTER(ctypes.c_double)]),
    # char* that must go back through memcoord_free_string: kept as a raw pointer, never a bytes copy.
    "memcoord_snapshot_json": (_vp, [_int]),
    "memcoord_free_string": (None, [_vp]),
    "memcoord_record_history": (_int, [_int, _int, _u64]),
    "memcoord_abort_info_get": (_int, [ctypes.POINTER(AbortInfo)]),
    "memcoord_wait_abort": (_int, [_int]),
    "memcoord_set_abort_callback": (_int, [ABORT_CALLBACK, _vp]),
    "memcoord_set_abort_exit": (_int, [_int, _int]),
    "memcoord_begin_allocate_to_pool": (_int, [_int, _u64, _u64, STREAM_FILTER, _vp]),
    "memcoord_end_allocate_to_pool": (_int, [_int, _u64, _u64]),
    "memcoord_release_pool": (_int, [_int, _u64, _u64]),
}


def candidate_paths():
    """Where the library is looked for, in order: $MEMCOORD_CAPI_LIB, inside this package (pip install), and
    the build folders of the repository this package sits in (python/ run from the source tree)."""
    paths = []
    env = os.environ.get("MEMCOORD_CAPI_LIB")
    if env:
        paths.append(Path(env))
    here = Path(__file__).resolve().parent
    paths.append(here / "lib" / LIBRARY_NAME)
    repo = here.parent.parent
    for preset in ("release", "debug", "asan"):
        paths.append(repo / "build" / preset / "lib" / LIBRARY_NAME)
    paths.append(repo / ".device-bundle" / "lib" / LIBRARY_NAME)
    return paths


def find_library():
    """The path of libmemcoord_capi.so; FileNotFoundError listing every place looked at."""
    paths = candidate_paths()
    env = os.environ.get("MEMCOORD_CAPI_LIB")
    if env and not Path(env).is_file():
        raise FileNotFoundError(f"MEMCOORD_CAPI_LIB={env} is not a file; it must name libmemcoord_capi.so")
    for path in paths:
        if path.is_file():
            return path
    looked = "\n  ".join(str(p) for p in paths)
    raise FileNotFoundError(
        f"{LIBRARY_NAME} not found; looked in:\n  {looked}\n"
        "Install the package with pip (it builds the library), build it with "
        "`cmake --build --preset release --target memcoord_capi`, or set MEMCOORD_CAPI_LIB to its path."
    )


class Library:
    """One loaded libmemcoord_capi.so. Functions are attributes (lib.memcoord_init()), bound on first use."""

    def __init__(self, path=None):
        self.path = Path(path) if path is not None else find_library()
        self._dll = ctypes.CDLL(str(self.path))
        self._lock = threading.Lock()
        self._bound = {}

    def has(self, name):
        try:
            getattr(self._dll, name)
            return True
        except AttributeError:
            return False

    def function(self, name):
        """The bound function `name`; MissingSymbolError if the library lacks it."""
        fn = self._bound.get(name)
        if fn is not None:
            return fn
        with self._lock:
            fn = self._bound.get(name)
            if fn is not None:
                return fn
            if name not in PROTOTYPES:
                raise AttributeError(f"{name} is not a memcoord C ABI function known to this package")
            try:
                fn = getattr(self._dll, name)
            except AttributeError:
                raise MissingSymbolError(name, self.path) from None
            fn.restype, fn.argtypes = PROTOTYPES[name]
            self._bound[name] = fn
            return fn

    def address(self, name):
        """The address of C function `name` (for PyTorch's pluggable allocator and the C++ shim)."""
        return ctypes.cast(self.function(name), ctypes.c_void_p).value

    def __getattr__(self, name):
        if name.startswith("memcoord_"):
            return self.function(name)
        raise AttributeError(name)

    def last_error(self):
        message = self.function("memcoord_last_error")()
        return message.decode("utf-8", "replace") if message else ""

    def fail_pointer(self, name):
        """The MemcoordError for a pointer-returning call that gave NULL: the code is the one the last error
        names ("INVALID_ARGUMENT: ..."), RESOURCE_EXHAUSTED when it names none."""
        message = self.last_error()
        prefix = message.split(":", 1)[0].strip()
        code = next((c for c, n in _STATUS_NAMES.items() if n == prefix), RESOURCE_EXHAUSTED)
        return MemcoordError(name, code, message)

    def check(self, name, code):
        """Raises MemcoordError (AbortedError for ABORTED) when `code` is not OK; returns None."""
        if code == OK:
            return
        message = self.last_error()
        if code == ABORTED:
            info = self.abort_info()
            if info is not None:
                raise AbortedError(name, info.dead_rank, info.reason.decode("utf-8", "replace") or message)
            raise AbortedError(name, -1, message)
        raise MemcoordError(name, code, message)

    def call(self, name, *args):
        """Calls an int-returning function and raises on failure."""
        self.check(name, self.function(name)(*args))

    def abort_info(self):
        """The AbortInfo, or None when the library has no memcoord_abort_info_get."""
        if not self.has("memcoord_abort_info_get"):
            return None
        info = AbortInfo()
        info.struct_size = ctypes.sizeof(AbortInfo)
        code = self.function("memcoord_abort_info_get")(ctypes.byref(info))
        if code != OK:
            raise MemcoordError("memcoord_abort_info_get", code, self.last_error())
        return info


_library = None
_library_lock = threading.Lock()


def library():
    """The process's Library (loaded once)."""
    global _library
    if _library is None:
        with _library_lock:
            if _library is None:
                _library = Library()
    return _library
