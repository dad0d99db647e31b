"""The runs kept in bench/pytorch_runs/2026-12-06i against what README.md and that folder's README say of them:
ResNet-50's first step on the fastest CPUs (with thread caches off, and a control with memcoord loaded beside
PyTorch's allocator), pooled with the runs before; the allocators' hits replayed; GPT-2 bf16; the checks, the
abort, the trim and capi_bench at 88eda94."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
import kernels_diff  # noqa: E402
from pytorch_runs import RunFolder, bench_files, span  # noqa: E402

RUNS = RunFolder("2026-12-06i")
KERNELS = [f"88eda94-firstprof-{a}-{n}.kernels.json" for a in ("expandable", "memcoord") for n in (1, 2, 3)]
FIRSTSTEPS = [f"88eda94-firststep-{run}.json.gz" for run in "abc"]
# Every run since grow_to_unit_end: the stop before this one's sixteen and this folder's three firststep runs.
SINCE_GROW_TO_UNIT_END = [("2026-12-06c", ("bench", "firststep")),
                          ("2026-12-06d", ("firststep-a", "firststep-b", "firststep-c", "firststep-d")),
                          ("2026-12-06e", ("firststep",)), ("2026-12-06f", ("firststep",)),
                          ("2026-12-06g", ("firststep",)), ("2026-12-06h", ("firststep", "bench1.json")),
                          ("2026-12-06i", ("firststep",))]
CONTROL = "expandable+memcoord"


def firsts(name, allocator):
    return [p["first_step_ms"] for p in RUNS.processes(name)[("resnet50_amp", allocator)] if "first_step_ms" in p]


def thread_ms(name, allocator, thread):
    return [p["first_step_threads"][thread] for p in RUNS.processes(name)[("resnet50_amp", allocator)]]


def replays(allocator):
    return [r for r in RUNS.json("88eda94-replaycost.json") if r["allocator"] == allocator]


class Runs20261206iTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(KERNELS + FIRSTSTEPS + [
            "README.md", "88eda94-replaycost.json", "88eda94-replaycost.log", "88eda94-capi_bench.json",
            "88eda94-capi_bench_pinned.json", "88eda94-checks.log", "88eda94-abort.log", "88eda94-trim.log",
            "88eda94-firstprof-kernels-diff.json", "88eda94-bench1-bf16.json.gz"]))

    def test_every_process_ran_on_the_calls_four_fastest_cpus(self):
        cpus = {name: {p["cpus"] for procs in RUNS.processes(name).values() for p in procs if "cpus" in p}
                for name in FIRSTSTEPS + ["88eda94-bench1-bf16.json.gz"]}
        self.assertEqual(cpus, {"88eda94-firststep-a.json.gz": {"0,7,9,12"}, "88eda94-firststep-b.json.gz":
                                {"4,11-12,14"}, "88eda94-firststep-c.json.gz": {"0-2,5"},
                                "88eda94-bench1-bf16.json.gz": {"0,2,11,14"}})
        self.assertEqual({r["cpus"] for r in RUNS.json("88eda94-replaycost.json")}, {"1,5,8,11"})

    def test_resnet50s_first_step_run_by_run(self):
        quoted = {  # run: {allocator: (span, median)}
            "a": {"expandable": ((642, 718), 657), "memcoord": ((652, 766), 669)},
            "b": {"expandable": ((604, 765), 655), "memcoord": ((586, 802), 658),
                  "memcoord[thread_cache:0]": ((599, 757), 665)},
            "c": {"expandable": ((585, 785), 651), "memcoord": ((591, 748), 685), CONTROL: ((592, 899), 729)}}
        for run, figures in quoted.items():
            name = f"88eda94-firststep-{run}.json.gz"
            for allocator, (spread, median) in figures.items():
                with self.subTest(run=run, allocator=allocator):
                    steps = firsts(name, allocator)
                    self.assertEqual(len(steps), 12)
                    self.assertEqual((span(steps, 0), round(statistics.median(steps))), (spread, median))
            shorter = sum(m < e for m in firsts(name, "memcoord") for e in firsts(name, "expandable"))
            self.assertEqual(shorter, {"a": 48, "b": 81, "c": 60}[run])
        # Call 3's control failed in every process (init before torch, under the driver-call timer).
        failed = RUNS.processes("88eda94-firststep-b.json.gz")[("resnet50_amp", CONTROL)]
        self.assertEqual(len(failed), 12)
        self.assertTrue(all("cudaErrorCallRequiresNewerDriver (36)" in p["error"] for p in failed))

    def test_the_autograd_threads(self):
        medians = {run: [round(statistics.median(thread_ms(f"88eda94-firststep-{run}.json.gz", a, "pt_autograd_0")), 1)
                         for a in ("memcoord", "expandable")] for run in "abc"}
        self.assertEqual(medians, {"a": [234.6, 226.7], "b": [221.2, 229.9], "c": [250.0, 243.9]})

    def test_pooled_since_grow_to_unit_end(self):
        paths = bench_files(SINCE_GROW_TO_UNIT_END)
        self.assertEqual(sum("2026-12-06i" in p for p in paths), 3)
        summary, _ = pooled.pooled([(p, pooled.load(p)) for p in paths])
        s = summary["resnet50_amp"]
        self.assertEqual((s["runs"], round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"],
                          round(s["permutation_p"], 3), tuple(round(x) for x in s["interval_ms"])),
                         (19, 5, 454, 1089, 0.054, (1, 12)))
        self.assertTrue(s["verdict"].startswith("not resolved"), s["verdict"])

    def test_the_same_kernels_under_the_profilers(self):
        records = [kernels_diff.load(RUNS.file(n)) for n in KERNELS]
        self.assertEqual({(len(r["kernels"]), sum(k["count"] for k in r["kernels"].values())) for r in records},
                         {(83, 814)})
        diff = RUNS.json("88eda94-firstprof-kernels-diff.json")
        self.assertEqual((diff["differences"]["only_expandable"], diff["differences"]["only_memcoord"],
                          diff["differences"]["counts_apart"]), ([], [], {}))

    def test_each_allocators_hits_replayed(self):
        cold = {a: [r["passes"][0]["ms"] for r in replays(a)] for a in ("expandable", "memcoord")}
        warm = {a: [r["passes"][1]["ms"] for r in replays(a)] for a in ("expandable", "memcoord")}
        self.assertEqual({a: span(w, 2) for a, w in warm.items()},
                         {"expandable": (11.0, 11.2), "memcoord": (11.67, 12.27)})
        self.assertLess(max(warm["expandable"]), min(warm["memcoord"]))  # apart in every process
        self.assertEqual({a: round(statistics.median(w), 2) for a, w in warm.items()},
                         {"expandable": 11.07, "memcoord": 11.95})
        events = {r["events"] for a in cold for r in replays(a)}
        self.assertEqual(events, {7233})
        per_event_us = (statistics.median(warm["memcoord"]) - statistics.median(warm["expandable"])) * 1e3 / 7233
        self.assertEqual(round(per_event_us, 2), 0.12)
        self.assertEqual({a: (span(c, 2), round(statistics.median(c), 2)) for a, c in cold.items()},
                         {"expandable": ((24.9, 25.66), 25.17), "memcoord": ((25.45, 26.7), 25.77)})
        first = replays("memcoord")[0]["passes"][0]
        self.assertEqual((first["pool"]["misses"], round(first["pool"]["miss_ms"], 1)), (127, 13.0))

    def test_gpt2_bf16(self):
        procs = RUNS.processes("88eda94-bench1-bf16.json.gz")
        device = {a: {p["device_bytes"] for p in procs[("gpt2_bf16_varlen", a)]}
                  for a in ("native", "expandable", "memcoord")}
        self.assertEqual(device, {"native": {47202697216}, "expandable": {26912751616}, "memcoord": {25262292992}})
        med = {a: statistics.median(p["median_step_ms"] for p in procs[("gpt2_bf16_varlen", a)])
               for a in ("native", "memcoord")}
        self.assertEqual((round(med["memcoord"], 1), round(med["native"], 1)), (155.2, 156.0))
        self.assertEqual(round(med["memcoord"] / med["native"], 3), 0.995)

    def test_checks_abort_and_trim(self):
        RUNS.check_gpu_parts(self, "88eda94", abort_s="0.174", plain_s="0.520", trim_step=13, trim_gb="28.14")

    def test_capi_bench(self):
        capi = RUNS.capi_bench
        unpinned, pinned = capi("88eda94-capi_bench.json"), capi("88eda94-capi_bench_pinned.json")
        self.assertEqual([round(r[("memcoord", 1)]["median_ns_per_pair"], 1) for r in (unpinned, pinned)], [42.6, 41.7])
        self.assertEqual([round(r[(lib, 4)]["median_cpu_ratio"], 3) for r in (unpinned, pinned)
                          for lib in ("memcoord", "control")], [1.010, 1.003, 1.014, 1.001])
        self.assertEqual([round(pinned[("memcoord", t)]["peak_sums_per_million_pairs"], 1) for t in (1, 4)],
                         [0.5, 1322.3])


if __name__ == "__main__":
    unittest.main()
