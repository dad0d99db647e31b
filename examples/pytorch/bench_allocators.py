#!/usr/bin/env python3
"""Side-by-side bench of PyTorch's allocators and memcoord on real training (issue 12, item 1).

Every workload (examples/pytorch/workloads.py) runs under each allocator in a fresh process:
  native       PyTorch's caching allocator, PYTORCH_CUDA_ALLOC_CONF unset
  expandable   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  memcoord     memcoord.enable() on the cuda-vmm backend (MEMCOORD_BACKEND, default cuda-vmm)
and, named only, a control: expandable+memcoord, expandable segments in a process where memcoord runs as under
memcoord.enable() but is not the allocator (init, the abort watcher, the shim loaded): what memcoord's presence
costs apart from its allocations.
and reports: device memory above the CUDA context (cudaMemGetInfo, highest at any step's end), the pool's
peak reserved and peak allocated (torch.cuda.max_memory_*: memcoord's own counters under memcoord), their
ratio, the median and first step times (ms, synchronized; the median over every step but the first, and for a
workload that steps models in turn, alternating, each model's median apart and their mean: step_medians), and
the losses (every step of every process, compared with native's first process).

Targets checked per workload (issue 12): memcoord's device memory <= expandable's; memcoord's median step
within 2% of native's (each model's, for alternating); memcoord's first step no slower than expandable's;
losses equal native's (|diff| <= --loss-tolerance, default 0: bit-identical; a NaN against a number never
equal); every process finished (a process that failed is left out of the figures and named here). Exit 0 when
every run finished and every target held, 1 otherwise (the table says which); --json FILE keeps every figure.
Printed beside the targets, not judged: each process's first step, in how many (memcoord, expandable) pairs of
processes memcoord's first step was the shorter (half of them for equal allocators: fresh processes' first steps
spread by 100 ms and more, so the medians' comparison can flip on one process), and the first step's driver
memory calls.

Usage: bench_allocators.py [--workloads a,b] [--allocators native,expandable,memcoord] [--steps N] [--json F]
                           (an allocator memcoord[CONF] adds memcoord with MEMCOORD_ALLOC_CONF=CONF, e.g.
                            memcoord[thread_cache:0,large_map_unit:40MiB], beside the others; the targets
                            read plain memcoord, which runs with no MEMCOORD_ALLOC_CONF: the defaults)
                           [--trace-dir DIR]   (memcoord runs also record DIR/WORKLOAD/rank0.default.trace.gz)
                           [--repeat N]        (N fresh processes per configuration: median times, highest memory;
                                                each round rotates the allocators' order: take a multiple
                                                of the number of allocators)
                           [--cpus auto|fastest:N|LIST] (every process pinned to these CPUs; auto: the GPU's local
                                                ones; fastest:N: the N fastest of those by a probe, cpu_pinning.py)
                           [--deterministic]   (deterministic kernels: the losses check becomes meaningful bit for bit)
                           [--driver-timer SO] (bench/gpu/driver_call_timer.so preloaded: each first step's driver calls,
                                                and every step's memory calls)
                           [--no-warmup]       (no discarded warm-up process first: warm_up)
                           [--cold-steps N]    (N more steps a process, each after torch.cuda.empty_cache(): what
                                                re-growing costs, without a first step's one-time work; cold_steps)

Each process prints a line as it ends, and --json is written after every workload, so a bench stopped part-way
keeps what ran. memcoord's runs also keep each step's misses, packing waits and driver figures (the JSON's
"memcoord_steps", from the pools' counters; the snapshot, which returns the thread caches to the pool, is read only
after the last step), and every run where its reserve went at the end (PyTorch's small and large pools, memcoord's
small-block and large arenas).

Losses and --deterministic: PyTorch's default kernels are not deterministic (atomics in attention and
embedding backward passes, cuBLAS's split-K reductions), so two native processes differ in the last bits and
an allocator cannot be judged by bit equality there. --deterministic runs every process with
torch.use_deterministic_algorithms(True, warn_only=True), CUBLAS_WORKSPACE_CONFIG=:4096:8, cuDNN deterministic
and not benchmarking, and SDPA's math kernel only (flash, memory-efficient and cuDNN attention have
nondeterministic backward passes): then the losses depend on the inputs alone, and any difference between
allocators is the allocator's. Each run reports the nondeterministic operations PyTorch still warned about.
Such runs are judged on their losses alone (deterministic kernels are not what users train with).
With --repeat >= 2 the table also reports native's own run-to-run spread of the losses (informational).
"""

import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# The source tree's package only when none is installed: an installed one carries the shim pip built, where
# the source tree's would build it again at the first enable() (a JIT build, ~18 s of the first process).
sys.path.append(str(HERE.parent.parent / "python"))
import cpu_counters  # noqa: E402 (beside this file; no torch)
import cpu_pinning  # noqa: E402 (beside this file; no torch)
import driver_timer  # noqa: E402 (beside this file; no torch)

ALLOCATORS = ["native", "expandable", "memcoord"]
# PyTorch's expandable segments with everything of memcoord's but the allocator (informational: no target reads it).
LOADED_CONTROL = "expandable+memcoord"
VARIANT = re.compile(r"memcoord\[([^\]]*)\]")  # memcoord[CONF]: memcoord with MEMCOORD_ALLOC_CONF=CONF


def is_memcoord(allocator):
    """memcoord itself, with its defaults, or a variant memcoord[CONF] (informational: no target reads it)."""
    return allocator == "memcoord" or VARIANT.fullmatch(allocator) is not None


def split_allocators(text):
    """--allocators' list: commas separate names, except inside a variant's brackets (a conf has commas)."""
    return re.findall(r"memcoord\[[^\]]*\]|[^,]+", text)
# Printed beside the targets, not one of them.
INFORMATIONAL = {"losses within expandable's spread", "native's own loss spread", "first steps per process",
                 "steps paired with native's", "first step's CPU work (perf counters)",
                 "first step's driver calls <= expandable's", "first steps, pairs of processes",
                 "cold steps (after empty_cache)"}
GB = 1e9
# What a caller's shell may set that changes an allocator: each configuration sets its own, or none. PyTorch reads
# PYTORCH_ALLOC_CONF (2.9 on; PYTORCH_CUDA_ALLOC_CONF is its alias) and PYTORCH_NO_CUDA_MEMORY_CACHING=1 turns
# its caching off: either left in the environment ran every "native" process under it.
CLEARED_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
               "PYTORCH_NO_CUDA_MEMORY_CACHING", "MEMCOORD_TRACE_DIR", "MEMCOORD_ALLOC_CONF")


def clean_environment(env):
    """env without CLEARED_ENV's variables (in place; returned): what every configuration starts from."""
    for name in CLEARED_ENV:
        env.pop(name, None)
    return env


def step_medians(times, parts=1):
    """(median step ms, each part's median or None, each part's first step or None) of one process's step times.
    One part: the median of every step but the first (a fresh process's first step is its warm-up: the
    libraries' set-up, kernels loaded, the pool grown). A workload that steps several models in turn
    (workloads.py's `parts`: alternating runs GPT-2 at even steps, ResNet-50 at odd ones): each part's median over
    its own steps but its own first, and the median step is their mean (a round of one step of each, over the
    parts). The median of all the steps together, before, was GPT-2's fastest step (15 steps: ResNet-50's 7
    short ones and its first, GPT-2's 7): ResNet-50's steps never reached it."""
    if parts <= 1 or len(times) < 2:
        return (statistics.median(times[1:]) if len(times) > 1 else times[0]), None, None
    series = [times[p::parts] for p in range(parts)]
    series = [s for s in series if s]
    medians = [statistics.median(s[1:]) if len(s) > 1 else s[0] for s in series]
    return statistics.fmean(medians), medians, [s[0] for s in series]


