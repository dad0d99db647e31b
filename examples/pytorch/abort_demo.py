#!/usr/bin/env python3
"""Aborts reach the training loop (issue 12, item 3). Two ranks on one GPU, gloo over CUDA tensors, all-reducing
every step. Rank 1 stalls before a collective, so rank 0 is blocked inside it; then rank 1 is SIGKILLed.

  memcoord   both ranks run memcoord.enable() attached to a coordinator started here: rank 0 must end within
             2 s of the kill, with exit code 75 (MEMCOORD_EXIT_ABORTED) and a message naming rank 1;
  plain      the same without memcoord: whatever PyTorch does, stopped at 60 s.

Prints a side-by-side table; exits 1 unless the memcoord run met its target.
Usage: abort_demo.py [--memcoord-bin DIR_OR_BINARY] [--modes memcoord,plain] [--plain-limit 60] [--backend gloo|nccl]
(--backend nccl: one GPU per rank, on a 2-GPU machine; memcoord then aborts the NCCL process group.)
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PYTHON_DIR = REPO / "python"


def rank_main(rank, mode, backend):
    """One rank: all-reduces a 64 MB CUDA tensor each step; rank 1 stalls at step 5 (rank 0 then waits in it).
    gloo: both ranks on GPU 0; nccl: rank r on GPU r (NCCL needs one GPU per rank)."""
    sys.path.append(str(PYTHON_DIR))  # the source tree's package when none is installed
    if mode == "memcoord":
        import memcoord

        memcoord.enable()
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank if backend == "nccl" else 0)
    dist.init_process_group(backend, rank=rank, world_size=2)
    x = torch.ones(16 << 20, device="cuda")
    for step in range(1_000_000):
        if rank == 1 and step == 5:
            print("stalling", flush=True)
            time.sleep(600)
        if rank == 0 and step == 5:
            print("entering collective", flush=True)
        dist.all_reduce(x)
        x.div_(2)
        torch.cuda.synchronize()
    return 0


def find_cli(hint):
    candidates = [Path(hint)] if hint else []
    candidates += [REPO / "build" / "release" / "bin", REPO / ".device-bundle" / "bin"]
    for c in candidates:
        path = c / "memcoord" if c.is_dir() else c
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    sys.exit(f"abort_demo: the memcoord binary was not found in {[str(c) for c in candidates]}; pass --memcoord-bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(proc, text, timeout):
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return True
    raise RuntimeError(f"did not see {text!r} within {timeout} s; output: {''.join(lines)[-500:]}")


def run(mode, cli, limit, backend):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NCCL_NVLS_ENABLE="0",
               PYTHONUNBUFFERED="1")
    coordinator = None
    if mode == "memcoord":
        coordinator = subprocess.Popen([cli, "coordinator", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
        line = coordinator.stdout.readline()
        env["MEMCOORD_COORDINATOR"] = line.split("listening on", 1)[1].split()[0]
        env.setdefault("MEMCOORD_BACKEND", "cuda-vmm")
    ranks = []
    try:
        for r in (0, 1):
            rank_env = dict(env, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r) if backend == "nccl" else "0")
            command = [sys.executable, __file__, "--rank", str(r), "--mode", mode, "--backend", backend]
            ranks.append(subprocess.Popen(command, env=rank_env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        wait_for_line(ranks[1], "stalling", 300)
        wait_for_line(ranks[0], "entering collective", 60)
        time.sleep(1.0)  # rank 0 is now blocked inside the all-reduce
        os.kill(ranks[1].pid, signal.SIGKILL)
        killed = time.monotonic()
        try:
            out, err = ranks[0].communicate(timeout=limit)
            elapsed = time.monotonic() - killed
            code = ranks[0].returncode
        except subprocess.TimeoutExpired:
            ranks[0].kill()
            out, err = ranks[0].communicate()
            elapsed, code = None, None
        lines = [l.strip() for l in (err + "\n" + out).splitlines() if l.strip()]
        message = next((l for l in lines if "aborted by the coordinator" in l), "")
        if not message:
            message = lines[-1] if lines else ""
        return {"mode": mode, "elapsed": elapsed, "code": code, "message": message[:160], "stderr": err,
                "stdout": out}
    finally:
        for p in ranks + ([coordinator] if coordinator else []):
            if p.poll() is None:
                p.kill()
            p.wait()


MODES = ("memcoord", "plain")


def modes_list(text):
    """--modes: comma-separated, from MODES, memcoord among them (its run is the target the exit code judges;
    a typo like 'memcord,plain' ran plain twice and reported the target met)."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown mode(s) {', '.join(map(repr, unknown))}; accepted: "
                                         f"{', '.join(MODES)}, comma-separated, memcoord among them")
    if "memcoord" not in modes:
        raise argparse.ArgumentTypeError(f"got {text!r}: memcoord must be one of the modes (its run is what the "
                                         "exit code judges); accepted: memcoord or memcoord,plain")
    return list(dict.fromkeys(modes))  # each mode once


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memcoord-bin", default="")
    parser.add_argument("--modes", default="memcoord,plain", type=modes_list,
                        help="comma-separated: memcoord (required) and plain")
    parser.add_argument("--plain-limit", type=float, default=60)
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"],
                        help="nccl needs 2 GPUs; the process group's abort then runs")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        return rank_main(args.rank, args.mode, args.backend)
    try:
        import torch
    except ImportError:
        print("abort_demo: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("abort_demo: no GPU")
        return 77
    if args.backend == "nccl" and torch.cuda.device_count() < 2:
        print(f"abort_demo: --backend nccl needs 2 GPUs, {torch.cuda.device_count()} visible")
        return 77
    modes = args.modes
    cli = find_cli(args.memcoord_bin)
    rows = []
    for mode in modes:
        limit = 10 if mode == "memcoord" else args.plain_limit
        row = run(mode, cli, limit, args.backend)
        rows.append(row)
        if mode == "memcoord" and (row["code"] != 75 or "rank 1" not in row["message"]):
            sys.stderr.write(f"abort_demo: rank 0's stderr ({len(row['stderr'])} chars), last 3000:\n"
                             f"{row['stderr'][-3000:]}\nits stdout ({len(row['stdout'])} chars), last 1000:\n"
                             f"{row['stdout'][-1000:]}\n")
    where = "CUDA tensors, one GPU" if args.backend == "gloo" else "one GPU per rank"
    print(f"\n== rank 1 SIGKILLed while rank 0 waits in a {args.backend} all-reduce ({where}) ==")
    print(f"{'run':<9} {'rank 0 ended after':>19} {'exit':>5}  message")
    for row in rows:
        ended = f"{row['elapsed']:.3f} s" if row["elapsed"] is not None else f"not in {args.plain_limit:.0f} s"
        print(f"{row['mode']:<9} {ended:>19} {str(row['code']):>5}  {row['message']}")
    ok = all(r["mode"] != "memcoord" or (r["code"] == 75 and r["elapsed"] is not None and r["elapsed"] < 2.0
                                         and "rank 1" in r["message"]) for r in rows)
    print(f"abort_demo: memcoord target (ends < 2 s, exit 75, names rank 1): {'met' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
