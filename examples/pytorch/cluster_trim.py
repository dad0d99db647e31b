#!/usr/bin/env python3
"""A cluster trim under real PyTorch (issue 12, item 4). A coordinator and N training processes on the GPU(s),
each training GPT-2 (random weights) under memcoord with memcoord.step() around every step. At step --eval-at
each runs an evaluation pass whose large temporaries stay cached in its pool. Then `memcoord trim` runs: every
rank must trim at the end of one common step, releasing that cache, and the device's free memory (cudaMemGetInfo)
must rise.

Prints each rank's trim (step, reserved before -> after, device free before -> after as that rank saw it around
its own step), the CLI's report, and a table. The device's free memory is also measured by this process once
before the trim and once after every rank has trimmed (each rank waits after its trim until that measurement
is taken, so none has grown again): exits 1 unless every rank trimmed at the same step and that rise is at
least half of the bytes every rank released.
Usage: cluster_trim.py [--ranks 2] [--memcoord-bin DIR_OR_BINARY] [--steps 40] [--eval-at 8] [--eval-batch 24]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GB = 1e9
sys.path.insert(0, str(HERE))

from arguments import positive_int  # noqa: E402


def rank_main(args):
    sys.path.append(str(REPO / "python"))  # the source tree's package when none is installed
    sys.path.insert(0, str(HERE))
    import memcoord

    memcoord.enable()
    import torch

    import workloads

    device = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
    torch.cuda.set_device(device)
    workload = workloads.make("gpt2_fp32" if not args.small else "tiny_gpt2", device=f"cuda:{device}")
    model = workload.modules[0]
    trims_seen = memcoord.stats(device)["trims"]
    for step in range(args.steps):
        before = memcoord.stats(device)
        free_before = torch.cuda.mem_get_info(device)[0]
        with memcoord.step():
            workload.step(step)
            if step == args.eval_at:
                with torch.no_grad():  # an evaluation pass: big activations, cached afterwards
                    ids = torch.randint(0, 50257, (args.eval_batch, 1024 if not args.small else 128), device="cuda")
                    model(input_ids=ids).logits.float().softmax(-1).sum()
                torch.cuda.synchronize()
                s = memcoord.stats(device)
                print(json.dumps({"event": "eval", "step": step, "reserved": s["reserved_bytes"]}), flush=True)
        after = memcoord.stats(device)
        if after["trims"] > trims_seen:
            trims_seen = after["trims"]
            print(json.dumps({"event": "trim", "step": memcoord.step_count(), "reserved_before": before["reserved_bytes"],
                              "reserved_after": after["reserved_bytes"], "free_before": free_before,
                              "free_after": torch.cuda.mem_get_info(device)[0]}), flush=True)
            sys.stdin.readline()  # the launcher measures the device with every rank trimmed, then lets us go on
        if step == args.eval_at + 1:
            print(json.dumps({"event": "ready_for_trim", "step": step}), flush=True)
        time.sleep(args.step_sleep)
    print(json.dumps({"event": "done"}), flush=True)
    return 0


def find_cli(hint):
    candidates = [Path(hint)] if hint else []
    candidates += [REPO / "build" / "release" / "bin", REPO / ".device-bundle" / "bin"]
    for c in candidates:
        path = c / "memcoord" if c.is_dir() else c
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    sys.exit(f"cluster_trim: the memcoord binary was not found in {[str(c) for c in candidates]}; pass --memcoord-bin")


def read_events(proc, until, timeout):
    """The rank's events up to the first whose name is in `until` (a name or a tuple of names)."""
    until = (until,) if isinstance(until, str) else until
    events, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{"):
            event = json.loads(line)
            events.append(event)
            if event["event"] in until:
                return events
    raise RuntimeError(f"no {until} event within {timeout} s (got {events}); stderr: {proc.stderr.read()[-800:]}")


def devices_free(devices):
    """Free bytes summed over `devices` (cudaMemGetInfo, from this process's own context)."""
    import torch

    return sum(torch.cuda.mem_get_info(d)[0] for d in devices)


def rank_environment(env, rank):
    """Rank `rank`'s environment. MEMCOORD_LOCAL_RANK as well as LOCAL_RANK: init() copies the launcher's
    LOCAL_RANK only when MEMCOORD_RANK is unset, so without it every worker took local rank 0 (GPU 0) on a
    host of several GPUs."""
    return dict(env, MEMCOORD_RANK=str(rank), MEMCOORD_LOCAL_RANK=str(rank), LOCAL_RANK=str(rank))




def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=positive_int, default=2)
    parser.add_argument("--memcoord-bin", default="")
    parser.add_argument("--steps", type=positive_int, default=40)
    parser.add_argument("--eval-at", type=int, default=8)
    parser.add_argument("--eval-batch", type=positive_int, default=24)
    parser.add_argument("--step-sleep", type=float, default=0.05)
    parser.add_argument("--small", action="store_true", help="tiny GPT-2 (a smoke run)")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    return parser


