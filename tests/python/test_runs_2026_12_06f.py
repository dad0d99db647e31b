"""The runs kept in bench/pytorch_runs/2026-12-06f against what README.md and that folder's README say of them: a
failed CUDA graph capture recovered under memcoord (and refused under PyTorch's own allocator), capi_bench CPU by
CPU, the first steps' CPU time and threads, and the pooled first steps without each run's first process."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files  # noqa: E402

RUNS = RunFolder("2026-12-06f")
FIRSTSTEPS = ["fa92d5d-firststep-a.json.gz", "fa92d5d-firststep-b.json.gz"]
WARMED = "502a9f0-firststep-c.json.gz"  # begun with a discarded warm-up process
text = RUNS.text


def processes(name):
    """allocator -> ResNet-50's process records of one run."""
    return {a: records for (w, a), records in RUNS.processes(name).items() if w == "resnet50_amp"}


class Runs20261206fTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(FIRSTSTEPS + [WARMED,
            "README.md", "fa92d5d-capi_bench.json", "fa92d5d-capi_bench_pinned.json", "fa92d5d-checks.log",
            "fa92d5d-checks-graph.log", "checks-1-before-host-end.log", "checks-2-before-host-end.log",
            "checks-native-graph_retry.log", "14bdab5-checks-graph.log"]))

    def test_a_failed_capture_is_recovered_under_memcoord_only(self):
        self.assertIn("empty_cache() returned 240 of 346 MB: the failed capture's route still blocks trims",
                      text("checks-1-before-host-end.log"))
        self.assertIn("the retry failed although the failed capture was abandoned: beginAllocateToPool: already "
                      "recording to mempool_id", text("checks-2-before-host-end.log"))
        self.assertIn("beginAllocateToPool: already recording to mempool_id", text("checks-native-graph_retry.log"))
        for name in ("fa92d5d-checks-graph.log", "fa92d5d-checks.log", "14bdab5-checks-graph.log"):
            with self.subTest(log=name):
                log = text(name)
                self.assertIn("empty_cache() returned 240 of 346 MB; the retry works: its replay matches eager "
                              "(max diff 0.00e+00)", log)
                self.assertIn("failed: none", log)
        self.assertIn("'failed_capture_recovery': True", text("fa92d5d-checks.log"))
        self.assertIn("multi_device   skip", text("fa92d5d-checks.log"))

    def test_capi_bench_cpu_by_cpu(self):
        def medians(name, lib):
            results = RUNS.json(name)["results"]
            return {r["threads"]: r for r in results if os.path.basename(r["lib"]).startswith(lib)}

        unpinned = medians("fa92d5d-capi_bench.json", "libmemcoord")
        self.assertEqual([round(unpinned[t]["median_ns_per_pair"], 1) for t in (1, 4)], [46.1, 49.6])
        pinned = medians("fa92d5d-capi_bench_pinned.json", "libmemcoord")
        one = {cpu: round(ns, 1) for cpu, ns in pinned[1]["cpu_median_ns"].items()}
        four = {cpu: round(ns, 1) for cpu, ns in pinned[4]["cpu_median_ns"].items()}
        self.assertEqual(one, {"0": 46.7, "1": 45.7, "2": 73.5, "3": 77.0})
        self.assertEqual(four, {"0": 48.2, "1": 47.7, "2": 74.7, "3": 80.0})
        self.assertTrue(all(1.0 < four[cpu] / one[cpu] < 1.045 for cpu in one))  # within 2-4% on each CPU
        self.assertEqual([round(pinned[t]["median_ns_per_pair"], 1) for t in (1, 4)], [46.7, 72.8])
        self.assertTrue(all(ns < 100 for ns in one.values()))

    def test_the_first_step_is_serial_cpu_work_and_no_memcoord_thread_runs(self):
        gaps, first_gaps = [], []
        for name, cold in zip(FIRSTSTEPS, (550.5, 659.6)):
            for allocator, runs in processes(name).items():
                for r in runs:
                    gap = round(r["first_step_ms"] - r["step_cpu"][0]["process_ms"], 1)
                    (first_gaps if pooled.ran_first(r) else gaps).append((allocator, gap))
            with self.subTest(run=name):
                self.assertIn(("expandable", cold), first_gaps)
        self.assertEqual(len(gaps), 30)
        self.assertEqual((min(g for _, g in gaps), max(g for _, g in gaps)), (-1.1, 1.6))
        threads = {a: [r["first_step_threads"] for r in runs] for a, runs in processes(FIRSTSTEPS[1]).items()}
        for allocator, ran in threads.items():
            with self.subTest(allocator=allocator):
                self.assertEqual({name for t in ran for name in t}, {"python3", "pt_autograd_0", "cuda-EvtHandlr"})
        autograd = [t["pt_autograd_0"] for ran in threads.values() for t in ran]
        self.assertEqual((round(min(autograd)), round(max(autograd))), (267, 416))
        medians = {(name, a): round(statistics.median(r["first_step_ms"] for r in runs))
                   for name in FIRSTSTEPS for a, runs in processes(name).items()}
        self.assertEqual([medians[(n, a)] for n in FIRSTSTEPS for a in ("memcoord", "expandable")],
                         [656, 652, 1084, 1092])
        misses = {r["memcoord_first_step"]["misses"] for n in FIRSTSTEPS for r in processes(n)["memcoord"]}
        self.assertEqual(misses, {97})

    def test_the_warm_up_process_took_the_cold_start(self):
        warmup = RUNS.json(WARMED)["warmup"]
        self.assertEqual((round(warmup["first_step_ms"]), round(warmup["first_step_waiting_ms"])), (939, 261))
        runs = processes(WARMED)
        gaps = [r["first_step_ms"] - r["step_cpu"][0]["process_ms"] for rs in runs.values() for r in rs]
        self.assertEqual(len(gaps), 16)
        self.assertTrue(all(-0.5 < g < 0 for g in gaps), gaps)
        firsts = {a: (round(min(r["first_step_ms"] for r in rs)), round(max(r["first_step_ms"] for r in rs)))
                  for a, rs in runs.items()}
        self.assertEqual(firsts, {"memcoord": (582, 611), "expandable": (580, 610)})
        misses = [r["memcoord_first_step"]["miss_ms"] for r in runs["memcoord"]]
        self.assertEqual((round(min(misses), 1), round(max(misses), 1)), (15.0, 15.6))

    def test_pooled_since_grow_to_unit_end(self):
        paths = bench_files([("2026-12-06c", ("bench", "firststep")),
                             ("2026-12-06d", ("firststep-a", "firststep-b", "firststep-c", "firststep-d")),
                             ("2026-12-06e", ("firststep",)), ("2026-12-06f", ("firststep",))])
        figures = {
            False: {"gpt2_bf16_varlen": (-34, (35, 39), 0.01), "resnet50_amp": (11, (145, 376), 0.09),
                    "llama_1b": (-6, (40, 75), 0.59), "alternating": (4, (51, 129), 0.33)},
            True: {"gpt2_bf16_varlen": (-36, (41, 45), 0.01), "resnet50_amp": (7, (170, 402), 0.3),
                   "llama_1b": (-1, (46, 90), 0.92), "alternating": (4, (62, 149), 0.38)},
        }
        for keep_first, quoted in figures.items():
            summary, notes = pooled.pooled([(p, pooled.load(p, keep_first=keep_first)) for p in paths])
            for workload, (shift, pairs, p) in quoted.items():
                with self.subTest(keep_first=keep_first, workload=workload):
                    s = summary[workload]
                    self.assertEqual((round(s["shift_ms"]), (s["memcoord_shorter"], s["pairs"])), (shift, pairs))
                    self.assertEqual(round(s["permutation_p"], 2), p)
            self.assertEqual(sum("ran first" in n for n in notes), 0 if keep_first else 12)
        summary, _ = pooled.pooled([(p, pooled.load(p)) for p in paths])
        self.assertTrue(summary["gpt2_bf16_varlen"]["verdict"].startswith("memcoord shorter"))
        self.assertEqual(tuple(round(x) for x in summary["resnet50_amp"]["interval_ms"]), (1, 29))
        self.assertTrue(summary["resnet50_amp"]["verdict"].startswith("not resolved"))
        summary, notes = pooled.pooled([(p, pooled.load(p)) for p in [RUNS.file(WARMED)]])
        s = summary["resnet50_amp"]
        self.assertEqual(notes, [])  # the warm-up process ran first: nothing of the run is left out
        self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 2),
                          tuple(round(x) for x in s["interval_ms"])), (1, 24, 64, 0.66, (-6, 18)))
        alone = [RUNS.file(n) for n in FIRSTSTEPS]
        for keep_first, quoted in ((False, (15, 42, 112, 0.38, (-17, 89))), (True, (4, 58, 128, 0.86, (-34, 75)))):
            summary, _ = pooled.pooled([(p, pooled.load(p, keep_first=keep_first)) for p in alone])
            s = summary["resnet50_amp"]
            self.assertEqual((round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 2),
                              tuple(round(x) for x in s["interval_ms"])), quoted)


if __name__ == "__main__":
    unittest.main()
