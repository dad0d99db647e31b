#!/usr/bin/env python3
"""What a real training run's allocations cost each allocator through PyTorch, with no kernels running.

Replays an allocation trace (bench/traces/*.trace.gz: `a|f ADDR SIZE STREAM` lines recorded from real PyTorch
training) through torch.empty and del, in a fresh process per allocator (native, expandable_segments:True,
memcoord on cuda-vmm, and memcoord-pluggable: memcoord through PyTorch's CUDAPluggableAllocator without
memcoord's shim), twice over: the cold pass is what a first training step asks of the allocator (the
pool grows from empty: the driver's cost), the warm pass is the steady state (cache hits). Every event runs on
the default stream (the traces' side streams are ignored) and nothing touches the memory, so the figures are
the allocator's own cost plus Python's fixed cost per event, which is the same for every allocator.

After the passes each process times alloc+free pairs of one size in a loop (PAIR_SIZES): 0 bytes, which reach
the allocator's allocate() but no memory and no free (under memcoord, CUDAPluggableAllocator's own work per
allocation and the shim's, not memcoord's library), 64 KiB (a thread-cache hit in memcoord, PyTorch's small
pool) and 8 MiB (memcoord's pool under its lock, PyTorch's large pool): where a difference between the warm
passes lies.

Printed per trace and allocator, median of --repeat processes: each pass's milliseconds, the pairs' ns, the peak
reserved bytes, and (with bench/gpu/driver_call_timer.so preloaded, see --timer) the driver calls and their time
in the cold pass. Memcoord runs also report their pool's misses and the host time they took. The processes of a trace
go round the allocators, rotated each round (bench_allocators.process_order), each from the same environment
(bench_allocators.clean_environment: no allocator setting of the caller's shell). A process that fails or times
out is named beside the medians of the others, and the script then exits 1.

Usage: replay_cost.py [--traces gpt2_fp32,...] [--allocators native,expandable,memcoord] [--repeat 3]
                      [--timer PATH/driver_call_timer.so] [--json F] [--cpus auto|fastest:N|LIST]
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent.parent / "bench" / "traces"
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent.parent / "python"))
import cpu_pinning  # noqa: E402
import driver_timer  # noqa: E402
from bench_allocators import clean_environment, figures_since, memcoord_step_figures, process_order  # noqa: E402

DEFAULT_ALLOCATORS = ["native", "expandable", "memcoord"]
ALLOCATORS = DEFAULT_ALLOCATORS + ["memcoord-pluggable"]
# memcoord's allocators and the shim setting memcoord.enable() gets: memcoord-pluggable is memcoord through
# PyTorch's own CUDAPluggableAllocator layer, without the shim (its per-block record included), beside
# memcoord as users get it, to show what the shim's direct path saves.
MEMCOORD_SHIMS = {"memcoord": {}, "memcoord-pluggable": {"shim": "off"}}
PAIR_SIZES = (0, 64 << 10, 8 << 20)
PAIRS = 20_000  # a pair loop: about 30 ms of Python and torch.empty at 1.5 us a pair
PAIR_ROUNDS = 3  # each size's figure is the median of its rounds


def read_events(path):
    """[(True, addr, size) for an allocation, (False, addr, 0) for a free], in order."""
    events = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if not line or line[0] not in "af":
                continue
            kind, addr, size = line.split()[:3]  # then the stream, and the thread where a trace names them
            events.append((kind == "a", addr, int(size)))
    return events


def pair_ns(torch, size, pairs=PAIRS, rounds=PAIR_ROUNDS):
    """Median over `rounds` of the ns an alloc+free pair of `size` bytes took through torch.empty and del, on a
    warm cache (one pair first, untimed)."""
    warm = torch.empty(size, dtype=torch.uint8, device="cuda")
    del warm
    times = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for _ in range(pairs):
            block = torch.empty(size, dtype=torch.uint8, device="cuda")
            del block
        times.append((time.perf_counter_ns() - started) / pairs)
    return statistics.median(times)


def child(trace, allocator):
    if allocator in MEMCOORD_SHIMS:
        import memcoord

        os.environ.setdefault("MEMCOORD_BACKEND", "cuda-vmm")
        memcoord.enable(**MEMCOORD_SHIMS[allocator])
    import torch

    events = read_events(TRACES / f"{trace}.trace.gz")
    torch.cuda.set_device(0)
    torch.empty(1, dtype=torch.uint8, device="cuda")  # the context and the allocator's set-up, untimed (freed at once)
    torch.cuda.synchronize()
    result = {"trace": trace, "allocator": allocator, "events": len(events), "passes": []}
    for _ in range(2):
        live = {}
        before = driver_timer.read()
        own_before = memcoord_step_figures() if allocator in MEMCOORD_SHIMS else None
        started = time.perf_counter()
        for is_alloc, addr, size in events:
            if is_alloc:
                live[addr] = torch.empty(size, dtype=torch.uint8, device="cuda")
            else:
                live.pop(addr, None)
        live.clear()
        torch.cuda.synchronize()
        elapsed = (time.perf_counter() - started) * 1000
        passed = {"ms": round(elapsed, 2), "driver": driver_timer.since(before, driver_timer.read())}
        if own_before is not None:
            passed["pool"] = figures_since(own_before, memcoord_step_figures())
        result["passes"].append(passed)
    result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()  # the trace's: before the pairs
    try:  # a failure here keeps the passes' figures, and says why
        result["pair_ns"] = {str(size): round(pair_ns(torch, size), 1) for size in PAIR_SIZES}
    except Exception as error:  # noqa: BLE001 - any failure of the loops is reported, not raised
        result["pair_error"] = f"{type(error).__name__}: {error}"[:300]
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def run_child(trace, allocator, timer, timeout=300, cpus=None):
    env = clean_environment(dict(os.environ))
    if allocator == "expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    if timer:
        driver_timer.preload(env, timer)
        env["DRIVER_CALL_TIMER_BESIDE"] = "1"  # no training step to slow down: the calls beside are wanted too
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", trace, allocator], capture_output=True,
                              text=True, timeout=timeout, env=env, preexec_fn=cpu_pinning.pin_to(cpus))
    except subprocess.TimeoutExpired:  # one stuck process used to end the script, and every figure with it
        return {"trace": trace, "allocator": allocator, "error": f"timed out after {timeout:.0f} s"}
    out = proc.stdout + proc.stderr
    line = next((l for l in out.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        return {"trace": trace, "allocator": allocator, "error": f"exit {proc.returncode}: {out.strip()[-600:]}"}
    return json.loads(line[len("RESULT "):])


def driver_ms(passed):
    d = passed.get("driver")
    return None if d is None else driver_timer.memory_ms(d)


def driver_calls(passed):
    d = passed.get("driver")
    return None if d is None else driver_timer.memory_calls(d)


def size_text(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def print_row(trace, allocator, runs):
    ok = [r for r in runs if "error" not in r]
    if not ok:
        print(f"{trace:<18} {allocator:<18} error: {runs[0]['error']}", flush=True)
        return
    failed = [r["error"] for r in runs if "error" in r]
    med = lambda f: statistics.median(f(r) for r in ok)  # noqa: E731
    cold = med(lambda r: r["passes"][0]["ms"])
    warm = med(lambda r: r["passes"][1]["ms"])
    line = (f"{trace:<18} {allocator:<18} cold {cold:8.1f} ms  warm {warm:7.1f} ms  "
            f"reserved {max(r['peak_reserved_bytes'] for r in ok) / 2**20:9.0f} MiB")
    if driver_ms(ok[0]["passes"][0]) is not None:
        line += (f"  cold driver {med(lambda r: driver_ms(r['passes'][0])):6.1f} ms in "
                 f"{int(med(lambda r: driver_calls(r['passes'][0])))} calls")
    if "pool" in ok[0]["passes"][0]:
        pool = ok[0]["passes"][0]["pool"]
        line += f"  (pool: {pool['misses']:.0f} misses {pool['miss_ms']:.1f} ms, {pool['units_mapped']:.0f} units)"
    line += "  per process cold: " + ", ".join(f"{r['passes'][0]['ms']:.0f}" for r in ok)
    pairs = [r for r in ok if "pair_ns" in r]
    pair_errors = [r["pair_error"] for r in ok if "pair_error" in r]
    if pair_errors:
        line += f"\n    alloc+free pairs FAILED in {len(pair_errors)} of {len(ok)} processes: {pair_errors[0]}"
    if pairs:
        line += "\n    alloc+free pairs: " + ", ".join(
            f"{size_text(int(size))} {statistics.median(r['pair_ns'][size] for r in pairs):.0f} ns"
            for size in pairs[0]["pair_ns"])
    if failed:  # left out of the medians above, and said so
        line += f"\n    FAILED: {len(failed)} of {len(runs)} processes (left out of the figures): {failed[0][-300:]}"
    if ok[0]["passes"][0].get("driver") is not None:
        line += "\n    first process, cold pass: " + driver_timer.summary(ok[0]["passes"][0]["driver"])
    print(line, flush=True)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="gpt2_fp32,gpt2_bf16_varlen,resnet50_amp,alternating")
    parser.add_argument("--allocators", default=",".join(DEFAULT_ALLOCATORS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timer", help="bench/gpu/driver_call_timer.so, preloaded into every process")
    parser.add_argument("--json")
    parser.add_argument("--cpus", default="none",
                        help="CPUs every process runs on, as bench_allocators.py --cpus takes them: 'auto', "
                             "'fastest:N', a list such as 0-7, or 'none' (default)")
    args = parser.parse_args()
    allocators = args.allocators.split(",")
    for a in allocators:
        if a not in ALLOCATORS:
            parser.error(f"unknown allocator '{a}'; accepted: {', '.join(ALLOCATORS)}")
    probed = {}
    try:
        cpus = cpu_pinning.resolve_cpus(args.cpus, probed)  # fastest:N probes every CPU: after the cheap checks
    except (ValueError, LookupError) as e:
        parser.error(f"--cpus {args.cpus}: {e}")
    for line in cpu_pinning.choice_lines("replay_cost", cpus, probed):
        print(line, flush=True)
    every = []
    for trace in args.traces.split(","):
        if not (TRACES / f"{trace}.trace.gz").exists():
            parser.error(f"no trace {TRACES / (trace + '.trace.gz')}")
        runs = {a: [] for a in allocators}
        for round_ in range(args.repeat):  # interleaved, so drift in the machine falls on every allocator alike
            for a in process_order(allocators, round_):  # and rotated: each allocator in each place in turn
                result = run_child(trace, a, args.timer, cpus=cpus)
                result["cpus"] = cpu_pinning.format_cpus(cpus) if cpus else "any"
                runs[a].append(result)
        for a in allocators:
            print_row(trace, a, runs[a])
            every.extend(runs[a])
    if args.json:
        Path(args.json).write_text(json.dumps(every, indent=1))
    failed = sum(1 for r in every if "error" in r)
    if failed:
        print(f"replay_cost: {failed} of {len(every)} processes failed (see above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
