#!/usr/bin/env python3
"""The first-step comparison of memcoord and expandable segments over several runs of bench_allocators.py
(each run's --json), where one run's few processes cannot tell the two apart.

    first_steps_pooled.py BENCH_JSON... [--memcoord NAME] [--keep-first] [--permutations N] [--json OUT]
                                                                                      (plain or gzipped)

A fresh process's first training step spends most of its time outside the allocator (cuDNN's plans, loading
kernels), and that part varies by 100 ms and more from process to process and from hour to hour on the same
machine. One run's medians then flip with the machine's state. This pools the runs without mixing their
states: every (memcoord, expandable) pair of processes is taken within one run (a file), and over those pairs
it prints, per workload:
  - how many pairs memcoord's first step was the shorter in (half of them for equal allocators);
  - the shift: the median of the pairs' differences, memcoord minus expandable (the Hodges-Lehmann estimate;
    negative: memcoord's first step is shorter), with a 95% interval from 2,000 bootstrap resamples of each
    run's processes (seeded, and the files taken in the order of their paths: the same files print the same
    figures, in any order on the command line). The interval is approximate and too narrow for runs of few
    processes: with no difference between the allocators, simulated runs laid out as GPT-2 bf16's here (three
    runs of 3+3 processes) gave an interval without 0 in 11-13% of cases, not 5%, and one run of 2+2 in 34-38%;
  - the permutation test's two-sided p-value for that shift: the (memcoord, expandable) labels are exchanged
    within each run, every way (exact) where there are at most 20,000 ways, else 10,000 seeded random ones
    (--permutations N). It assumes only that, with no difference between the allocators, a run's processes are
    exchangeable, and it holds its 5% at any number of processes (one run of 2+2 can never reach it: p >= 1/3).
    A random-relabelling p is printed with its Monte Carlo standard error, sqrt(p(1-p)/N): at 10,000 about
    0.002 near p = 0.05, so a p within 0.004 of it may fall on the other side with another seed or more
    relabellings (37 runs of ResNet-50, 2026-12-07f: 0.0498 at 10,000, 0.0507 at 100,000);
  - the verdict, from the test: "memcoord shorter" or "memcoord longer" when p < 0.05 (the shift's sign), else
    "not resolved";
  - each allocator's own memory calls in the first step (the driver timer's milliseconds, median over the
    processes; absent without the timer): the part of the difference that is the allocators' driver work.
The process that ran first in a run is left out (and named), unless the run began with a warm-up process
(bench_allocators.py's default since 2026-12-06f) or --keep-first is given: a run's first process also pays
for the machine's cold start, and it was expandable segments' in almost every run before.
--memcoord NAME compares a variant's processes instead of plain memcoord's (NAME as bench_allocators.py writes
it: memcoord[grow_to_unit_end:on]); the summary still calls them "memcoord". Rows of other allocators (native,
the variants not named) and failed processes are skipped; a file's workload without
processes of both allocators is left out, and said so. Exits 2 naming the file when one cannot be read as
bench_allocators.py's JSON.
"""

import argparse
import gzip
import itertools
import json
import math
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver_timer  # noqa: E402

RESAMPLES = 2000
PERMUTATIONS = 10000  # random relabellings where the exact test has more than EXACT_LIMIT
EXACT_LIMIT = 20000
LEVEL = 0.05
PAIR = ("memcoord", "expandable")


class Runs(dict):
    """load()'s {workload: {allocator: [(first ms, memory ms)]}}, with `left_out`: lines naming the processes
    that load() left out."""

    left_out = ()


def ran_first(r):
    """Whether a process record is the one that ran first in its workload (bench_allocators.py's round 0,
    place 0; records without them: no)."""
    return r.get("round") == 0 and r.get("place") == 0


def processes(row, skip_first=False):
    """[(first step ms, memory-call ms or None)] of a row's processes (one entry for a one-process row); with
    `skip_first`, without the process that ran first (ran_first)."""
    runs = row.get("runs") or [row]
    out = []
    for r in runs:
        if r.get("error") or r.get("first_step_ms") is None or (skip_first and ran_first(r)):
            continue
        calls = r.get("first_step_driver_calls")
        out.append((float(r["first_step_ms"]), driver_timer.memory_ms(calls) if calls else None))
    return out


