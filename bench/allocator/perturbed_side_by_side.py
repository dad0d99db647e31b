#!/usr/bin/env python3
"""memcoord's pool against PyTorch's expandable_segments on perturbed copies of allocation traces, so that a
default is judged on workloads near the shared ones and not on those few traces alone.

    perturbed_side_by_side.py TRACE... [--copies N] [--spread F] [--keep-powers-of-two] [--alloc-conf CONF]...
                              [--gpu-lag N] [--memcoord BIN] [--json F]

Each TRACE gets N copies (default 12) in which every distinct request size is scaled by its own factor drawn
uniformly from [1 - F, 1 + F] (default 0.1; copy k seeded with k, so runs repeat): a loop's repeated sizes stay
repeated, as in a model a few percent wider or a batch a little larger. With --keep-powers-of-two, sizes that
are a power of two keep their size in every copy: real models allocate many (a 1024x256 fp32 weight is exactly
1 MiB, the pool's small-block limit), and scaling them moves blocks across that limit, which no real model of
those shapes does. Every copy is replayed by `memcoord replay --json --repeat 1` (the virtual backend: the
default pool users get, or each --alloc-conf as MEMCOORD_ALLOC_CONF would set it; --alloc-conf '' is the
defaults; --gpu-lag N as `memcoord replay --gpu-lag`: blocks freed in the last N events still in use, so that
packing may wait; default 0: idle streams, no waits) and by expandable_model.py (what expandable_segments:True
reserves for the same events). Prints, per trace and conf, over the copies: the median and mean of memcoord's
peak reserved minus the model's (MiB; negative: memcoord reserves less), the range, the copies where memcoord
reserves no more, the mean driver allocations of each (memcoord's maps; the model's pages, which it never
unmaps), and memcoord's mean pack waits (host waits for the GPU before an unmap). --json keeps every copy's
figures.
"""

import argparse
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expandable_model  # noqa: E402

MIB = 1 << 20


def is_power_of_two(n):
    return n > 0 and n & (n - 1) == 0


def perturbed_lines(lines, seed, spread, keep_powers_of_two=False):
    """The trace's lines with every distinct size of an 'a' or 'f' event scaled by its own factor (at least 1
    byte), except powers of two when `keep_powers_of_two`; other lines unchanged."""
    rng = random.Random(seed)
    factor = {}
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) < 3 or fields[0] not in ("a", "f"):
            out.append(line)
            continue
        size = int(fields[2])
        if size not in factor:
            draw = rng.uniform(1 - spread, 1 + spread)  # drawn even when kept: the other sizes' factors stay
            factor[size] = 1.0 if keep_powers_of_two and is_power_of_two(size) else draw
        fields[2] = str(max(1, int(size * factor[size])))
        out.append(" ".join(fields) + "\n")
    return out


def write_copies(trace, copies, spread, folder, keep_powers_of_two=False):
    """Writes the copies of `trace` into `folder`; returns their paths."""
    with (gzip.open if trace.endswith(".gz") else open)(trace, "rt") as f:
        lines = f.readlines()
    name = os.path.basename(trace).split(".")[0]
    paths = []
    for k in range(copies):
        path = os.path.join(folder, f"{name}-{k:03d}.trace.gz")
        with gzip.open(path, "wt") as f:
            f.writelines(perturbed_lines(lines, k, spread, keep_powers_of_two))
        paths.append(path)
    return paths


def memcoord_figures(memcoord, paths, conf, gpu_lag=0):
    """{path: (peak reserved bytes, maps, pack waits)} from one `memcoord replay` over every path."""
    command = [memcoord, "replay", "--json", "--repeat", "1", "--gpu-lag", str(gpu_lag), "--alloc-conf", conf] + paths
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:7])} ...: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    runs = json.loads(done.stdout)
    runs = runs if isinstance(runs, list) else [runs]
    return {r["trace"]: (r["peak_reserved_bytes"], r["maps"], r["pack_waits"]) for r in runs}


def model_figures(path):
    """(peak reserved bytes, pages mapped) of expandable_segments' model on `path`."""
    model = expandable_model.replay(path)
    page = expandable_model.PAGE
    return model.peak, model.peak_split[True] // page[True] + model.peak_split[False] // page[False]


