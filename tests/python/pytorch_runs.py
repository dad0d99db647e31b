"""The GPU runs kept in bench/pytorch_runs/, read the way each folder's test reads them: a folder's files by
name, as text or JSON (gzipped or plain), and bench_allocators.py's processes by workload and allocator."""

import gzip
import json
import os
import re
import statistics

RUNS_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "pytorch_runs"))


class RunFolder:
    """One folder of bench/pytorch_runs (e.g. "2026-12-06f")."""

    def __init__(self, name):
        self.path = os.path.join(RUNS_ROOT, name)

    def file(self, name):
        return os.path.join(self.path, name)

    def names(self):
        return sorted(os.listdir(self.path))

    def text(self, name):
        with open(self.file(name)) as f:
            return f.read()

    def json(self, name):
        opener = gzip.open if name.endswith(".gz") else open
        with opener(self.file(name), "rt") as f:
            return json.load(f)

    def processes(self, *names):
        """(workload, allocator) -> the process records of bench_allocators.py's JSON files `names`, in order."""
        out = {}
        for name in names:
            for row in self.json(name)["runs"]:
                out.setdefault((row["workload"], row["allocator"]), []).extend(row["runs"])
        return out

    def capi_bench(self, name):
        """capi_bench's JSON `name`: (lib, threads) -> result, lib "memcoord" or "control" (the C library's
        malloc/free)."""
        return {("control" if r["lib"].startswith("control") else "memcoord", r["threads"]): r
                for r in self.json(name)["results"]}

    def check_gpu_parts(self, test, commit, abort_s, plain_s, trim_step, trim_gb):
        """The `checks`, `abort` and `trim` logs of `commit` as the folders' READMEs quote them: no check failed
        and multi_device skipped (one GPU); rank 0 ended `abort_s` seconds after rank 1's SIGKILL with exit 75,
        naming it, against plain PyTorch's `plain_s` and exit 1; every rank trimmed at `trim_step`, and the
        device's free memory rose by the `trim_gb` released."""
        checks = self.text(f"{commit}-checks.log")
        test.assertIn("failed: none", checks)
        test.assertRegex(checks, r"(?m)^multi_device +skip ")
        abort = self.text(f"{commit}-abort.log")
        test.assertRegex(abort, rf"memcoord +{re.escape(abort_s)} s +75 .*rank 1 .*is dead")
        test.assertRegex(abort, rf"plain +{re.escape(plain_s)} s +1 .*Connection closed by peer")
        test.assertIn(f"every rank trimmed at step [{trim_step}]; released {trim_gb} GB; device free rose {trim_gb} GB",
                      self.text(f"{commit}-trim.log"))


def target_detail(document, workload, name):
    """What a kept bench_allocators.py --json `document` printed beside its target `name` for `workload`."""
    return next(d for n, _, d in document["targets"][workload] if n == name)


def first_step_memory_ms(pooled, process):
    """A process's driver memory calls in its first step, in ms (`pooled`: the first_steps_pooled module, whose
    driver_timer reads them)."""
    return pooled.driver_timer.memory_ms(process["first_step_driver_calls"])


def span(values, digits=1):
    """(min, max) of `values`, rounded."""
    return (round(min(values), digits), round(max(values), digits))


def bench_files(selection):
    """The bench_allocators.py JSON files (.json.gz) of several folders, in the order of their paths (as
    first_steps_pooled.py takes them: its random draws are seeded per file). `selection`: (folder, keys) pairs,
    a file taken when its name holds one of its folder's keys."""
    paths = []
    for folder, keys in selection:
        run = RunFolder(folder)
        paths += [run.file(n) for n in run.names() if n.endswith(".json.gz") and any(k in n for k in keys)]
    return sorted(paths)


def thread_rounds(pooled, paths, workload, thread):
    """Round by round (first_steps_pooled.round_differences), memcoord's first-step CPU time of `thread` (a name
    in first_step_threads) minus expandable segments': (rounds, median ms rounded to 0.1, rounds where memcoord's
    was shorter, the exact sign test's p over the rounds that differ, rounded to 3 places). `pooled` is the
    first_steps_pooled module."""
    diffs = pooled.round_differences(paths, workload, lambda p: p["first_step_threads"][thread])
    shorter, moved = sum(d < 0 for d in diffs), sum(d != 0 for d in diffs)
    return len(diffs), round(statistics.median(diffs), 1), shorter, round(pooled.sign_test_p(shorter, moved), 3)


def pool_figures(pooled, paths, workload, digits=None):
    """first_steps_pooled's summary of `workload` over the files `paths`: (runs, shift ms, pairs where memcoord's
    first step was the shorter, pairs, permutation p rounded to 3 places, [interval ms]), the ms rounded to
    `digits` places (None: whole)."""
    s = pooled.pooled([(p, pooled.load(p)) for p in paths])[0][workload]
    return (s["runs"], round(s["shift_ms"], digits), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 3),
            [round(x, digits) for x in s["interval_ms"]])


def step_rounds(pooled, paths, workload):
    """Round by round (first_steps_pooled.round_differences), memcoord's first step minus expandable segments':
    (rounds, rounds where memcoord's was shorter, median ms rounded to 0.1, the exact sign test's p over all the
    rounds, rounded to 3 places)."""
    diffs = pooled.round_differences(paths, workload)
    shorter = sum(d < 0 for d in diffs)
    return len(diffs), shorter, round(statistics.median(diffs), 1), round(pooled.sign_test_p(shorter, len(diffs)), 3)
