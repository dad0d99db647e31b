"""Which CPUs a bench process runs on (bench_allocators.py --cpus), so that a process's step times do not
depend on where the scheduler happened to put it.

Stop 32's H200 runs had ResNet-50 medians of 27.6, 32.2 and 24.5 ms in three memcoord processes, and every
step of the 32.2 ms one from step 4 on took 28-34 ms: the whole process was slower, not some steps. One
possible cause: on a host with several NUMA nodes, a process whose threads run on a node far from its GPU
launches kernels more slowly, and where the scheduler puts it differs from process to process. Pinning every
process to the same CPUs, by default those the GPU's PCI device lists as local, takes that cause away; whether
it was the cause shows in the next run's spread.

    parse_cpus("0-3,8")       -> {0, 1, 2, 3, 8}; ValueError naming what is wrong and the accepted form
    gpu_local_cpus()          -> the CPUs local to the first visible GPU (sysfs), or raises LookupError saying why
    resolve_cpus(text[, speeds]) -> "none": None (no pinning); "auto": gpu_local_cpus(); "fastest:N": fastest_cpus;
                                 else parse_cpus(text), each checked against the CPUs this process may use
    fastest_cpus(n, cpus)     -> the n of `cpus` on which a short Python probe ran fastest, and each CPU's time
    choice_lines(program, cpus, speeds) -> the lines a bench prints of what it chose
    pin_to(cpus)              -> a subprocess preexec_fn that sets the child's affinity (None: no pinning)
No PyTorch needed: the bench's parent process never imports it before its children run.

"fastest:N": on the device machines (virtual machines) the CPUs are not alike. On 2026-12-06h's H100 start one
thread of capi_bench took 82-91 ns a pair in five runs on CPU 0 and 51-53 in two on CPU 15; a fresh process's
first step (serial CPU work) ran 637-1035 ms on the GPU's 16 local CPUs. Pinning every process of a comparison
to the same few CPUs, the fastest by a probe taken once before the first process, gives every allocator the same
CPUs.
"""

import os
import statistics
import subprocess
import time

ACCEPTED = ("a list of CPU numbers and ranges such as 0-7,16-23, 'auto' (the GPU's local CPUs), 'fastest:N' (the N "
            "fastest of them by a probe) or 'none'")
PROBE_ROUNDS = 3


def parse_cpus(text):
    """The set of CPUs in a cpulist ("0-3,8", the form of sysfs's local_cpulist and of taskset -c)."""
    cpus = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty entry in CPU list {text!r}; expected {ACCEPTED}")
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"bad entry {part!r} in CPU list {text!r}; expected {ACCEPTED}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"range {part!r} in CPU list {text!r} runs backwards; expected {ACCEPTED}")
        cpus.update(range(first, last + 1))
    return cpus


