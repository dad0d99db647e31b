#!/usr/bin/env python3
"""Whether two allocators' first steps ran the same GPU kernels, from profile_first_step.py --kernels files.

    kernels_diff.py KERNELS_JSON... [--json OUT]

An allocator can change which kernels a library launches: cuDNN and cuBLAS ask the allocator for a workspace,
and a refused or smaller one makes them pick another engine, whose kernels are loaded on first use at a cost to
the first step's CPU time. Each file is one process's first step (its allocator named inside). For each
allocator this prints its processes' first steps, kernel names, launches and GPU milliseconds (medians over its
processes), then, where exactly two allocators are given:
  - the kernels every process of one allocator launched and no process of the other (a library's other choice);
  - the kernels whose launch count differs the same way in every pair of processes (the smaller count of one
    allocator above the larger of the other);
  - "same kernels" when there are neither.
Kernels present in some processes of both are not differences: a process's first step can differ from the next
one's under the same allocator (a lazily loaded module, an autotuned choice). Files that hold the step's CPU
operators thread by thread ("threads") also get each thread's self CPU time (medians per allocator) and, for two
allocators, the operators of each thread whose self CPU time is apart in every pair of processes, the largest
gaps first (at most 10 a thread): where one allocator's first step spends its extra CPU time. Exits 2 naming the
file when one cannot be read as profile_first_step.py's JSON.
"""

import argparse
import json
import statistics
import sys


class KernelsError(ValueError):
    """A file that is not profile_first_step.py --kernels output, with its path in the message."""


def load(path):
    """One process's {"allocator", "first_step_ms", "kernels": {name: {"count", "ms"}}}."""
    try:
        with open(path) as f:
            record = json.load(f)
        kernels = record["kernels"]
        checked = {"allocator": str(record["allocator"]), "first_step_ms": float(record["first_step_ms"]),
                   "kernels": {str(n): {"count": int(k["count"]), "ms": float(k["ms"])} for n, k in kernels.items()},
                   "threads": {str(role): {"self_ms": float(t["self_ms"]),
                                           "ops": {str(n): float(o["self_ms"]) for n, o in t["ops"].items()}}
                               for role, t in record.get("threads", {}).items()}}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise KernelsError(f"{path}: not profile_first_step.py --kernels JSON "
                           f"(an object with allocator, first_step_ms and kernels: {{name: {{count, ms}}}}): "
                           f"{type(error).__name__}: {error}") from None
    return checked


def by_allocator(records):
    """{allocator: [records]}, allocators in the order first seen."""
    grouped = {}
    for record in records:
        grouped.setdefault(record["allocator"], []).append(record)
    return grouped


def summary(records):
    """Per allocator: processes and the medians of first step, kernel names, launches and GPU ms."""
    rows = {}
    for allocator, group in by_allocator(records).items():
        rows[allocator] = {
            "processes": len(group),
            "first_step_ms": statistics.median(r["first_step_ms"] for r in group),
            "kernel_names": statistics.median(len(r["kernels"]) for r in group),
            "launches": statistics.median(sum(k["count"] for k in r["kernels"].values()) for r in group),
            "gpu_ms": statistics.median(sum(k["ms"] for k in r["kernels"].values()) for r in group),
        }
    return rows


def differences(records):
    """For two allocators a and b: the kernels only one launched (in all of its processes, none of the other's)
    and those whose counts are apart in every pair ({name: {a: [counts], b: [counts]}}). None for another
    number of allocators."""
    grouped = by_allocator(records)
    if len(grouped) != 2:
        return None
    (a, runs_a), (b, runs_b) = grouped.items()
    names_a = [set(r["kernels"]) for r in runs_a]
    names_b = [set(r["kernels"]) for r in runs_b]
    counts = {}
    for allocator, runs in ((a, runs_a), (b, runs_b)):
        for r in runs:
            for name, k in r["kernels"].items():
                counts.setdefault(name, {a: [], b: []})[allocator].append(k["count"])
    apart = {name: c for name, c in sorted(counts.items())
             if len(c[a]) == len(runs_a) and len(c[b]) == len(runs_b)
             and (max(c[a]) < min(c[b]) or max(c[b]) < min(c[a]))}
    return {
        "allocators": [a, b],
        "only_" + a: sorted(set.intersection(*names_a) - set.union(*names_b)),
        "only_" + b: sorted(set.intersection(*names_b) - set.union(*names_a)),
        "counts_apart": apart,
    }