def load(path, mine="memcoord", keep_first=False):
    """Runs {workload: {allocator: [(first ms, memory ms)]}} of one bench JSON, `mine`'s rows under "memcoord";
    ValueError naming what is wrong. Unless `keep_first` or the run began with a warm-up process (its JSON's
    "warmup"), the process that ran first in the run (its first workload's, ran_first) is left out and named
    in `left_out`: its first step also paid for the machine's cold start (2026-12-06f: 550-660 ms spent
    waiting beyond its CPU time, against under 2 ms in every other process). The rule goes by place alone, as
    older runs kept no CPU times: a first process that paid nothing is left out too."""
    try:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            data = json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not readable as JSON ({error})") from None
    rows = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: no 'runs' list (expected bench_allocators.py --json output)")
    out, left_out = Runs(), []
    cold_workload = None if keep_first or data.get("warmup") or not rows else rows[0].get("workload")
    for row in rows:
        if not isinstance(row, dict) or "workload" not in row or "allocator" not in row:
            raise ValueError(f"{path}: a row without 'workload' and 'allocator'")
        if row["allocator"] in (mine, "expandable"):
            key = "expandable" if row["allocator"] == "expandable" else "memcoord"
            skip = row["workload"] == cold_workload
            try:
                out.setdefault(row["workload"], {})[key] = processes(row, skip_first=skip)
                cold = [r for r in (row.get("runs") or []) if skip and ran_first(r) and not r.get("error")]
            except (TypeError, ValueError, AttributeError) as error:
                raise ValueError(f"{path}: {row['workload']} {row['allocator']}: a process's figures are not "
                                 f"numbers ({error})") from None
            left_out += [f"{path}: {row['workload']} {row['allocator']}'s process that ran first in the run left "
                         f"out (first step {r.get('first_step_ms', 0):.0f} ms; a run's first process may also pay "
                         "for the machine's cold start; --keep-first keeps it)" for r in cold]
    out.left_out = left_out
    return out


def pair_differences(strata):
    """Every within-run (memcoord, expandable) difference of first steps, over the strata [(mine, theirs)]."""
    return [m - e for mine, theirs in strata for m in mine for e in theirs]


def bootstrap_interval(strata, seed=0):
    """95% interval of the shift, resampling each run's processes (with replacement) within the run."""
    rng = random.Random(seed)
    shifts = []
    for _ in range(RESAMPLES):
        resampled = [([rng.choice(mine) for _ in mine], [rng.choice(theirs) for _ in theirs])
                     for mine, theirs in strata]
        shifts.append(statistics.median(pair_differences(resampled)))
    shifts.sort()
    return shifts[int(0.025 * RESAMPLES)], shifts[int(0.975 * RESAMPLES) - 1]


def relabellings(strata):
    """How many ways the (memcoord, expandable) labels can be dealt within each run, keeping its counts."""
    return math.prod(math.comb(len(mine) + len(theirs), len(mine)) for mine, theirs in strata)


def _dealt(pooled_values, chosen):
    """(the values at the indices `chosen`, the others): one way of dealing a run's labels."""
    chosen = set(chosen)
    return ([v for i, v in enumerate(pooled_values) if i in chosen],
            [v for i, v in enumerate(pooled_values) if i not in chosen])