def format_cpus(cpus):
    """The shortest cpulist for a set of CPUs: {0, 1, 2, 5} -> "0-2,5"."""
    runs = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def first_gpu_bus_id(query=None):
    """The PCI bus id of the first GPU this process may use ("0000:19:00.0"), from nvidia-smi (which
    numbers GPUs as CUDA does under CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA_VISIBLE_DEVICES picks the first)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    index = visible if visible else "0"
    command = ["nvidia-smi", f"--id={index}", "--query-gpu=pci.bus_id", "--format=csv,noheader"]
    try:
        out = (query or _run)(command)
    except (OSError, subprocess.SubprocessError) as e:
        raise LookupError(f"cannot ask nvidia-smi for GPU {index}'s PCI bus id: {e}") from None
    bus = out.strip().splitlines()[0].strip() if out.strip() else ""
    if ":" not in bus:
        raise LookupError(f"nvidia-smi gave no PCI bus id for GPU {index} (got {out.strip()!r})")
    # nvidia-smi writes an 8-digit domain in upper case; sysfs a 4-digit one in lower case.
    domain, rest = bus.split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


def gpu_local_cpus(bus_id=None, sysfs="/sys/bus/pci/devices"):
    """The CPUs the kernel lists as local to the GPU (its NUMA node's), limited to those this process may use."""
    bus_id = bus_id or first_gpu_bus_id()
    path = os.path.join(sysfs, bus_id, "local_cpulist")
    try:
        with open(path) as f:
            listed = f.read()
    except OSError as e:
        raise LookupError(f"cannot read {path}: {e.strerror}") from None
    cpus = parse_cpus(listed) & os.sched_getaffinity(0)
    if not cpus:
        raise LookupError(f"{path} lists {listed.strip()}, none of which this process may run on")
    return cpus


def resolve_cpus(text, speeds=None):
    """None for 'none'; else the CPUs `text` names ('auto': the GPU's local ones; 'fastest:N': fastest_cpus, whose
    probe times then go into the dict `speeds` when one is given), all usable here."""
    if text is None or text == "none":
        return None
    if text == "auto":
        return gpu_local_cpus()
    if text.startswith("fastest:"):
        chosen, probed = fastest_cpus(_count(text), _probe_candidates())
        if speeds is not None:
            speeds.update(probed)
        return chosen
    cpus = parse_cpus(text)
    allowed = os.sched_getaffinity(0)
    if not cpus <= allowed:
        raise ValueError(f"CPUs {format_cpus(cpus - allowed)} of {text!r} are not among those this process may "
                         f"use ({format_cpus(allowed)})")
    return cpus


def _count(text):
    """N of "fastest:N", a whole number from 1."""
    n = text[len("fastest:"):]
    if not n.isdigit() or int(n) < 1:
        raise ValueError(f"{text!r}: N must be a whole number of CPUs from 1; expected {ACCEPTED}")
    return int(n)


def _probe_candidates():
    """The GPU's local CPUs where sysfs and nvidia-smi name them, else every CPU this process may use."""
    try:
        return gpu_local_cpus()
    except LookupError:
        return set(os.sched_getaffinity(0))


def python_probe():
    """Seconds a fixed piece of Python work takes on the CPU this thread runs on (8-13 ms on this project's 2-core
    test machine): the interpreter's speed there, much of what a first step's Python thread spends its time on."""
    started = time.perf_counter()
    total = 0
    for i in range(200_000):
        total += i * i
    return time.perf_counter() - started


def fastest_cpus(n, cpus, probe=python_probe):
    """(the n CPUs of `cpus` on which `probe` ran fastest, {cpu: its median seconds over PROBE_ROUNDS}). This
    thread runs on each CPU in turn and is put back where it was allowed before, even when the probe raises."""
    cpus = sorted(cpus)
    if n > len(cpus):
        raise ValueError(f"fastest:{n} asks for more CPUs than the {len(cpus)} there are to choose from "
                         f"({format_cpus(cpus)})")
    allowed = os.sched_getaffinity(0)
    speeds = {}
    try:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            speeds[cpu] = statistics.median(probe() for _ in range(PROBE_ROUNDS))
    finally:
        os.sched_setaffinity(0, allowed)
    ranked = sorted(cpus, key=lambda cpu: (speeds[cpu], cpu))
    return set(ranked[:n]), speeds


def choice_lines(program, cpus, speeds):
    """What a bench prints of its --cpus: the CPUs its processes run on, and with fastest:N each candidate's probe
    time, fastest first."""
    lines = [f"{program}: every process runs on CPUs {format_cpus(cpus)}"] if cpus else []
    if speeds:
        lines.append(f"{program}: the CPUs' probe times (ms): " +
                     ", ".join(f"{cpu} {speeds[cpu] * 1000:.1f}" for cpu in sorted(speeds, key=speeds.get)))
    return lines


def pin_to(cpus):
    """A preexec_fn for subprocess that runs the child on `cpus` (None when not pinning)."""
    if not cpus:
        return None
    chosen = frozenset(cpus)
    return lambda: os.sched_setaffinity(0, chosen)


def _run(command):
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=True).stdout