def threads_summary(records):
    """{allocator: {role: median self CPU ms}} over the processes that recorded threads; roles every one of them
    has."""
    rows = {}
    for allocator, group in by_allocator(records).items():
        group = [r for r in group if r["threads"]]
        if group:
            roles = set.intersection(*(set(r["threads"]) for r in group))
            rows[allocator] = {role: statistics.median(r["threads"][role]["self_ms"] for r in group)
                               for role in sorted(roles)}
    return rows


def threads_apart(records, limit=10):
    """For two allocators a and b, every process with threads: {role: [{"op", a: [ms], b: [ms]}]}, the operators
    every process ran on that thread whose self CPU ms are apart in every pair, the largest gap between medians
    first. None when that does not hold."""
    grouped = by_allocator(records)
    if len(grouped) != 2 or not all(r["threads"] for r in records):
        return None
    (a, runs_a), (b, runs_b) = grouped.items()
    roles = set.intersection(*(set(r["threads"]) for r in records))
    out = {}
    for role in sorted(roles):
        ops = set.intersection(*(set(r["threads"][role]["ops"]) for r in records))
        rows = []
        for op in ops:
            ms_a = [r["threads"][role]["ops"][op] for r in runs_a]
            ms_b = [r["threads"][role]["ops"][op] for r in runs_b]
            if max(ms_a) < min(ms_b) or max(ms_b) < min(ms_a):
                rows.append({"op": op, a: ms_a, b: ms_b})
        rows.sort(key=lambda row: (-abs(statistics.median(row[b]) - statistics.median(row[a])), row["op"]))
        out[role] = rows[:limit]
    return out


def report(records):
    lines = []
    for allocator, row in summary(records).items():
        lines.append(f"{allocator}: {row['processes']} processes, first step {row['first_step_ms']:.0f} ms, "
                     f"{row['kernel_names']:g} kernel names, {row['launches']:g} launches, "
                     f"{row['gpu_ms']:.1f} GPU ms (medians)")
    diff = differences(records)
    if diff is None:
        lines.append("differences: need exactly two allocators")
        return lines
    a, b = diff["allocators"]
    for allocator in (a, b):
        for name in diff["only_" + allocator]:
            lines.append(f"only {allocator}: {name}")
    for name, c in diff["counts_apart"].items():
        lines.append(f"counts apart: {name}: {a} {c[a]}, {b} {c[b]}")
    if not (diff["only_" + a] or diff["only_" + b] or diff["counts_apart"]):
        lines.append("same kernels: none launched by one allocator only, no count apart in every pair")
    for allocator, roles in threads_summary(records).items():
        lines.append(f"{allocator}: self CPU by thread: " +
                     ", ".join(f"{role} {ms:.1f} ms" for role, ms in roles.items()) + " (medians)")
    apart = threads_apart(records)
    for role, rows in (apart or {}).items():
        for row in rows:
            gap = statistics.median(row[b]) - statistics.median(row[a])
            lines.append(f"self CPU apart on the {role} thread: {row['op']}: {a} {row[a]}, {b} {row[b]} ms "
                         f"({b} {gap:+.2f} ms)")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", metavar="KERNELS_JSON")
    parser.add_argument("--json", metavar="OUT", help="also write the summary and differences as JSON")
    args = parser.parse_args(argv)
    try:
        records = [load(path) for path in args.files]
    except KernelsError as error:
        print(f"kernels_diff: {error}", file=sys.stderr)
        return 2
    print("\n".join(report(records)))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"summary": summary(records), "differences": differences(records),
                       "threads": threads_summary(records), "threads_apart": threads_apart(records)}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