def permutation_test(strata, seed=0, permutations=None):
    """(two-sided p, how: "exact" or "N random") of the shift (the median of the within-run pairs'
    differences), under the hypothesis that the allocator makes no difference: each run's first steps keep
    their values and the labels are dealt again within the run. p = 2 x the smaller tail (at most 1); with
    random relabellings (`permutations` of them, PERMUTATIONS by default), each tail counts the observed one
    ((k + 1) / (N + 1)), so p is never 0."""
    permutations = permutations or PERMUTATIONS
    observed = statistics.median(pair_differences(strata))
    eps = 1e-9 * max(1.0, abs(observed))
    if relabellings(strata) <= EXACT_LIMIT:
        ways = [[_dealt(mine + theirs, chosen)
                 for chosen in itertools.combinations(range(len(mine) + len(theirs)), len(mine))]
                for mine, theirs in strata]
        shifts = [statistics.median(pair_differences(dealt)) for dealt in itertools.product(*ways)]
        low = sum(1 for v in shifts if v <= observed + eps)
        high = sum(1 for v in shifts if v >= observed - eps)
        return min(1.0, 2 * min(low, high) / len(shifts)), "exact"
    rng = random.Random(seed)
    low = high = 1  # the observed labelling
    for _ in range(permutations):
        dealt = []
        for mine, theirs in strata:
            values = mine + theirs
            rng.shuffle(values)
            dealt.append((values[:len(mine)], values[len(mine):]))
        v = statistics.median(pair_differences(dealt))
        low += v <= observed + eps
        high += v >= observed - eps
    return min(1.0, 2 * min(low, high) / (permutations + 1)), f"{permutations} random"


def permutation_error(p, how):
    """The Monte Carlo standard error of a random-relabelling p (0 for an exact one): how far another seed's p
    may fall, so that a p within about two of these of LEVEL is read as at the edge, whichever side it fell."""
    if how == "exact":
        return 0.0
    draws = int(how.split()[0])
    return math.sqrt(p * (1 - p) / draws)


def verdict(p, shift):
    """From the permutation test (not the bootstrap interval, which is too narrow for runs of few processes)."""
    if p < LEVEL and shift < 0:
        return "memcoord shorter"
    if p < LEVEL and shift > 0:
        return "memcoord longer"
    return f"not resolved (permutation p {p:.2g} >= {LEVEL:g})"


def round_differences(paths, workload, figure=lambda p: p["first_step_ms"]):
    """Round by round, for library use (main prints none of it): memcoord's `figure` of a process (its first
    step by default; e.g. a thread's CPU time in first_step_threads) minus expandable segments', for each round
    of each run that has one process of each (bench_allocators.py runs one process per allocator a round, in a
    rotated order, so this is the pairing closest in time). Rounds where a process lacks the figure are left
    out."""
    diffs = []
    for path in paths:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            rows = json.load(f)["runs"]
        by_round = {}
        for row in rows:
            if row["workload"] == workload and row["allocator"] in PAIR:
                for p in row["runs"]:
                    by_round.setdefault(p["round"], {})[row["allocator"]] = p
        for r in by_round.values():
            try:
                diffs.append(figure(r["memcoord"]) - figure(r["expandable"]))
            except KeyError:  # one allocator's process missing in this round, or the figure in a process
                continue
    return diffs