def memcoord_step_figures():
    """What memcoord's pools on device 0 did on their misses so far, from their counters (memcoord.stats):
    misses and the host time they took (packing, waits and driver calls), units mapped and unmapped (one driver
    allocation each), packing's host waits for a busy block and their time, and those of them that synchronized
    the whole stream (no marker covered the block; each drains the GPU's queue), and the frees of a block another
    thread allocated (the thread caches' slow path: PyTorch's autograd thread frees the forward pass's blocks).
    Read after every step. Not the
    snapshot: taking one returns every thread's cached blocks to its pool (CachingPool::snapshot), so a snapshot
    after each step would change the pool the next step runs on, which no user's training does."""
    import memcoord

    own = memcoord.stats(0)
    return {"misses": own["misses"], "miss_ms": own["miss_ns"] / 1e6, "units_mapped": own["backend_allocations"],
            "units_unmapped": own["backend_frees"], "pack_waits": own["pack_waits"],
            "pack_wait_ms": own["pack_wait_ns"] / 1e6, "pack_stream_syncs": own["pack_stream_syncs"],
            "other_thread_frees": own.get("other_thread_frees", 0)}


def memcoord_driver_figures():
    """memcoord_step_figures() plus what only the pools' snapshot holds: the misses that waited for their own
    marker to pack a large shortfall (pack_drains), the markers recorded (deferred: owed by a large free that
    came too soon for its own, recorded at a later call) and the thread caches returned because their threads
    had stopped allocating (idle_cache_flushes). The snapshot empties the thread caches: read it once, after the
    last step."""
    import memcoord

    figures = memcoord_step_figures()
    snapshot_keys = ("pack_drains", "markers", "deferred_markers", "idle_cache_flushes")
    figures.update({key: 0 for key in snapshot_keys})
    for document in memcoord._snapshot_documents([0]):
        for pool in document.get("pools", []):
            stats = pool.get("stats", {})
            for key in snapshot_keys:
                figures[key] += stats.get(key, 0)
    return figures


def figures_since(before, after):
    """What a memcoord_driver_figures() or memcoord_step_figures() dict counted between two readings."""
    return {k: round(v - before.get(k, 0), 3) if isinstance(v, float) else v - before.get(k, 0)
            for k, v in after.items()}


def driver_summary(figures):
    """One phrase for a memcoord_driver_figures() or memcoord_step_figures() dict (the second has no drains or
    markers: the phrase then leaves them out)."""
    drains = f", {figures['pack_drains']} for a miss's own marker" if "pack_drains" in figures else ""
    markers = (f", {figures['markers']} markers ({figures.get('deferred_markers', 0)} deferred)"
               if "markers" in figures else "")
    if "idle_cache_flushes" in figures:
        markers += f", {figures['idle_cache_flushes']} idle thread caches flushed"
    if "other_thread_frees" in figures:
        markers += f", {figures['other_thread_frees']} frees of another thread's block"
    return (f"{figures['misses']} misses ({figures.get('miss_ms', 0.0):.1f} ms), {figures['units_mapped']} units "
            f"mapped, {figures['units_unmapped']} unmapped, {figures['pack_waits']} packing waits "
            f"({figures.get('pack_wait_ms', 0.0):.1f} ms; {figures['pack_stream_syncs']} of them whole-stream"
            f"{drains}){markers}")


def later_steps(run):
    """One phrase for what a process's steps after the first cost in the allocator's misses: the driver's memory
    calls (with the timer) and, for memcoord, its misses and packing waits; None when nothing was recorded."""
    parts = []
    timed = run.get("step_driver") or []
    if len(timed) > 1:
        parts.append(f"{sum(c for c, _ in timed[1:])} memory calls ({sum(ms for _, ms in timed[1:]):.1f} ms)")
    steps = run.get("memcoord_steps") or (run.get("memcoord") or {}).get("steps") or []
    if len(steps) > 1:
        total = {k: sum(s.get(k, 0) for s in steps[1:]) for k in ("misses", "miss_ms", "pack_waits", "pack_wait_ms")}
        parts.append(f"{total['misses']} misses ({total['miss_ms']:.1f} ms), {total['pack_waits']} packing waits "
                     f"({total['pack_wait_ms']:.1f} ms)")
    return ", ".join(parts) or None


def make_deterministic(torch):
    """Deterministic kernels everywhere this bench's workloads reach (see the module's docstring); returns the
    list that collects PyTorch's warnings about operations without a deterministic implementation."""
    import warnings

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)
    seen = []
    shown = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None):
        text = str(message)[:200]
        if "deterministic" in text and text not in seen:
            seen.append(text)
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = record  # the default filter shows each warning once per place: enough to list them
    return seen


CPU_FIGURES = ("thread_ms", "process_ms", "voluntary_switches", "involuntary_switches", "minor_faults")


def cpu_figures():
    """The training thread's CPU time, the whole process's (every thread: PyTorch's, the driver's, memcoord's),
    and the training thread's context switches (voluntary: it blocked) and minor page faults so far."""
    own = resource.getrusage(resource.RUSAGE_THREAD)
    return (time.thread_time() * 1000, time.process_time() * 1000, own.ru_nvcsw, own.ru_nivcsw, own.ru_minflt)