def summarize(copies):
    """copies: [{"memcoord_peak", "memcoord_maps", "memcoord_waits", "model_peak", "model_pages"}] -> one summary
    row."""
    diffs = [(c["memcoord_peak"] - c["model_peak"]) / MIB for c in copies]
    return {"copies": len(copies), "median_diff_mib": statistics.median(diffs), "mean_diff_mib": statistics.mean(diffs),
            "min_diff_mib": min(diffs), "max_diff_mib": max(diffs), "no_more": sum(1 for d in diffs if d <= 0),
            "memcoord_maps": statistics.mean(c["memcoord_maps"] for c in copies),
            "model_pages": statistics.mean(c["model_pages"] for c in copies),
            "memcoord_waits": statistics.mean(c["memcoord_waits"] for c in copies)}


def default_memcoord():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("MEMCOORD_CLI") or os.path.join(here, "..", "..", "build", "release", "bin", "memcoord")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--copies", type=int, default=12)
    parser.add_argument("--spread", type=float, default=0.1)
    parser.add_argument("--keep-powers-of-two", action="store_true",
                        help="sizes that are a power of two are not scaled (see above)")
    parser.add_argument("--alloc-conf", action="append", dest="confs",
                        help="a MEMCOORD_ALLOC_CONF to replay with (repeatable; default: the defaults only)")
    parser.add_argument("--gpu-lag", type=int, default=0,
                        help="replay as if the device ran N events behind the host (memcoord replay --gpu-lag)")
    parser.add_argument("--memcoord", default=default_memcoord(), help="the memcoord CLI (default: $MEMCOORD_CLI, "
                        "else build/release/bin/memcoord)")
    parser.add_argument("--json", help="write every copy's figures here")
    args = parser.parse_args(argv)
    if not 1 <= args.copies <= 1000:
        parser.error(f"--copies must be between 1 and 1000, got {args.copies}")
    if not 0 <= args.spread < 1:
        parser.error(f"--spread must be in [0, 1), got {args.spread}")
    if args.gpu_lag < 0:
        parser.error(f"--gpu-lag must be 0 or more events, got {args.gpu_lag}")
    if not os.access(args.memcoord, os.X_OK):
        parser.error(f"--memcoord: {args.memcoord} is not an executable memcoord CLI (build it, or pass its path)")
    confs = args.confs if args.confs else [""]
    report = []
    with tempfile.TemporaryDirectory() as folder:
        for trace in args.traces:
            try:
                paths = write_copies(trace, args.copies, args.spread, folder, args.keep_powers_of_two)
                models = {p: model_figures(p) for p in paths}
                for conf in confs:
                    ours = memcoord_figures(args.memcoord, paths, conf, args.gpu_lag)
                    copies = [{"copy": k, "memcoord_peak": ours[p][0], "memcoord_maps": ours[p][1],
                               "memcoord_waits": ours[p][2], "model_peak": models[p][0], "model_pages": models[p][1]}
                              for k, p in enumerate(paths)]
                    report.append({"trace": trace, "alloc_conf": conf, **summarize(copies), "per_copy": copies})
            except (OSError, ValueError, RuntimeError) as error:
                print(f"perturbed_side_by_side: {trace}: {error}", file=sys.stderr)
                return 2
    kept = " (powers of two kept)" if args.keep_powers_of_two else ""
    print(f"memcoord - expandable_segments' model, peak reserved (MiB) over {args.copies} copies per trace, "
          f"sizes scaled by 1 +- {args.spread}{kept}, GPU lag {args.gpu_lag} events; driver allocations: memcoord's "
          f"maps, the model's pages; memcoord's pack waits")
    print(f"{'trace':<28} {'alloc conf':<24} {'median':>8} {'mean':>8} {'min':>7} {'max':>7} {'no more':>8} "
          f"{'maps':>7} {'pages':>7} {'waits':>6}")
    for r in report:
        print(f"{os.path.basename(r['trace'])[:28]:<28} {r['alloc_conf'] or '(defaults)':<24} "
              f"{r['median_diff_mib']:>+8.1f} {r['mean_diff_mib']:>+8.1f} {r['min_diff_mib']:>+7.0f} "
              f"{r['max_diff_mib']:>+7.0f} {r['no_more']:>4}/{r['copies']:<3} {r['memcoord_maps']:>7.0f} "
              f"{r['model_pages']:>7.0f} {r['memcoord_waits']:>6.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copies": args.copies, "spread": args.spread, "keep_powers_of_two": args.keep_powers_of_two,
                       "gpu_lag": args.gpu_lag, "results": report}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
