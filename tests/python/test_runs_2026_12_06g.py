"""The runs kept in bench/pytorch_runs/2026-12-06g against what README.md and that folder's README say of them:
the same GPU kernels under both allocators in ResNet-50's first step, that first step again (and pooled with the
runs before it), the graph checks with the shim's EndRoute, and capi_bench at 1, 2, 4 and 8 threads."""

import contextlib
import io
import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
import kernels_diff  # noqa: E402
from pytorch_runs import RunFolder, bench_files, span  # noqa: E402

RUNS = RunFolder("2026-12-06g")
FIRSTSTEP = "6b31db3-firststep.json.gz"
KERNELS = [f"6b31db3-firstprof-{a}-{n}.kernels.json" for a in ("expandable", "memcoord") for n in (1, 2)]


capi = RUNS.capi_bench


class Runs20261206gTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(KERNELS + [FIRSTSTEP, "README.md",
            "6b31db3-capi_bench.json", "6b31db3-capi_bench_pinned.json", "6b31db3-capi_threads-cuda-vmm.json",
            "6b31db3-capi_threads-host.json", "6b31db3-checks-graph.log", "6b31db3-firstprof-kernels-diff.json",
            "42aff5f-capi_bench_pinned.json", "42aff5f-capi_threads-cuda-vmm.json", "42aff5f-capi_threads-host.json",
            "42aff5f-capi_threads-default-2.json", "42aff5f-capi_threads-idle_misses_0.json",
            "42aff5f-capi_threads-fence_off.json", "42aff5f-checks.log", "42aff5f-abort.log", "42aff5f-trim.log",
            "42aff5f-firststep.json.gz", "42aff5f-firstprof-kernels-diff.json"] +
            [n.replace("6b31db3", "42aff5f") for n in KERNELS]))

    def test_both_allocators_launched_the_same_kernels(self):
        records = [kernels_diff.load(RUNS.file(n)) for n in KERNELS]
        self.assertEqual({len(r["kernels"]) for r in records}, {83})
        self.assertEqual({sum(k["count"] for k in r["kernels"].values()) for r in records}, {814})
        self.assertEqual(len({frozenset(r["kernels"]) for r in records}), 1)  # the same names in all four
        self.assertEqual([round(r["first_step_ms"]) for r in records], [757, 640, 650, 688])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(kernels_diff.main([RUNS.file(n) for n in KERNELS]), 0)
        self.assertIn("same kernels: none launched by one allocator only", out.getvalue())
        diff = RUNS.json("6b31db3-firstprof-kernels-diff.json")["differences"]
        self.assertEqual((diff["only_expandable"], diff["only_memcoord"], diff["counts_apart"]), ([], [], {}))

    def test_the_last_start_launched_the_same_kernels_too(self):
        records = [kernels_diff.load(RUNS.file(n.replace("6b31db3", "42aff5f"))) for n in KERNELS]
        self.assertEqual({(len(r["kernels"]), sum(k["count"] for k in r["kernels"].values())) for r in records},
                         {(83, 814)})
        self.assertEqual(len({frozenset(r["kernels"]) for r in records}), 1)
        earlier = kernels_diff.load(RUNS.file(KERNELS[0]))
        self.assertEqual(set(records[0]["kernels"]), set(earlier["kernels"]))  # the same names on both machines
        self.assertEqual([round(r["first_step_ms"]) for r in records], [2120, 992, 768, 828])
        diff = RUNS.json("42aff5f-firstprof-kernels-diff.json")["differences"]
        self.assertEqual((diff["only_expandable"], diff["only_memcoord"], diff["counts_apart"]), ([], [], {}))
        procs = RUNS.processes("42aff5f-firststep.json.gz")
        self.assertEqual(span([p["first_step_ms"] for p in procs[("resnet50_amp", "expandable")]], 0), (687, 986))
        self.assertEqual(span([p["first_step_ms"] for p in procs[("resnet50_amp", "memcoord")]], 0), (638, 980))
        summary, _ = pooled.pooled([(RUNS.file("42aff5f-firststep.json.gz"),
                                     pooled.load(RUNS.file("42aff5f-firststep.json.gz")))])
        s = summary["resnet50_amp"]
        self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 2),
                          tuple(round(x) for x in s["interval_ms"])), (14, 29, 64, 0.82, (-94, 106)))

    def test_resnet50s_first_step(self):
        procs = RUNS.processes(FIRSTSTEP)
        runs = {a: procs[("resnet50_amp", a)] for a in ("expandable", "memcoord")}
        self.assertEqual({a: len(r) for a, r in runs.items()}, {"expandable": 12, "memcoord": 12})
        self.assertEqual(span([p["first_step_ms"] for p in runs["expandable"]], 0), (615, 636))
        self.assertEqual(span([p["first_step_ms"] for p in runs["memcoord"]], 0), (616, 649))
        self.assertEqual({p["device_bytes"] for r in runs.values() for p in r}, {6350176256})
        gaps = [p["first_step_ms"] - p["step_cpu"][0]["process_ms"] for r in runs.values() for p in r]
        self.assertTrue(all(-0.5 < g <= 0 for g in gaps), gaps)
        self.assertEqual({p["memcoord_first_step"]["misses"] for p in runs["memcoord"]}, {97})
        self.assertEqual(span([p["memcoord_first_step"]["miss_ms"] for p in runs["memcoord"]]), (16.6, 17.9))
        memory = {a: [sum(v[1] for k, v in p["first_step_driver_calls"].items() if k.startswith("cuMem")) for p in r]
                  for a, r in runs.items()}
        self.assertEqual(round(statistics.median(memory["memcoord"]), 1), 15.1)
        self.assertEqual(round(statistics.median(memory["expandable"]), 1), 16.6)
        summary, notes = pooled.pooled([(RUNS.file(FIRSTSTEP), pooled.load(RUNS.file(FIRSTSTEP)))])
        s = summary["resnet50_amp"]
        self.assertEqual(notes, [])  # begun with a warm-up process
        self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 2),
                          tuple(round(x) for x in s["interval_ms"])), (2, 49, 144, 0.22, (-1, 6)))
        self.assertTrue(s["verdict"].startswith("not resolved"))

    def test_pooled_with_the_runs_before_it(self):
        paths = bench_files([("2026-12-06c", ("bench", "firststep")),
                             ("2026-12-06d", ("firststep-a", "firststep-b", "firststep-c", "firststep-d")),
                             ("2026-12-06e", ("firststep",)), ("2026-12-06f", ("firststep",)),
                             ("2026-12-06g", ("firststep",))])
        summary, _ = pooled.pooled([(p, pooled.load(p)) for p in paths])
        s = summary["resnet50_amp"]
        # 10,000 random relabellings, drawn in the order of the files' paths (p moved by 0.002 with one file's
        # path), so p is quoted to 0.01.
        self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 2),
                          tuple(round(x) for x in s["interval_ms"])), (4, 223, 584, 0.04, (1, 12)))
        without = [p for p in paths if not p.endswith("42aff5f-firststep.json.gz")]  # the thirteen runs before
        summary, _ = pooled.pooled([(p, pooled.load(p)) for p in without])
        s = summary["resnet50_amp"]
        self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 2),
                          tuple(round(x) for x in s["interval_ms"])), (4, 194, 520, 0.03, (1, 12)))
        self.assertTrue(s["verdict"].startswith("memcoord longer"), s["verdict"])
        for runs, quoted in ((without, (4, 194, 504, 0.056, (0, 10))), (paths, (4, 223, 568, 0.067, (0, 11)))):
            h100 = [p for p in runs if not p.endswith("650c2d7-firststep-a.json.gz")]  # the H200's run left out
            self.assertEqual(len(h100), len(runs) - 1)
            summary, _ = pooled.pooled([(p, pooled.load(p)) for p in h100])
            s = summary["resnet50_amp"]
            self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 3),
                              tuple(round(x) for x in s["interval_ms"])), quoted)

    def test_the_graph_checks_pass_with_end_route(self):
        log = RUNS.text("6b31db3-checks-graph.log")
        self.assertIn("empty_cache() returned 240 of 346 MB; the retry works: its replay matches eager (max diff "
                      "0.00e+00)", log)
        for check in ("graph_retry", "graph_capture", "graph_pool_shared"):
            self.assertRegex(log, rf"(?m)^{check} +pass ")
        self.assertIn("failed: none", log)

    def test_capi_bench_by_thread_count(self):
        unpinned = capi("6b31db3-capi_bench.json")
        self.assertEqual([round(unpinned[k]["median_ns_per_pair"], 1) for k in
                          (("memcoord", 1), ("memcoord", 4), ("control", 1), ("control", 4))], [44.5, 44.9, 31.9, 32.0])
        pinned = capi("6b31db3-capi_bench_pinned.json")
        self.assertEqual([round(pinned[("memcoord", t)]["median_ns_per_pair"], 1) for t in (1, 4)], [43.1, 44.1])
        self.assertEqual({c: round(x, 3) for c, x in pinned[("memcoord", 4)]["cpu_ratio"].items()},
                         {"0": 1.023, "1": 1.025, "2": 1.033, "3": 1.016})
        self.assertEqual(round(pinned[("control", 4)]["median_cpu_ratio"], 3), 0.998)
        quoted = {"cuda-vmm": ([43.5, 42.9, 43.9, 45.8], [0.985, 1.006, 1.047]),
                  "host": ([43.7, 42.8, 43.8, 45.4], [0.984, 1.002, 1.045])}
        for backend, (ns, ratios) in quoted.items():
            with self.subTest(backend=backend):
                r = capi(f"6b31db3-capi_threads-{backend}.json")
                self.assertEqual([round(r[("memcoord", t)]["median_ns_per_pair"], 1) for t in (1, 2, 4, 8)], ns)
                self.assertEqual([round(r[("memcoord", t)]["median_cpu_ratio"], 3) for t in (2, 4, 8)], ratios)
                eight = r[("memcoord", 8)]["cpu_ratio"].values()
                self.assertTrue(all(1.02 < x < 1.075 for x in eight), eight)
                control = [r[("control", t)]["median_cpu_ratio"] for t in (2, 4, 8)]
                self.assertTrue(all(abs(x - 1) < 0.003 for x in control), control)
                self.assertEqual(len(r[("memcoord", 1)]["runs"]), 40)

    def test_peak_sums_by_thread_count(self):
        quoted = {  # run: {threads: (median ns for one thread, else median CPU ratio; peak sums a million pairs)}
            "42aff5f-capi_bench_pinned.json": {1: (46.8, 0.5), 4: (0.989, 1215.3)},
            "42aff5f-capi_threads-cuda-vmm.json": {1: (44.7, 0.5), 2: (1.005, 26.5), 4: (1.028, 55.8),
                                                   8: (1.048, 1254.8)},
            "42aff5f-capi_threads-host.json": {1: (45.0, 0.5), 2: (0.993, 28.4), 4: (1.012, 59.3), 8: (1.040, 1374.2)},
            "42aff5f-capi_threads-default-2.json": {1: (45.4, 0.6), 4: (1.000, 77.2), 8: (1.020, 1476.3)},
            "42aff5f-capi_threads-idle_misses_0.json": {1: (45.5, 0.6), 4: (1.001, 90.1), 8: (1.029, 1546.6)},
            "42aff5f-capi_threads-fence_off.json": {1: (45.5, 0.6), 4: (0.993, 65.3), 8: (1.020, 1660.2)},
        }
        four, eight = [], []
        for name, rows in quoted.items():
            r = capi(name)
            with self.subTest(run=name):
                for threads, (figure, sums) in rows.items():
                    result = r[("memcoord", threads)]
                    read = result["median_ns_per_pair"] if threads == 1 else result["median_cpu_ratio"]
                    self.assertEqual(round(read, 1 if threads == 1 else 3), figure)
                    self.assertEqual(round(result["peak_sums_per_million_pairs"], 1), sums)
                self.assertEqual(r[("memcoord", 1)]["peak_sums"], 4)  # one thread: its four growing sizes
                self.assertNotIn("peak_sums", r.get(("control", 1), {}))
        for name in [n for n in RUNS.names() if "capi_threads" in n or "capi_bench_pinned" in n]:
            r = capi(name)
            four += [r[("memcoord", 4)]["median_cpu_ratio"]] if ("memcoord", 4) in r else []
            eight += [r[("memcoord", 8)]["median_cpu_ratio"]] if ("memcoord", 8) in r else []
        self.assertEqual((len(four), round(min(four), 3), round(max(four), 3)), (9, 0.989, 1.028))
        self.assertEqual((len(eight), round(min(eight), 3), round(max(eight), 3)), (7, 1.020, 1.048))

    def test_checks_abort_and_trim_at_42aff5f(self):
        RUNS.check_gpu_parts(self, "42aff5f", abort_s="0.119", plain_s="0.423", trim_step=13, trim_gb="28.14")
        self.assertRegex(RUNS.text("42aff5f-checks.log"), r"(?m)^stats +pass ")

if __name__ == "__main__":
    unittest.main()
