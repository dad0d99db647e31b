"""CPU instructions and cycles spent by this process's threads, from Linux perf events (perf_event_open through
ctypes): whether a step that took longer on the CPU did more work (more instructions) or did the same work more
slowly (more cycles per instruction, or fewer cycles a millisecond: a slower or busier core; on the device
machines, virtual machines, a short probe ran two to three times as long on the slowest CPU as on the fastest).

    open_counters()  -> (Counters, None), or (None, why) where perf events are unavailable (no PMU in the
                        virtual machine, a seccomp filter, perf_event_paranoid above 2)
    Counters.read()  -> {"instructions": n, "cycles": n}, each scaled up when the kernel multiplexed it
    Counters.close()
    since(before, after) -> the counts between two reads

The counters are opened on the calling thread with inherit set, so the threads it starts afterwards (PyTorch's
autograd thread on the first backward) are counted with it, live or ended (Linux sums an inherited event's
children into each read); threads that already exist are not. No machine this was run on had a PMU (this
project's test machine and the device machines both refuse the events), so test_cpu_counters has checked the
counting itself nowhere yet. User space
only (exclude_kernel, exclude_hv), which perf_event_paranoid 2, the default, allows for one's own threads.
"""
import ctypes
import errno
import os
import platform
import struct

PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_FORMAT_TOTAL_TIME_ENABLED = 1
PERF_FORMAT_TOTAL_TIME_RUNNING = 2
PERF_FLAG_FD_CLOEXEC = 8
ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7; older kernels accept a larger, zero-tailed struct
# perf_event_attr's flag bits: inherit, exclude_kernel, exclude_hv.
FLAG_INHERIT = 1 << 1
FLAG_EXCLUDE_KERNEL = 1 << 5
FLAG_EXCLUDE_HV = 1 << 6
SYSCALL_NUMBERS = {"x86_64": 298, "aarch64": 241}
EVENTS = (("instructions", PERF_COUNT_HW_INSTRUCTIONS), ("cycles", PERF_COUNT_HW_CPU_CYCLES))


def _attr(config):
    """A perf_event_attr for hardware event `config`, counting user space, inherited by new threads."""
    buf = ctypes.create_string_buffer(ATTR_SIZE)
    read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
    flags = FLAG_INHERIT | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV
    # type, size, config, sample_period, sample_type, read_format, flags
    struct.pack_into("=IIQQQQQ", buf, 0, PERF_TYPE_HARDWARE, ATTR_SIZE, config, 0, 0, read_format, flags)
    return buf


def _open_one(config):
    """The event's file descriptor, or raises OSError naming why not."""
    number = SYSCALL_NUMBERS.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"perf_event_open: no syscall number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(number), _attr(config), ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1),
                      ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        what = {errno.ENOENT: "no such hardware counter here", errno.EOPNOTSUPP: "no such hardware counter here",
                errno.EACCES: "not permitted", errno.EPERM: "not permitted"}.get(err, "failed")
        raise OSError(err, f"perf_event_open: {what} ({os.strerror(err)})")
    return int(fd)


def _read_scaled(fd):
    value, enabled, running = struct.unpack("=QQQ", os.read(fd, 24))
    if running == 0:
        return 0
    return value if running >= enabled else int(value * enabled / running)


class Counters:
    def __init__(self, fds):
        self._fds = fds  # {name: fd}

    def read(self):
        return {name: _read_scaled(fd) for name, fd in self._fds.items()}

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


def open_counters():
    """(Counters, None) counting this thread and the threads it starts from now on, or (None, why)."""
    fds = {}
    try:
        for name, config in EVENTS:
            fds[name] = _open_one(config)
    except OSError as e:
        for fd in fds.values():
            os.close(fd)
        return None, f"{e.strerror} (perf_event_paranoid {_paranoid()})"
    counters = Counters(fds)
    if counters.read()["instructions"] == 0 and _spin_counted(counters) == 0:
        counters.close()
        return None, "the counters opened but count nothing (no PMU exposed to this machine)"
    return counters, None


def _spin_counted(counters):
    before = counters.read()["instructions"]
    sum(range(10000))
    return counters.read()["instructions"] - before


def _paranoid():
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def since(before, after):
    """{name: after - before} for two Counters.read() results (None when either is None)."""
    if before is None or after is None:
        return None
    return {name: after[name] - before[name] for name in after}