def sign_test_p(shorter, n):
    """Two-sided exact sign test: memcoord shorter in `shorter` of `n` pairs (ties left out), against even
    odds."""
    tail = sum(math.comb(n, i) for i in range(0, min(shorter, n - shorter) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def pooled(files, permutations=None):
    """{workload: summary} over the files' runs, and the notes on what was left out. `permutations`: the random
    relabellings where the exact test has too many ways (PERMUTATIONS by default)."""
    by_workload, notes = {}, []
    for path, runs in sorted(files, key=lambda f: f[0]):
        notes += list(getattr(runs, "left_out", ()))
        for workload, rows in runs.items():
            if not all(rows.get(a) for a in PAIR):
                notes.append(f"{path}: {workload} left out (needs both memcoord and expandable processes)")
                continue
            by_workload.setdefault(workload, []).append(rows)
    summary = {}
    for workload, runs in by_workload.items():
        strata = [([f for f, _ in r["memcoord"]], [f for f, _ in r["expandable"]]) for r in runs]
        diffs = pair_differences(strata)
        low, high = bootstrap_interval(strata)
        p, how = permutation_test(strata, permutations=permutations)
        memory = {a: [m for r in runs for _, m in r[a] if m is not None] for a in PAIR}
        summary[workload] = {
            "runs": len(runs),
            "processes": {a: sum(len(r[a]) for r in runs) for a in PAIR},
            "median_first_ms": {a: statistics.median(f for r in runs for f, _ in r[a]) for a in PAIR},
            "pairs": len(diffs),
            "memcoord_shorter": sum(1 for d in diffs if d < 0),
            "shift_ms": statistics.median(diffs),
            "interval_ms": [low, high],
            "permutation_p": p,
            "permutation": how,
            "permutation_se": permutation_error(p, how),
            "verdict": verdict(p, statistics.median(diffs)),
            "memory_call_ms": {a: statistics.median(v) if v else None for a, v in memory.items()},
        }
    return summary, notes


def p_error(s):
    """' ± SE' after a random-relabelling p (nothing after an exact one)."""
    return f" ± {s['permutation_se']:.2g}" if s["permutation_se"] else ""


def print_summary(summary, notes, mine="memcoord"):
    print(f"== first steps, {mine} against expandable segments, pairs of processes within each run ==")
    for workload, s in summary.items():
        mc, ex = s["median_first_ms"]["memcoord"], s["median_first_ms"]["expandable"]
        low, high = s["interval_ms"]
        runs = f"{s['runs']} run" + ("s" if s["runs"] != 1 else "")
        line = (f"{workload:<18} {runs}, {s['processes']['memcoord']}+{s['processes']['expandable']} "
                f"processes: medians {mc:.0f} vs {ex:.0f} ms; memcoord shorter in {s['memcoord_shorter']} of "
                f"{s['pairs']} pairs; shift {s['shift_ms']:+.0f} ms [{low:+.0f}, {high:+.0f}] "
                f"(bootstrap, approximate), permutation p {s['permutation_p']:.3g}{p_error(s)} ({s['permutation']}): "
                f"{s['verdict']}")
        calls = s["memory_call_ms"]
        if calls["memcoord"] is not None and calls["expandable"] is not None:
            line += f"; memory calls {calls['memcoord']:.1f} vs {calls['expandable']:.1f} ms"
        print(line)
    for note in notes:
        print(note)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="bench_allocators.py --json outputs, one per run")
    parser.add_argument("--memcoord", default="memcoord", metavar="NAME",
                        help="the configuration compared with expandable segments: memcoord (the default) or a "
                             "variant as bench_allocators.py names it, memcoord[CONF]")
    parser.add_argument("--keep-first", action="store_true",
                        help="keep the process that ran first in each run (left out by default where the run had "
                             "no warm-up process: it also pays for the machine's cold start)")
    parser.add_argument("--permutations", type=int, default=PERMUTATIONS, metavar="N",
                        help=f"random relabellings where the exact test has more than {EXACT_LIMIT} ways "
                             f"(default {PERMUTATIONS}); more narrow the p's Monte Carlo error (printed as ± SE), "
                             "which matters where p is near 0.05")
    parser.add_argument("--json", help="also write the summary here")
    args = parser.parse_args(argv)
    if args.permutations < 100:
        print(f"first_steps_pooled: --permutations {args.permutations}: give 100 or more (a p from fewer random "
              "relabellings is too coarse to read)", file=sys.stderr)
        return 2
    if args.memcoord != "memcoord" and not (args.memcoord.startswith("memcoord[") and args.memcoord.endswith("]")):
        print(f"first_steps_pooled: --memcoord {args.memcoord!r}: give memcoord or memcoord[CONF], as "
              "bench_allocators.py names its configurations", file=sys.stderr)
        return 2
    try:
        files = [(path, load(path, args.memcoord, args.keep_first)) for path in args.files]
    except ValueError as error:
        print(f"first_steps_pooled: {error}", file=sys.stderr)
        return 2
    summary, notes = pooled(files, args.permutations)
    if not summary:
        print(f"first_steps_pooled: no workload with both {args.memcoord} and expandable processes in these files",
              file=sys.stderr)
        return 2
    print_summary(summary, notes, args.memcoord)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workloads": summary, "left_out": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
