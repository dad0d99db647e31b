"""The runs kept in bench/pytorch_runs/2026-12-06j against what README.md and that folder's README say of them:
the shim's direct path under the integration checks, each allocator's hits replayed beside memcoord through
PyTorch's own pluggable layer, and ResNet-50's first step, pooled with the runs before."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import driver_timer  # noqa: E402
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files, span  # noqa: E402
from test_runs_2026_12_06i import SINCE_GROW_TO_UNIT_END as NINETEEN_BEFORE  # noqa: E402

RUNS = RunFolder("2026-12-06j")
FIRSTSTEPS = [f"30dfc1c-firststep-{run}.json.gz" for run in "abc"]
REPLAYS = {run: f"30dfc1c-replaycost-{run}.json" for run in "ab"}
ALLOCATORS = ("expandable", "memcoord", "memcoord-pluggable")
# Every run since grow_to_unit_end: the nineteen of the folders before (2026-12-06i's selection) and this
# folder's three.
SINCE_GROW_TO_UNIT_END = NINETEEN_BEFORE + [("2026-12-06j", ("firststep",))]


def resnet(name, allocator):
    return [p for p in RUNS.processes(name)[("resnet50_amp", allocator)] if "first_step_ms" in p]


def replays(run, allocator):
    return [r for r in RUNS.json(REPLAYS[run]) if r["allocator"] == allocator]


class Runs20261206jTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(FIRSTSTEPS + [
            "README.md", "30dfc1c-capi_bench.json", "30dfc1c-capi_bench_pinned.json", "30dfc1c-checks.log",
            "30dfc1c-replaycost-a.json", "30dfc1c-replaycost-a.log", "30dfc1c-replaycost-b.json",
            "30dfc1c-replaycost-b.log"]))

    def test_every_process_ran_on_the_calls_four_fastest_cpus(self):
        cpus = {name: {p["cpus"] for procs in RUNS.processes(name).values() for p in procs if "cpus" in p}
                for name in FIRSTSTEPS}
        self.assertEqual(cpus, {"30dfc1c-firststep-a.json.gz": {"0-2,11"}, "30dfc1c-firststep-b.json.gz": {"2,8-10"},
                                "30dfc1c-firststep-c.json.gz": {"7,9,11,15"}})
        self.assertEqual({run: {r["cpus"] for r in RUNS.json(f)} for run, f in REPLAYS.items()},
                         {"a": {"0-1,5,7"}, "b": {"1,8,10,15"}})

    def test_the_checks_passed_with_multi_device_skipped(self):
        checks = RUNS.text("30dfc1c-checks.log")
        self.assertIn("failed: none", checks)
        self.assertRegex(checks, r"(?m)^multi_device +skip ")
        for name in ("graph_capture", "record_stream", "compile", "ddp", "cudnn_benchmark", "empty_cache", "stats"):
            self.assertRegex(checks, rf"(?m)^{name} +pass ")

    def test_capi_bench(self):
        unpinned, pinned = RUNS.capi_bench("30dfc1c-capi_bench.json"), RUNS.capi_bench("30dfc1c-capi_bench_pinned.json")
        self.assertEqual([round(r[("memcoord", 1)]["median_ns_per_pair"], 1) for r in (unpinned, pinned)], [55.2, 62.2])
        self.assertEqual([round(r[(lib, 4)]["median_cpu_ratio"], 3) for r in (unpinned, pinned)
                          for lib in ("memcoord", "control")], [1.019, 1.016, 1.123, 1.052])
        self.assertEqual(round(pinned[("memcoord", 4)]["cpu_ratio"]["0"], 3), 1.565)
        self.assertEqual(round(min(pinned[("control", 4)]["cpu_ratio"].values()), 3), 0.806)

    def test_each_allocators_hits_replayed(self):
        warm = {(run, a): [r["passes"][1]["ms"] for r in replays(run, a)] for run in REPLAYS for a in ALLOCATORS}
        self.assertEqual({k: (span(w, 2), round(statistics.median(w), 1)) for k, w in warm.items()}, {
            ("a", "expandable"): ((10.76, 23.82), 11.4), ("a", "memcoord"): ((10.75, 19.97), 13.6),
            ("a", "memcoord-pluggable"): ((10.97, 30.35), 11.9), ("b", "expandable"): ((10.63, 21.16), 11.9),
            ("b", "memcoord"): ((11.04, 18.76), 11.7), ("b", "memcoord-pluggable"): ((10.62, 20.68), 12.0)})
        self.assertEqual({k: sum(ms > 17 for ms in w) for k, w in warm.items()},
                         {("a", a): 2 for a in ALLOCATORS} | {("b", "expandable"): 3, ("b", "memcoord"): 3,
                                                              ("b", "memcoord-pluggable"): 2})
        quickest = [min(w) for w in warm.values()]
        self.assertEqual(round(max(quickest) - min(quickest), 2), 0.42)
        self.assertEqual({r["events"] for run in REPLAYS for a in ALLOCATORS for r in replays(run, a)}, {7233})

    def test_the_pair_loops(self):
        fastest = {(run, a): [round(ns) for ns in sorted(r["pair_ns"]["65536"] for r in replays(run, a))[:2]]
                   for run in REPLAYS for a in ALLOCATORS}
        self.assertEqual(fastest, {("a", "expandable"): [2407, 2457], ("a", "memcoord"): [2016, 2115],
                                   ("a", "memcoord-pluggable"): [2049, 2275], ("b", "expandable"): [2400, 2505],
                                   ("b", "memcoord"): [2106, 2116], ("b", "memcoord-pluggable"): [2202, 2222]})
        self.assertFalse(any("pair_error" in r for run in REPLAYS for r in RUNS.json(REPLAYS[run])))

    def test_the_cold_passes(self):
        cold = {(run, a): round(statistics.median(r["passes"][0]["ms"] for r in replays(run, a)), 1)
                for run in REPLAYS for a in ALLOCATORS}
        self.assertEqual(cold, {("a", "expandable"): 27.1, ("a", "memcoord"): 31.3, ("a", "memcoord-pluggable"): 27.4,
                                ("b", "expandable"): 30.1, ("b", "memcoord"): 27.1, ("b", "memcoord-pluggable"): 28.4})
        first = {run: replays(run, "memcoord")[0]["passes"][0]["pool"] for run in REPLAYS}
        self.assertEqual({run: (p["misses"], round(p["miss_ms"], 1)) for run, p in first.items()},
                         {"a": (127, 20.4), "b": (127, 14.5)})

    def test_resnet50s_first_step_run_by_run(self):
        quoted = {  # run: {allocator: (span, median, memory calls' median ms)}
            "a": {"expandable": ((650, 930), 761, 17.22), "memcoord": ((660, 880), 702, 16.18)},
            "b": {"expandable": ((608, 883), 717, 17.68), "memcoord": ((618, 887), 738, 15.81)},
            "c": {"expandable": ((624, 780), 691, 16.60), "memcoord": ((615, 876), 692, 15.39)}}
        for run, figures in quoted.items():
            name = f"30dfc1c-firststep-{run}.json.gz"
            for allocator, (spread, median, memory_ms) in figures.items():
                with self.subTest(run=run, allocator=allocator):
                    procs = resnet(name, allocator)
                    steps = [p["first_step_ms"] for p in procs]
                    self.assertEqual(len(steps), 12)
                    self.assertEqual((span(steps, 0), round(statistics.median(steps))), (spread, median))
                    memory = statistics.median(driver_timer.memory_ms(p["first_step_driver_calls"]) for p in procs)
                    self.assertEqual(round(memory, 2), memory_ms)
            shorter = sum(m["first_step_ms"] < e["first_step_ms"]
                          for m in resnet(name, "memcoord") for e in resnet(name, "expandable"))
            self.assertEqual(shorter, {"a": 89, "b": 58, "c": 66}[run])
            misses = [p["memcoord_first_step"] for p in resnet(name, "memcoord")]
            self.assertEqual({m["misses"] for m in misses}, {97})
            self.assertEqual(round(statistics.median(m["miss_ms"] for m in misses), 2),
                             {"a": 18.18, "b": 17.82, "c": 17.33}[run])

    def test_memory_steps_and_losses(self):
        for name in FIRSTSTEPS:
            rows = {r["allocator"]: r for r in RUNS.json(name)["runs"]}
            self.assertEqual({a: round(rows[a]["device_bytes"] / 1e9, 2) for a in ("expandable", "memcoord")},
                             {"expandable": 6.35, "memcoord": 6.35})
            self.assertEqual({(round(r["losses"][0], 4), round(r["losses"][-1], 4)) for r in rows.values()},
                             {(7.0987, 7.0635)})
        steps = [[round(RUNS.json(n)["runs"][i]["median_step_ms"], 1) for n in FIRSTSTEPS] for i in (0, 1)]
        by = {RUNS.json(FIRSTSTEPS[0])["runs"][i]["allocator"]: s for i, s in enumerate(steps)}
        self.assertEqual(by, {"expandable": [29.0, 28.8, 28.7], "memcoord": [29.2, 29.3, 28.8]})

    def test_pooled(self):
        this = pooled.pooled([(RUNS.file(n), pooled.load(RUNS.file(n))) for n in FIRSTSTEPS])[0]["resnet50_amp"]
        paths = bench_files(SINCE_GROW_TO_UNIT_END)
        self.assertEqual(sum("2026-12-06j" in p for p in paths), 3)
        every = pooled.pooled([(p, pooled.load(p)) for p in paths])[0]["resnet50_amp"]
        figures = [(s["runs"], round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 3),
                    tuple(round(x) for x in s["interval_ms"])) for s in (this, every)]
        self.assertEqual(figures, [(3, 3, 213, 432, 0.871, (-31, 45)), (22, 5, 667, 1521, 0.098, (-1, 13))])
        self.assertTrue(all(s["verdict"].startswith("not resolved") for s in (this, every)))


if __name__ == "__main__":
    unittest.main()
