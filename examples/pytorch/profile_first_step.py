#!/usr/bin/env python3
"""Where a fresh process's first training step spends its CPU time, per allocator: one workload, one allocator,
in this process (run it once per allocator, each in a fresh process).

    profile_first_step.py WORKLOAD ALLOCATOR   (ALLOCATOR: native | expandable | memcoord)

Prints the first step's wall time, then torch.profiler's operators by self CPU time (the first step's top 15),
and the Python functions of the memcoord package that ran during the step (cProfile), so two allocators' first
steps can be set side by side operator by operator. --kernels PATH also records the GPU's activity (CUPTI) and
writes the first step's kernels and memory operations, by name with their counts, as JSON to PATH: whether an
allocator led a library (cuDNN's engine choice, cuBLAS's workspace) to launch other kernels, each loaded
lazily on first use at a cost to the first step's CPU time. The same file holds the step's CPU operators thread
by thread ("threads": each thread's self CPU time, in all and operator by operator), the Python thread's apart
from PyTorch's autograd thread, which runs the backward pass: kernels_diff.py sets them side by side.
"""

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", help="a workload of workloads.py (e.g. gpt2_fp32, resnet50_amp)")
    parser.add_argument("allocator", choices=("native", "expandable", "memcoord"))
    parser.add_argument("--kernels", metavar="PATH", help="also write the first step's GPU kernels (JSON)")
    args = parser.parse_args()
    workload_name, allocator = args.workload, args.allocator
    # Only this allocator's own setting (the caller's shell may hold another; see bench_allocators.CLEARED_ENV).
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
                 "MEMCOORD_ALLOC_CONF", "MEMCOORD_TRACE_DIR"):
        os.environ.pop(name, None)
    if allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    if allocator == "memcoord":
        import memcoord

        os.environ.setdefault("MEMCOORD_BACKEND", "cuda-vmm")
        memcoord.enable()
    import torch
    from torch.profiler import ProfilerActivity, profile

    import workloads

    torch.cuda.init()
    try:
        workload = workloads.make(workload_name)
    except ValueError as error:  # an unknown workload: the message names the accepted ones
        parser.error(str(error))
    torch.cuda.synchronize()
    python_profile = cProfile.Profile()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.kernels else [])
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        python_profile.enable()
        workload.step(0)
        torch.cuda.synchronize()
        python_profile.disable()
        first = (time.perf_counter() - started) * 1000
    print(f"{workload_name} {allocator}: first step {first:.0f} ms (under the profilers)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    if args.kernels:
        write_kernels(args.kernels, prof, workload_name, allocator, first)
    stats = pstats.Stats(python_profile)
    # The package's own files: "memcoord" anywhere in a path also took this checkout's examples where its folder
    # is named memcoord.
    package = None
    if "memcoord" in sys.modules:
        package = os.path.dirname(os.path.abspath(sys.modules["memcoord"].__file__)) + os.sep
    own = {k: v for k, v in stats.stats.items() if package and os.path.abspath(k[0]).startswith(package)}
    total = sum(v[3] for v in own.values())  # cumulative seconds of memcoord's Python functions
    print(f"memcoord's Python functions during the step: {len(own)}, {total * 1000:.1f} ms")
    for (path, line, name), value in sorted(own.items(), key=lambda kv: -kv[1][3])[:10]:
        print(f"  {name} ({os.path.basename(path)}:{line}): {value[0]} calls, {value[3] * 1000:.2f} ms")


def write_kernels(path, prof, workload_name, allocator, first_ms):
    """The GPU's events of the profiled step (kernels, memcpy, memset) by name: count and total ms."""
    kernels = {}
    for event in prof.events():
        if str(event.device_type).endswith("CUDA"):
            count, ms = kernels.get(event.name, (0, 0.0))
            kernels[event.name] = (count + 1, ms + event.device_time_total / 1000)
    threads = cpu_by_thread(prof.events())
    with open(path, "w") as out:
        json.dump({"workload": workload_name, "allocator": allocator, "first_step_ms": first_ms,
                   "kernels": {name: {"count": c, "ms": round(ms, 3)} for name, (c, ms) in sorted(kernels.items())},
                   "threads": threads},
                  out, indent=1)
    print(f"{len(kernels)} kernel names, {sum(c for c, _ in kernels.values())} launches: {path}")
    print("self CPU by thread: " + ", ".join(f"{role} {t['self_ms']:.1f} ms" for role, t in threads.items()))


# PyTorch's autograd engine records each backward function under this prefix, on the thread that runs it.
AUTOGRAD_PREFIX = "autograd::engine::evaluate_function"


def cpu_by_thread(events):
    """The CPU events' self time thread by thread: {role: {"self_ms", "ops": {name: {"count", "self_ms"}}}}. A
    thread's role is "autograd" when it ran autograd's engine (PyTorch's backward thread for the device), "python"
    for the busiest of the others (the thread that called the step), "thread N" (N its id) for the rest."""
    by_id = {}
    for event in events:
        if not str(event.device_type).endswith("CPU"):
            continue
        ops = by_id.setdefault(event.thread, {})
        count, us = ops.get(event.name, (0, 0.0))
        ops[event.name] = (count + 1, us + event.self_cpu_time_total)
    roles = {}
    for tid, ops in by_id.items():
        if any(name.startswith(AUTOGRAD_PREFIX) for name in ops) and "autograd" not in roles.values():
            roles[tid] = "autograd"
    others = sorted((t for t in by_id if t not in roles), key=lambda t: -sum(us for _, us in by_id[t].values()))
    for i, tid in enumerate(others):
        roles[tid] = "python" if i == 0 else f"thread {tid}"
    return {roles[tid]: {"self_ms": round(sum(us for _, us in ops.values()) / 1000, 3),
                         "ops": {name: {"count": c, "self_ms": round(us / 1000, 3)} for name, (c, us) in
                                 sorted(ops.items())}}
            for tid, ops in sorted(by_id.items(), key=lambda kv: roles[kv[0]])}


if __name__ == "__main__":
    main()