def thread_files(*names):
    """(thread name, [the text of each of its /proc/self/task/TID/NAME files]) for each of this process's
    threads; nothing where Linux has no /proc, and a thread that ended meanwhile is skipped."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return
    for task in tasks:
        try:
            texts = []
            for name in ("comm",) + names:
                with open(f"/proc/self/task/{task}/{name}") as f:
                    texts.append(f.read())
        except OSError:
            continue
        yield texts[0].strip(), texts[1:]


def thread_run_ms():
    """{thread name: milliseconds run so far, its threads summed} from /proc/self/task/*/schedstat (the
    scheduler's run time in ns; threads of one name, e.g. the CUDA driver's, pooled); {} where Linux has none."""
    run = {}
    for name, (schedstat,) in thread_files("schedstat"):
        run[name] = run.get(name, 0.0) + int(schedstat.split()[0]) / 1e6
    return run


def thread_places():
    """{thread name: {"cpu": the CPU it last ran on, "wait_ms": its milliseconds waiting for a CPU so far}} from
    /proc/self/task/*/stat and schedstat (threads of one name: the last read's CPU, the waits summed); {} where
    Linux has none. With the CPUs' probe times (--cpus fastest:N), whether a slow thread sat on a slow CPU."""
    places = {}
    for name, (schedstat, stat) in thread_files("schedstat", "stat"):
        cpu = int(stat.rsplit(")", 1)[1].split()[36])  # field 39, counted after the name's ")"
        place = places.setdefault(name, {"cpu": cpu, "wait_ms": 0.0})
        place["cpu"] = cpu
        place["wait_ms"] = round(place["wait_ms"] + int(schedstat.split()[1]) / 1e6, 1)
    return places


def places_since(before, after, ran):
    """The threads of `ran` (run_ms_since's) with their last CPU and their wait for a CPU between two
    thread_places() readings."""
    return {name: {"cpu": after[name]["cpu"],
                   "wait_ms": round(after[name]["wait_ms"] - before.get(name, {}).get("wait_ms", 0.0), 1)}
            for name in sorted(ran) if name in after}


def run_ms_since(before, after):
    """{thread name: ms run between two thread_run_ms() readings}, the threads that ran 0.1 ms or more."""
    return {name: round(ms - before.get(name, 0.0), 1) for name, ms in sorted(after.items())
            if ms - before.get(name, 0.0) >= 0.1}


def cpu_since(before, after):
    """{CPU_FIGURES name: after - before} (milliseconds to 0.1, counts whole)."""
    return {name: round(b - a, 1) if name.endswith("_ms") else b - a
            for name, a, b in zip(CPU_FIGURES, before, after)}


def load_memcoord_beside():
    """The control's process: memcoord's worker, its abort watcher and the shim, as memcoord.enable() makes
    them, with PyTorch's own allocator left in place."""
    # torch first, as enable() imports it, so that libcudart is loaded globally before memcoord's library
    # (ctypes, RTLD_LOCAL) brings its own: the driver-call timer (--driver-timer) forwards runtime calls with
    # dlsym(RTLD_NEXT), which finds no libcudart loaded only locally, and memcoord.init() before torch failed
    # in cudaGetDevice with cudaErrorCallRequiresNewerDriver (36), as driver_call_timer.c warns.
    import torch  # noqa: F401

    import memcoord
    from memcoord import _torch

    os.environ.setdefault("MEMCOORD_BACKEND", "cuda-vmm")
    memcoord.watch_aborts()  # init() first, as enable() does
    if _torch._load_shim("auto") is None:
        raise RuntimeError(f"{LOADED_CONTROL}: memcoord's shim did not load")


def cold_steps(torch, workload, allocator, first_index, count):
    """`count` steps after the measured ones, each on an emptied cache: every queued kernel finished and
    torch.cuda.empty_cache() before it, so the step maps its memory again as a first step does, with the
    one-time work of a first step (cuDNN's plans, lazy kernel loading, the autograd thread's start) already
    done. What re-growing costs each allocator, as after an evaluation pass's empty_cache(), and the part of a
    first step the allocator's growth is, without the rest of a first step's spread. Per step: its ms (wall,
    synchronized), each thread's run ms (thread_run_ms), the driver's memory calls [calls, ms] with the timer,
    and memcoord's miss figures under memcoord."""
    out = []
    timer_last = driver_timer.read()
    for k in range(count):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        threads_before = thread_run_ms()
        timer_before = driver_timer.read()
        figures_before = memcoord_step_figures() if is_memcoord(allocator) else None
        started = time.perf_counter()
        workload.step(first_index + k)
        torch.cuda.synchronize()
        entry = {"ms": round((time.perf_counter() - started) * 1000, 3),
                 "threads": run_ms_since(threads_before, thread_run_ms())}
        timer_now = driver_timer.read()
        if timer_now is not None:
            entry["driver"] = driver_timer.memory_pair(driver_timer.since(timer_before, timer_now), 3)
            # What empty_cache() itself called (unmapping), apart from the step's own calls.
            entry["empty_cache_driver"] = driver_timer.memory_pair(driver_timer.since(timer_last, timer_before), 3)
            timer_last = timer_now
        if figures_before is not None:
            entry["memcoord"] = figures_since(figures_before, memcoord_step_figures())
        out.append(entry)
    return out


def start_allocator(allocator):
    """Makes `allocator` this process's before torch is imported: memcoord.enable() for memcoord and its
    variants, memcoord beside expandable segments for the control. Returns what enable() said ({} otherwise)."""
    if is_memcoord(allocator):
        import memcoord

        os.environ.setdefault("MEMCOORD_BACKEND", "cuda-vmm")
        return memcoord.enable()
    if allocator == LOADED_CONTROL:
        load_memcoord_beside()
    return {}


def first_step_probes():
    """What the first step's figures are measured from, read just before it (outside its timed span): each
    thread's run time, place and driver calls, and the CPU counters, opened on this thread now so that PyTorch's
    autograd thread, started by the first backward, is counted with it."""
    probes = {"threads": thread_run_ms(), "places": thread_places(), "driver_threads": driver_timer.read_threads()}
    probes["counters"], probes["no_counters"] = cpu_counters.open_counters()
    probes["counters_at"] = probes["counters"].read() if probes["counters"] else None
    return probes


def first_step_figures(probes):
    """The first step's figures since first_step_probes(), read just after it; closes the counters."""
    threads = run_ms_since(probes["threads"], thread_run_ms())
    figures = {"threads": threads, "places": places_since(probes["places"], thread_places(), threads),
               "driver_threads": driver_timer.by_thread_name(probes["driver_threads"], driver_timer.read_threads())}
    counters = probes["counters"]
    if counters:
        figures["counters"] = cpu_counters.since(probes["counters_at"], counters.read())
        counters.close()
    else:
        figures["counters"] = {"unavailable": probes["no_counters"]}
    return figures


def measured_steps(torch, workload, allocator, steps, used_above):
    """Runs the `steps` measured steps, each timed from before it to its synchronize: their times and losses,
    the device memory above the context at the highest step end (`used_above(free)`), each step's CPU figures,
    driver memory calls (with the timer) and, under memcoord, miss figures, all read after the step's
    synchronize, outside the timed span; and the first step's figures thread by thread (first_step_figures)."""
    run = {"times": [], "losses": [], "device_peak": 0, "step_cpu": [], "step_driver": [], "step_memcoord": [],
           "first_step_timer": None, "first": None}
    # memcoord's figures count from the process's start: what building the model did is taken away.
    figures_last = memcoord_step_figures() if is_memcoord(allocator) else None
    timer_last = driver_timer.read()
    for i in range(steps):
        torch.cuda.synchronize()
        probes = first_step_probes() if i == 0 else None
        cpu_before = cpu_figures()
        started = time.perf_counter()
        run["losses"].append(workload.step(i))
        torch.cuda.synchronize()
        run["times"].append((time.perf_counter() - started) * 1000)
        run["step_cpu"].append(cpu_since(cpu_before, cpu_figures()))
        if i == 0:
            run["first"] = first_step_figures(probes)
        timer_now = driver_timer.read()
        own = driver_timer.since(timer_last, timer_now)  # None without the timer
        if own is not None:
            run["step_driver"].append(driver_timer.memory_pair(own, 2))
            timer_last = timer_now
        if i == 0:
            run["first_step_timer"] = own
        if is_memcoord(allocator):
            figures_now = memcoord_step_figures()
            run["step_memcoord"].append(figures_since(figures_last, figures_now))
            figures_last = figures_now
        free, _ = torch.cuda.mem_get_info()
        run["device_peak"] = max(run["device_peak"], used_above(free))
    return run


def memcoord_result(run, enabled):
    """What only memcoord's processes report: its own counters, each step's miss figures, where its arenas'
    mapped bytes went at the end, and which package, shim, hooks and backend ran."""
    import memcoord

    own = memcoord.stats(0)
    result = {k: own[k] for k in ("peak_reserved_bytes", "peak_allocated_bytes", "peak_requested_bytes",
                                  "peak_active_bytes", "backend_allocations", "backend_frees", "cache_hits",
                                  "allocations")}
    result["first_step"] = run["step_memcoord"][0] if run["step_memcoord"] else None
    result["steps"] = run["step_memcoord"]
    result["all_steps"] = memcoord_driver_figures()
    # Mapped bytes at the end in the small-block arenas and the large ones (PyTorch's small and large pools).
    arenas = {"small": 0, "large": 0}
    for document in memcoord._snapshot_documents([0]):
        for pool in document.get("pools", []):
            for segment in pool.get("segments", []):
                arenas["small" if segment.get("small") else "large"] += segment.get("mapped_bytes",
                                                                                      segment.get("size", 0))
    result["arenas_mapped"] = arenas
    # Which package and shim ran (a source tree without the built shim builds one at enable()).
    result["package"] = os.path.dirname(memcoord.__file__)
    result["shim"] = getattr(memcoord._torch._state["shim"], "__file__", None)
    result["hooks"] = enabled.get("hooks", {})
    result["backend"] = os.environ.get("MEMCOORD_BACKEND")
    return result


def process_result(torch, workload_name, allocator, steps, run, context_used, parts):
    """The RESULT line's figures of one process's measured steps (`run`: measured_steps)."""
    median_step, part_medians, part_firsts = step_medians(run["times"], len(parts))
    first = run["first"]
    result = {
        "workload": workload_name,
        "allocator": allocator,
        "steps": steps,
        "device_bytes": run["device_peak"],
        # What the process held on the device before the first step (the CUDA context, plus anything an
        # allocator set up at start): device_bytes is measured above it.
        "context_bytes": context_used,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        # Every step's median but the first's; for a workload of several parts, the mean of their medians
        # (step_medians).
        "median_step_ms": median_step,
        "first_step_ms": run["times"][0],
        "losses": run["losses"],
        "step_ms": [round(t, 2) for t in run["times"]],
        # The driver's memory calls of the first step, whatever the allocator (bench/gpu/driver_call_timer.so
        # preloaded: --driver-timer), else None.
        "first_step_driver_calls": run["first_step_timer"],
        # Per step: [driver memory calls, their ms] (with the timer, else empty).
        "step_driver": run["step_driver"],
        # Per step, where its wall time went on the host (cpu_figures): a step longer than another's with the
        # same CPU time waited (a synchronize, a lock, the GPU), one with more CPU time computed more.
        "step_cpu": run["step_cpu"],
        # The first step's run time of each of the process's threads by name (thread_run_ms): which threads
        # the first step's CPU time was spent on, the allocator's own included.
        "first_step_threads": first["threads"],
        # The same threads' last CPU after the first step and their wait for a CPU in it (thread_places).
        "first_step_places": first["places"],
        # The first step's driver memory calls thread by thread ({thread name: [calls, ms]}, with the timer, else
        # None): whether the allocator's driver time fell on the Python thread or on PyTorch's autograd thread.
        "first_step_driver_threads": first["driver_threads"],
        # The first step's user-space CPU instructions and cycles, the training thread's and those of the
        # threads it started in the step (cpu_counters: perf events), or {"unavailable": why}: whether a longer
        # first step did more work or did it on a slower core.
        "first_step_counters": first["counters"],
    }
    if part_medians is not None:
        result["parts"] = parts
        result["part_median_step_ms"] = part_medians
        result["part_first_step_ms"] = part_firsts
    if not is_memcoord(allocator):
        # Where PyTorch's reserve went: its small (<= 1 MiB blocks) and large pools, peak and at the end.
        kept = torch.cuda.memory_stats()
        result["torch_pools"] = {f"{pool}.{when}": kept.get(f"reserved_bytes.{pool}.{when}", 0)
                                 for pool in ("small_pool", "large_pool") for when in ("peak", "current")}
    return result


def child(workload_name, allocator, steps, deterministic=False, cold=0):
    """One configuration in this (fresh) process; prints one RESULT line. `cold`: cold_steps after the measured
    steps, whose figures are all read before them."""
    child_started = time.monotonic()
    phases = {}  # seconds since child_started at the end of each phase (a slow process says where)

    def phase(name):
        phases[name] = round(time.monotonic() - child_started, 2)

    enabled = start_allocator(allocator)
    import torch

    import workloads

    phase("imports")
    nondeterministic = make_deterministic(torch) if deterministic else None
    torch.cuda.init()
    torch.cuda.set_device(0)
    free0, total = torch.cuda.mem_get_info()
    context_used = total - free0
    phase("cuda_init")
    workload = workloads.make(workload_name)
    phase("model")
    steps = steps or workloads.STEPS[workload_name]
    run = measured_steps(torch, workload, allocator, steps, lambda free: total - free - context_used)
    phase("steps")
    parts = list(getattr(workload, "parts", None) or [workload_name])
    result = process_result(torch, workload_name, allocator, steps, run, context_used, parts)
    if nondeterministic is not None:
        result["deterministic"] = True
        result["nondeterministic_ops"] = nondeterministic
    if is_memcoord(allocator):
        result["memcoord"] = memcoord_result(run, enabled)
    if cold:
        result["cold_steps"] = cold_steps(torch, workload, allocator, steps, cold)
        phase("cold_steps")
    phase("figures")
    result["phases_s"] = phases
    # The parent subtracts this from the process's wall time: what starting the interpreter and exiting took.
    result["in_process_s"] = round(time.monotonic() - child_started, 2)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def process_order(allocators, repeat):
    """The order of a workload's fresh processes in round `repeat` (0-based): the allocators rotated by one a
    round (native, expandable, memcoord; then expandable, memcoord, native; ...). Repeats go round the
    allocators so that a drift of the machine over a workload's minutes falls on every allocator alike, and
    rotating them gives each allocator each place in turn, in case a process's first step depends on the
    process before it (what that one's exit left the driver to do): with --repeat a multiple of the number of
    allocators, each allocator has run once in each place."""
    shift = repeat % len(allocators)
    return allocators[shift:] + allocators[:shift]


def run_config(workload, allocator, steps, timeout, trace_dir=None, deterministic=False, driver_timer_lib=None,
               cpus=None, cold=0):
    env = clean_environment(dict(os.environ))  # "memcoord" is what users get by default: no MEMCOORD_ALLOC_CONF
    if driver_timer_lib:
        driver_timer.preload(env, driver_timer_lib)
    variant = VARIANT.fullmatch(allocator)
    if variant:
        env["MEMCOORD_ALLOC_CONF"] = variant.group(1)
    if trace_dir and is_memcoord(allocator):
        # memcoord's pools record every allocation and free of the real run (TraceRecorder), for
        # `memcoord replay` to set the real run beside the replay of the same events.
        env["MEMCOORD_TRACE_DIR"] = str(Path(trace_dir) / workload)
    if allocator in ("expandable", LOADED_CONTROL):
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    command = [sys.executable, __file__, "--child", workload, allocator, str(steps or 0)]
    if deterministic:
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # read when cuBLAS starts: set before the child imports torch
        command.append("--deterministic")
    if cold:
        command += ["--cold-steps", str(cold)]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                              preexec_fn=cpu_pinning.pin_to(cpus))
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        return {"workload": workload, "allocator": allocator, "error": f"timed out after {timeout:.0f} s"}
    line = next((l for l in out.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        return {"workload": workload, "allocator": allocator,
                "error": f"exit {proc.returncode}: {out.strip()[-600:]}"}
    result = json.loads(line[len("RESULT "):])
    result["process_s"] = round(time.monotonic() - started, 1)
    result["cpus"] = cpu_pinning.format_cpus(cpus) if cpus else "any"
    if proc.returncode != 0:
        # It measured every step, then failed on its way out (a crash at exit, a hung thread killed): its
        # figures stay, and the process counts as failed (exit_failures; the bench exits 1 and says so).
        result["exit_code"] = proc.returncode
        result["exit_tail"] = out.strip()[-300:]
    return result


def combine(runs):
    """One row from the fresh-process runs of a configuration: each time figure is the median over the runs
    (a process's median step, its first step), memory figures the highest; the per-run figures are kept."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        row = dict(runs[0])
        if len(runs) > 1:
            row["failed_runs"] = len(runs)
            row["runs"] = [{"error": r.get("error")} for r in runs]
        return row
    row = dict(ok[0])
    if len(runs) > 1:
        row["median_step_ms"] = statistics.median(r["median_step_ms"] for r in ok)
        row["first_step_ms"] = statistics.median(r["first_step_ms"] for r in ok)
        for key in ("part_median_step_ms", "part_first_step_ms"):  # each part's median over the processes
            if all(r.get(key) for r in ok) and len({len(r[key]) for r in ok}) == 1:
                row[key] = [statistics.median(values) for values in zip(*(r[key] for r in ok))]
        for key in ("device_bytes", "peak_reserved_bytes", "peak_allocated_bytes"):
            row[key] = max(r[key] for r in ok)
        row["runs"] = [{k: r.get(k) for k in ("median_step_ms", "first_step_ms", "device_bytes", "step_ms", "error",
                                               "first_step_driver_calls", "step_driver", "step_cpu", "first_step_threads",
                                               "first_step_driver_threads", "first_step_counters", "first_step_places",
                                               "losses",
                                               "part_median_step_ms", "exit_code", "cpus", "round", "place",
                                               "cold_steps")}
                       for r in runs]
        for kept, r in zip(row["runs"], runs):
            if (r.get("memcoord") or {}).get("first_step") is not None:
                kept["memcoord_first_step"] = r["memcoord"]["first_step"]
            if (r.get("memcoord") or {}).get("steps"):
                kept["memcoord_steps"] = r["memcoord"]["steps"]
        # The same configuration in two fresh processes: how far its losses drift by themselves.
        row["own_loss_spread"] = max((loss_diff(r["losses"], ok[0]["losses"]) for r in ok[1:]), default=0.0)
    if len(ok) < len(runs):
        row["failed_runs"] = len(runs) - len(ok)
    exits = sum(1 for r in ok if r.get("exit_code"))
    if exits:
        row["exit_failures"] = exits
    return row


def process_losses(row):
    """The losses of every process of a combined row that finished (the row's own where it kept none per
    process: one process, or a JSON written before they were kept)."""
    kept = [r["losses"] for r in row.get("runs", []) if r.get("losses") is not None and not r.get("error")]
    return kept or [row["losses"]]


def losses_against(row, reference):
    """The largest |difference| from `reference`'s losses over every process of `row` (loss_diff each)."""
    return max(loss_diff(losses, reference["losses"]) for losses in process_losses(row))


def failures(row):
    """One phrase for a combined row's processes that failed (or measured, then exited non-zero); None if none."""
    processes = len(row.get("runs", [])) or 1
    said = []
    if "error" in row:
        said.append(f"{row.get('failed_runs', 1)} of {processes} failed ({row['error'][-120:]})")
    elif row.get("failed_runs"):
        errors = [r["error"] for r in row.get("runs", []) if r.get("error")]
        said.append(f"{row['failed_runs']} of {processes} failed and are left out of its figures "
                    f"({errors[0][-120:]})")
    if row.get("exit_failures") or row.get("exit_code"):
        said.append(f"{row.get('exit_failures', 1)} of {processes} exited non-zero after measuring")
    return "; ".join(said) or None


def first_step_driver_ms(row):
    """The median over a row's processes of the first step's milliseconds in driver memory calls (None without
    the driver timer)."""
    timed = [r.get("first_step_driver_calls") for r in row.get("runs", [row])]
    if not timed or any(t is None for t in timed):
        return None
    return statistics.median(driver_timer.memory_ms(t) for t in timed)


def first_step_work(row):
    """(median instructions, median cycles per instruction) of a row's processes' first steps, from the CPU
    counters; None when any process has none."""
    counted = [r.get("first_step_counters") or {} for r in row.get("runs", [row])]
    if not counted or not all(c.get("instructions") for c in counted):
        return None
    return (statistics.median(c["instructions"] for c in counted),
            statistics.median(c["cycles"] / c["instructions"] for c in counted))


def first_step_times(row):
    """A combined row's first step in each of its processes that timed one (ms)."""
    return [r["first_step_ms"] for r in row.get("runs", []) if r.get("first_step_ms") is not None]


def first_steps(row):
    """A combined row's first step in each of its processes, as "a, b, c"."""
    return ", ".join(f"{ms:.0f}" for ms in first_step_times(row))


def first_step_pairs(mc, expandable):
    """(faster, ties, pairs) over every pair of a memcoord process and an expandable-segments process: in how
    many memcoord's first step was the shorter. Half the pairs is what two allocators of equal first steps give
    (the Mann-Whitney count); the medians' comparison (the target) flips on one process's noise, this does not."""
    mine, theirs = first_step_times(mc), first_step_times(expandable)
    faster = sum(1 for m in mine for e in theirs if m < e)
    ties = sum(1 for m in mine for e in theirs if m == e)
    return faster, ties, len(mine) * len(theirs)


def cold_step_medians(row):
    """Each process's median cold step (ms; cold_steps), for the processes of a combined row that ran some."""
    return [statistics.median(s["ms"] for s in r["cold_steps"]) for r in row.get("runs", [row])
            if r.get("cold_steps")]


def cold_step_line(mc, expandable):
    """One phrase setting memcoord's cold steps beside expandable segments': the medians over the processes of
    each process's median cold step, in how many (memcoord, expandable) pairs of processes memcoord's was the
    shorter, and each side's median memory calls in a cold step (with the timer). None unless both ran some."""
    mine, theirs = cold_step_medians(mc), cold_step_medians(expandable)
    if not mine or not theirs:
        return None
    shorter = sum(1 for m in mine for e in theirs if m < e)
    line = (f"memcoord {statistics.median(mine):.2f} ms, expandable {statistics.median(theirs):.2f} ms (medians over "
            f"the processes of each one's median); memcoord's shorter in {shorter} of {len(mine) * len(theirs)} pairs")
    driver = {}
    for name, row in (("memcoord", mc), ("expandable", expandable)):
        timed = [s["driver"][1] for r in row.get("runs", [row]) for s in r.get("cold_steps") or [] if "driver" in s]
        if timed:
            driver[name] = statistics.median(timed)
    if len(driver) == 2:
        line += f"; memory calls {driver['memcoord']:.2f} against {driver['expandable']:.2f} ms a step (medians)"
    return line


def paired_steps(row, native):
    """(median ratio, total ratio, worst ratio, its step) of `row`'s steps against native's, step by step: each step's
    median over the processes (step i trains the same seeded batch everywhere, so its time is comparable across
    allocators), steps after the first. None when the step counts differ. Where step times differ by design
    (GPT-2 bf16's variable lengths: 124-222 ms), a process's median falls in a gap between them, and one step
    a few ms slower moves it across: on an H100 (2026-12-06) memcoord's median there was x1.033 of native's in
    one run and x1.001 in the next, while step by step it was x1.007 and x0.993."""
    mine = [statistics.median(column) for column in zip(*process_step_times(row))]
    theirs = [statistics.median(column) for column in zip(*process_step_times(native))]
    if len(mine) != len(theirs) or len(mine) < 2:
        return None
    ratios = [m / n for m, n in zip(mine[1:], theirs[1:]) if n > 0]
    if not ratios:
        return None
    worst = max(range(len(ratios)), key=ratios.__getitem__)
    return statistics.median(ratios), sum(mine[1:]) / sum(theirs[1:]), ratios[worst], worst + 1


def process_step_times(row):
    """Each process's step times (a row of one process: its own)."""
    return [r["step_ms"] for r in row.get("runs", [row]) if r.get("step_ms")]


def loss_diff(losses, reference):
    """The largest |difference| step by step (infinite when the runs have different lengths, or where one is NaN
    or infinite and the other not; a NaN against a NaN counts as equal). max() over differences let a NaN through
    once one step had compared: max(0.0, nan) is 0.0."""
    if len(losses) != len(reference):
        return float("inf")
    worst = 0.0
    for a, b in zip(losses, reference):
        if a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
            continue
        try:
            difference = abs(a - b)
        except TypeError:  # a null (JSON) against a number
            return float("inf")
        if math.isnan(difference):
            return float("inf")
        worst = max(worst, difference)
    return worst


def median_checks(mc, native):
    """memcoord's median step against native's (each model's, for models stepped in turn), and its steps paired
    with native's."""
    checks = []
    ratio = mc["median_step_ms"] / native["median_step_ms"]
    mine, theirs = mc.get("part_median_step_ms"), native.get("part_median_step_ms")
    if mine and theirs and len(mine) == len(theirs):
        # Models stepped in turn: each is held to the target (one's slowdown is not hidden by the other).
        ratios = [m / n for m, n in zip(mine, theirs)]
        names = mc.get("parts") or [f"part {i}" for i in range(len(ratios))]
        checks.append(("median within 2% of native", max(ratios) <= 1.02, f"x{ratio:.3f} (" + ", ".join(
            f"{name} x{r:.3f}" for name, r in zip(names, ratios)) + ")"))
    else:
        checks.append(("median within 2% of native", ratio <= 1.02, f"x{ratio:.3f}"))
    paired = paired_steps(mc, native)
    if paired is not None:
        median, total, worst, at = paired
        checks.append(("steps paired with native's", True, f"median x{median:.3f}, all steps x{total:.3f}, "
                       f"slowest x{worst:.3f} (step {at})"))
    return checks


def loss_checks(native, others, tolerance):
    """Each allocator's losses against native's: the checks, and {allocator: max |diff|}."""
    checks, diffs = [], {}
    for other in others:
        if other and native:
            # Every process of the allocator against native's first (the losses of one process each, before).
            diff = losses_against(other, native)
            diffs[other["allocator"]] = diff
            count = len(process_losses(other))
            checks.append((f"losses {other['allocator']} = native", diff <= tolerance,
                           f"max |diff| {diff:.3g}" + (f" over {count} processes" if count > 1 else "")))
    return checks, diffs


def first_step_notes(native, expandable, mc, losses_only):
    """What is printed beside the first-step target, not judged: each allocator's processes' first steps, the
    pairs of processes, the driver's memory calls, the cold steps and the CPU work."""
    notes = []
    spreads = [f"{r['allocator']} {first_steps(r)}" for r in (native, expandable, mc)
               if r and len(r.get("runs", [])) > 1]
    if spreads:
        # A first step includes the process's library set-up (cuBLAS, cuDNN), which varies by 100 ms or more
        # between fresh processes of one configuration: the compared figures are medians of these.
        notes.append(("first steps per process", True, "; ".join(spreads) + " ms"))
    if losses_only:
        return notes
    if mc and expandable:
        faster, ties, pairs = first_step_pairs(mc, expandable)
        if pairs > 1:
            notes.append(("first steps, pairs of processes", True,
                          f"memcoord's shorter in {faster} of {pairs} (memcoord, expandable) pairs"
                          + (f", equal in {ties}" if ties else "") + f" (equal first steps: {pairs / 2:g})"))
    timed = {r["allocator"]: first_step_driver_ms(r) for r in (expandable, mc) if r}
    if timed.get("memcoord") is not None and timed.get("expandable") is not None:
        # The part of the first step that is the allocator's own driver cost (--driver-timer), which the
        # processes' set-up noise above does not blur: medians over the processes.
        notes.append(("first step's driver calls <= expandable's", timed["memcoord"] <= timed["expandable"],
                      f"{timed['memcoord']:.1f} vs {timed['expandable']:.1f} ms of memory calls"))
    cold = cold_step_line(mc, expandable) if mc and expandable else None
    if cold:
        notes.append(("cold steps (after empty_cache)", True, cold))
    work = {r["allocator"]: first_step_work(r) for r in (expandable, mc) if r}
    if work.get("memcoord") and work.get("expandable"):
        # Same work, more time: the core was slower or busier. More work: the allocator (or its effects on
        # what PyTorch does) cost instructions.
        notes.append(("first step's CPU work (perf counters)", True, "; ".join(
            f"{name} {instructions / 1e9:.3f} G instructions, {cpi:.3f} cycles each"
            for name, (instructions, cpi) in (("memcoord", work["memcoord"]), ("expandable", work["expandable"])))
            + " (medians over the processes)"))
    return notes


def targets(rows, tolerance):
    """{workload: [(target, held, detail)]} for the workloads that ran under all three allocators. Runs with
    --deterministic are judged on their losses alone: deterministic kernels are not what users train with, so
    their memory and times are not the comparison the other targets make."""
    out = {}
    by = {(r["workload"], r["allocator"]): r for r in rows if "error" not in r}
    for workload in dict.fromkeys(r["workload"] for r in rows):
        native, expandable, mc = (by.get((workload, a)) for a in ALLOCATORS)
        ran = [r for r in (native, expandable, mc) if r]
        losses_only = bool(ran) and all(r.get("deterministic") for r in ran)
        checks = []
        if mc and expandable and not losses_only:
            checks.append(("device <= expandable", mc["device_bytes"] <= expandable["device_bytes"],
                           f"{mc['device_bytes'] / GB:.2f} vs {expandable['device_bytes'] / GB:.2f} GB"))
            checks.append(("first step <= expandable", mc["first_step_ms"] <= expandable["first_step_ms"],
                           f"{mc['first_step_ms']:.0f} vs {expandable['first_step_ms']:.0f} ms"))
        if mc and native and not losses_only:
            checks += median_checks(mc, native)
        losses, diffs = loss_checks(native, (expandable, mc), tolerance)
        checks += losses + first_step_notes(native, expandable, mc, losses_only)
        if native and "own_loss_spread" in native:
            checks.append(("native's own loss spread", True, f"max |diff| {native['own_loss_spread']:.3g} between "
                           f"{len(native.get('runs', []))} native processes"))
        if "memcoord" in diffs and "expandable" in diffs:
            # Kernels may pick different algorithms for different addresses, so PyTorch's own allocators differ
            # from each other in the last bits: memcoord is held to that spread too (reported, not a target).
            checks.append(("losses within expandable's spread", diffs["memcoord"] <= max(diffs["expandable"], tolerance),
                           f"{diffs['memcoord']:.3g} vs {diffs['expandable']:.3g}"))
        failed = [f"{r['allocator']}: {failures(r)}" for r in rows if r["workload"] == workload and failures(r)]
        if failed:
            # A target above reads the processes that finished; this says which did not (a target, not a note).
            checks.append(("every process finished", False, "; ".join(failed)))
        out[workload] = checks
    return out


def print_row(row, rows):
    """The summary line of one workload's combined row under one allocator (rows: those so far, for native's)."""
    name, allocator = row["workload"], row["allocator"]
    if "error" in row:
        print(f"{name} {allocator}: FAILED: {failures(row)}: {row['error'][-400:]}", flush=True)
        return
    own = row.get("memcoord") or {}
    driver = ""
    first = [r["memcoord_first_step"] for r in row.get("runs", []) if r.get("memcoord_first_step")]
    if not first and own.get("first_step"):
        first = [own["first_step"]]
    if first:
        driver = "; first step (per process): " + " | ".join(driver_summary(f) for f in first)
    if own.get("all_steps"):
        driver += f"; all steps: {driver_summary(own['all_steps'])}"
    native = next((r for r in rows if r["workload"] == name and r["allocator"] == "native"
                   and "error" not in r), None)
    if native is not None and allocator != "native":
        driver += f"; losses vs native: max |diff| {losses_against(row, native):.3g}"
    timed = [r.get("first_step_driver_calls") for r in row.get("runs", [row])]
    if any(t is not None for t in timed):
        driver += "; first step's driver calls per process: " + " | ".join(
            driver_timer.summary(t) for t in timed)
    later = [later_steps(r) for r in row.get("runs", [row])]
    if any(later):
        driver += "; steps after the first, per process: " + " | ".join(l or "-" for l in later)
    odd = row.get("nondeterministic_ops")
    odd = f"; nondeterministic ops warned: {odd}" if odd else ""
    if row.get("part_median_step_ms"):
        odd += "; parts' median (first) step: " + ", ".join(
            f"{name} {m:.1f} ({f:.0f}) ms" for name, m, f in zip(row.get("parts", []), row["part_median_step_ms"],
                                                                 row.get("part_first_step_ms") or []))
    if failures(row):
        odd += f"; PROCESSES FAILED: {failures(row)}"
    print(f"{name} {allocator}: device {row['device_bytes'] / GB:.2f} GB (context "
          f"{row.get('context_bytes', 0) / GB:.3f} GB), median "
          f"{row['median_step_ms']:.1f} ms, first {row['first_step_ms']:.0f} ms (process {row['process_s']} s, "
          f"{row['process_s'] - row.get('in_process_s', 0):.1f} s of it starting and exiting; phases ended at "
          f"{row.get('phases_s', {})} s)"
          f"{driver}{odd}", flush=True)


def process_line(result):
    """One process's figures in one phrase."""
    if "error" in result:
        return f"FAILED: {result['error'][-300:]}"
    line = (f"device {result['device_bytes'] / GB:.4f} GB, median {result['median_step_ms']:.1f} ms, "
            f"first {result['first_step_ms']:.0f} ms, process {result.get('process_s', 0):.1f} s")
    first_cpu = (result.get("step_cpu") or [None])[0]
    if first_cpu:
        line += (f"; first step's CPU: training thread {first_cpu['thread_ms']:.0f} ms, process "
                 f"{first_cpu['process_ms']:.0f} ms, thread's switches {first_cpu['voluntary_switches']} voluntary "
                 f"{first_cpu['involuntary_switches']} involuntary, {first_cpu['minor_faults']} minor faults")
    if result.get("first_step_threads"):
        line += "; threads' run time: " + ", ".join(f"{name} {ms:.0f}" for name, ms in
                                                    sorted(result["first_step_threads"].items(), key=lambda t: -t[1]))
    if result.get("first_step_places"):
        line += "; threads' last CPU and wait for one: " + ", ".join(
            f"{name} CPU {place['cpu']} {place['wait_ms']:.1f} ms"
            for name, place in result["first_step_places"].items())
    if result.get("first_step_driver_threads"):
        line += "; memory calls by thread: " + ", ".join(
            f"{name} {calls} ({ms:.1f} ms)" for name, (calls, ms) in
            sorted(result["first_step_driver_threads"].items(), key=lambda t: -t[1][1]))
    counted = result.get("first_step_counters") or {}
    if counted.get("instructions"):
        line += (f"; first step's user-space CPU work: {counted['instructions'] / 1e9:.3f} G instructions, "
                 f"{counted['cycles'] / 1e9:.3f} G cycles ({counted['cycles'] / counted['instructions']:.3f} a "
                 f"instruction)")
    elif counted.get("unavailable"):
        line += f"; no CPU counters: {counted['unavailable']}"
    if result.get("cold_steps"):
        cold = result["cold_steps"]
        threads = {}
        for step in cold:
            for name, ms in step["threads"].items():
                threads.setdefault(name, []).append(ms)
        busy = sorted(((statistics.median(ms), name) for name, ms in threads.items()), reverse=True)
        line += (f"; {len(cold)} cold steps: median {statistics.median(s['ms'] for s in cold):.2f} ms (threads' "
                 + ", ".join(f"{name} {ms:.1f}" for ms, name in busy if ms >= 0.1) + ")")
        timed = [s["driver"] for s in cold if "driver" in s]
        if timed:
            line += (f", memory calls {statistics.median(c for c, _ in timed):.0f} in "
                     f"{statistics.median(ms for _, ms in timed):.2f} ms")
    if result.get("exit_code"):
        line += f"; FAILED on exit (code {result['exit_code']}): {result.get('exit_tail', '')[-200:]}"
    return line


def write_json(path, rows, tolerance, warmup=None, cpu_probe=None):
    document = {"runs": rows, "targets": targets(rows, tolerance)}
    if warmup is not None:
        document["warmup"] = warmup
    if cpu_probe:  # --cpus fastest:N: each candidate CPU's probe time (ms)
        document["cpu_probe_ms"] = {str(cpu): round(s * 1000, 2) for cpu, s in sorted(cpu_probe.items())}
    with open(path, "w") as f:
        json.dump(document, f, indent=1)


def warm_up(workload, allocator, timeout, cpus):
    """One discarded process (one step of `workload` under `allocator`) before the measured ones: a run's first
    process also pays for the machine's cold start (2026-12-06f: its first step waited 550-660 ms beyond its CPU
    time, every later process under 2 ms), and that process always belonged to the first allocator named.
    Returns what it measured, for the JSON's "warmup"."""
    result = run_config(workload, allocator, 1, timeout, cpus=cpus)
    if "error" in result:
        print(f"bench_allocators: warm-up process ({workload} {allocator}) failed: {result['error'][-300:]}",
              flush=True)
        return {"workload": workload, "allocator": allocator, "error": result["error"][-300:]}
    first_cpu = (result.get("step_cpu") or [{}])[0]
    waited = result["first_step_ms"] - first_cpu["process_ms"] if "process_ms" in first_cpu else None
    print(f"bench_allocators: warm-up process ({workload} {allocator}, discarded): first step "
          f"{result['first_step_ms']:.0f} ms" + (f", {waited:.0f} ms of it waiting" if waited is not None else ""),
          flush=True)
    return {"workload": workload, "allocator": allocator, "first_step_ms": result["first_step_ms"],
            "first_step_waiting_ms": waited}


def print_tables(rows, checks):
    print("\n== allocators side by side (device = memory above the CUDA context, cudaMemGetInfo) ==")
    header = f"{'workload':<18} {'allocator':<11} {'device GB':>9} {'reserved GB':>11} {'alloc GB':>9} " \
             f"{'res/alloc':>9} {'median ms':>9} {'first ms':>9}  losses (first, last)"
    width = max([11] + [len(r["allocator"]) for r in rows])
    print(header.replace(f"{'allocator':<11}", f"{'allocator':<{width}}"))
    for r in rows:
        if "error" in r:
            print(f"{r['workload']:<18} {r['allocator']:<{width}} FAILED: {r['error'][:200]}")
            continue
        ratio = r["peak_reserved_bytes"] / max(r["peak_allocated_bytes"], 1)
        print(f"{r['workload']:<18} {r['allocator']:<{width}} {r['device_bytes'] / GB:>9.2f} "
              f"{r['peak_reserved_bytes'] / GB:>11.2f} {r['peak_allocated_bytes'] / GB:>9.2f} {ratio:>9.4f} "
              f"{r['median_step_ms']:>9.1f} {r['first_step_ms']:>9.0f}  {r['losses'][0]:.4f}, {r['losses'][-1]:.4f}"
              + (f"  ({failures(r)})" if failures(r) else ""))
    print("\n== targets (memcoord) ==")
    for workload, items in checks.items():
        for name, held, detail in items:
            print(f"{workload:<18} {name:<34} {'yes' if held else 'NO ':<4} {detail}")


def argument_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="gpt2_fp32,gpt2_bf16_varlen,resnet50_amp,llama_1b,alternating")
    parser.add_argument("--allocators", default=",".join(ALLOCATORS))
    parser.add_argument("--steps", type=int, default=0, help="steps per run (default: each workload's own)")
    parser.add_argument("--timeout", type=float, default=420, help="seconds per run")
    parser.add_argument("--loss-tolerance", type=float, default=0.0)
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--trace-dir", help="memcoord runs record their pools' traces under DIR/WORKLOAD/")
    parser.add_argument("--repeat", type=int, default=1,
                        help="fresh processes per configuration (times: median over them; memory: highest)")
    parser.add_argument("--no-warmup", action="store_true",
                        help="measure from the run's first process on (by default one discarded process, one step "
                             "of the first workload under the first allocator, runs first: warm_up)")
    parser.add_argument("--driver-timer", metavar="SO",
                        help="bench/gpu/driver_call_timer.so, preloaded into every process: each first step's "
                             "driver memory calls and their time, for every allocator")
    parser.add_argument("--deterministic", action="store_true",
                        help="deterministic kernels in every run, so losses compare bit for bit (see above)")
    parser.add_argument("--cpus", default="none",
                        help="CPUs every process runs on: 'auto' (those local to the GPU, from sysfs), 'fastest:N' "
                             "(the N of those on which a Python probe ran fastest, chosen once before the first "
                             "process), a list such as 0-7,16-23, or 'none' (default: wherever the scheduler puts "
                             "them); see cpu_pinning.py")
    parser.add_argument("--cold-steps", type=int, default=0,
                        help="after its measured steps each process runs N more, each after torch.cuda.empty_cache() "
                             "(cold_steps: what re-growing costs, without a first step's one-time work); reported "
                             "beside the targets, not judged")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    return parser


def run_workload(name, allocators, args, cpus):
    """Every allocator's processes of one workload, each allocator in each place of the order in turn
    (process_order); a line printed as each process ends. Returns each allocator's row (combine)."""
    runs_of = {allocator: [] for allocator in allocators}
    for repeat in range(args.repeat):
        for place, allocator in enumerate(process_order(allocators, repeat)):
            result = run_config(name, allocator, args.steps, args.timeout, args.trace_dir, args.deterministic,
                                args.driver_timer, cpus, args.cold_steps)
            result.update({"round": repeat, "place": place})  # the order the processes ran in
            runs_of[allocator].append(result)
            # A line per process as it ends: a bench stopped part-way (a time limit) still shows what ran.
            print(f"{name} {allocator} process {repeat + 1}/{args.repeat}: {process_line(result)}", flush=True)
    return [combine(runs_of[allocator]) for allocator in allocators]


def main():
    parser = argument_parser()
    args = parser.parse_args()
    if args.child:
        workload, allocator, steps = args.child
        return child(workload, allocator, int(steps), args.deterministic, args.cold_steps)
    try:
        import torch
    except ImportError:
        print("bench_allocators: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("bench_allocators: no GPU")
        return 77
    import workloads

    if args.repeat < 1 or args.repeat > 20:
        parser.error(f"--repeat must be between 1 and 20, got {args.repeat}")
    if args.cold_steps < 0 or args.cold_steps > 200:
        parser.error(f"--cold-steps must be between 0 and 200, got {args.cold_steps}")
    probed = {}
    try:
        cpus = cpu_pinning.resolve_cpus(args.cpus, probed)
    except (ValueError, LookupError) as e:
        parser.error(f"--cpus {args.cpus}: {e}")
    for line in cpu_pinning.choice_lines("bench_allocators", cpus, probed):
        print(line, flush=True)
    names = [w for w in args.workloads.split(",") if w]
    allocators = [a for a in split_allocators(args.allocators) if a]
    for name in names:
        if name not in workloads.BUILDERS:
            parser.error(f"unknown workload {name!r}; accepted: {', '.join(workloads.BUILDERS)}")
    for allocator in allocators:
        if allocator not in ALLOCATORS and allocator != LOADED_CONTROL and not is_memcoord(allocator):
            parser.error(f"unknown allocator {allocator!r}; accepted: {', '.join(ALLOCATORS)}, {LOADED_CONTROL} "
                         "(PyTorch's expandable segments with memcoord loaded beside it), or memcoord[CONF] "
                         "(memcoord with MEMCOORD_ALLOC_CONF=CONF, e.g. memcoord[thread_cache:0])")
    rows = []
    warmup = None if args.no_warmup else warm_up(names[0], allocators[0], args.timeout, cpus)
    for name in names:
        for row in run_workload(name, allocators, args, cpus):
            rows.append(row)
            print_row(rows[-1], rows)
        if args.json:
            # After every workload, for the same reason.
            write_json(args.json, rows, args.loss_tolerance, warmup, probed)
    checks = targets(rows, args.loss_tolerance)  # the last workload's write_json above already holds them
    print_tables(rows, checks)
    failed = any("error" in r or failures(r) for r in rows) or any(
        not held for items in checks.values() for name, held, _ in items if name not in INFORMATIONAL)
    print(f"\nbench_allocators: {'every run finished and every target held' if not failed else 'FAILED (see above)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