def main():
    parser = make_parser()
    args = parser.parse_args()
    # The ranks report ready for the trim after step eval_at + 1, and the trim lands at a later step's end: an
    # --eval-at past that waited 600 s for a "ready" that never came, or ended before any trim.
    if not 0 <= args.eval_at < args.steps - 2:
        parser.error(f"--eval-at must be >= 0 and < --steps - 2 (the ranks are ready for the trim after step "
                     f"eval-at + 1 and it lands at a later step): got --eval-at {args.eval_at} with --steps {args.steps}")
    if args.rank_main:
        return rank_main(args)
    try:
        import torch
    except ImportError:
        print("cluster_trim: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("cluster_trim: no GPU")
        return 77
    cli = find_cli(args.memcoord_bin)
    devices = sorted({r % torch.cuda.device_count() for r in range(args.ranks)})
    devices_free(devices)  # this process's context exists before any rank starts, so it cancels out below
    coordinator = subprocess.Popen([cli, "coordinator", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
    address = coordinator.stdout.readline().split("listening on", 1)[1].split()[0]
    env = dict(os.environ, MEMCOORD_COORDINATOR=address, NCCL_NVLS_ENABLE="0", PYTHONUNBUFFERED="1",
               MEMCOORD_WORLD_SIZE=str(args.ranks))
    env.setdefault("MEMCOORD_BACKEND", "cuda-vmm")
    forwarded = [a for a in sys.argv[1:] if a not in ("--memcoord-bin", args.memcoord_bin)]
    ranks = []
    try:
        for r in range(args.ranks):
            ranks.append(subprocess.Popen([sys.executable, __file__, "--rank-main"] + forwarded,
                                          env=rank_environment(env, r),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        evals = [read_events(p, "ready_for_trim", 600) for p in ranks]
        # Past the evaluation the pools hold their high-water memory, so the device's free memory is steady.
        free_before_trim = devices_free(devices)
        trim = subprocess.run([cli, "trim", "--coordinator", address], capture_output=True, text=True, timeout=120)
        print(f"$ memcoord trim --coordinator {address}\n{trim.stdout}{trim.stderr}")
        trims = []
        for p in ranks:
            found = [e for e in read_events(p, ("trim", "done"), 600) if e["event"] == "trim"]
            trims.append(found[0] if found else None)
        free_after_trim = devices_free(devices)  # every rank that trimmed waits on its stdin meanwhile
        for p in ranks:
            if p.poll() is None:
                p.stdin.write("\n")
                p.stdin.flush()
        for t, p in zip(trims, ranks):
            if t is not None:
                read_events(p, "done", 600)
            p.wait(timeout=60)
    finally:
        for p in ranks + [coordinator]:
            if p.poll() is None:
                p.kill()
            p.wait()
    print("\n== cluster trim under PyTorch ==")
    print(f"{'rank':>4} {'eval reserved GB':>17} {'trim step':>9} {'reserved GB before -> after':>28} "
          f"{'device free GB before -> after':>31}")
    for r, t in enumerate(trims):
        eval_reserved = next(e["reserved"] for e in evals[r] if e["event"] == "eval") / GB
        if t is None:
            print(f"{r:>4} {eval_reserved:>17.2f} {'none':>9}")
            continue
        print(f"{r:>4} {eval_reserved:>17.2f} {t['step']:>9} {t['reserved_before'] / GB:>12.2f} -> "
              f"{t['reserved_after'] / GB:<12.2f} {t['free_before'] / GB:>14.2f} -> {t['free_after'] / GB:<14.2f}")
    ok = trim.returncode == 0 and all(t is not None for t in trims)
    if ok:
        steps = {t["step"] for t in trims}
        released = sum(t["reserved_before"] - t["reserved_after"] for t in trims)
        freed = free_after_trim - free_before_trim
        ok = len(steps) == 1 and released > 0 and freed >= 0.5 * released
        print(f"every rank trimmed at step {sorted(steps)}; released {released / GB:.2f} GB; device free rose "
              f"{freed / GB:.2f} GB (measured here before the trim and with every rank trimmed)")
    print(f"cluster_trim: {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
