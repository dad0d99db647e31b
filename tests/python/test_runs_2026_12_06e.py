"""The runs kept in bench/pytorch_runs/2026-12-06e against what README.md, that folder's README and
allocator/pool_options.h say of them: mark_waits on and off alike on GPT-2 bf16 (why off became the default), the
new default's first steps (ResNet-50 longer on the H200 in every pair), graph_retry under both allocators, and
capi_bench's figures CPU by CPU."""

import os
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files, span  # noqa: E402

RUNS = RunFolder("2026-12-06e")
OFF = "memcoord[mark_waits:off]"
FIRSTSTEPS = ["650c2d7-firststep-a.json.gz", "650c2d7-firststep-b.json.gz", "84732fb-firststep-bf16.json.gz",
              "be8f168-firststep-c.json.gz"]
processes, text = RUNS.processes, RUNS.text


class Runs20261206eTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(FIRSTSTEPS + [
            "README.md", "84732fb-capi_bench.json", "84732fb-capi_bench_pinned.json", "84732fb-checks.log",
            "650c2d7-capi_bench.json", "650c2d7-capi_bench_pinned.json", "650c2d7-checks.log",
            "650c2d7-checks-native.log", "650c2d7-firstprof-resnet50.log", "be8f168-checks.log"]))

    def test_mark_waits_on_and_off_alike_on_gpt2_bf16(self):
        procs = processes("84732fb-firststep-bf16.json.gz")
        bf16 = {a: procs[("gpt2_bf16_varlen", a)] for a in ("expandable", "memcoord", OFF)}
        self.assertEqual({a: len(ps) for a, ps in bf16.items()}, {"expandable": 6, "memcoord": 6, OFF: 6})
        self.assertEqual({p["device_bytes"] for p in bf16["memcoord"] + bf16[OFF]}, {25262292992})
        self.assertEqual({p["device_bytes"] for p in bf16["expandable"]}, {26912751616})
        medians = {a: sorted(round(p["median_step_ms"], 1) for p in ps) for a, ps in bf16.items()}
        self.assertEqual((medians["memcoord"][0], medians["memcoord"][-1]), (145.8, 162.4))
        self.assertEqual(medians[OFF], [143.6, 144.0, 144.9, 145.0, 146.7, 175.4])
        self.assertEqual((medians["expandable"][0], medians["expandable"][-1]), (148.5, 161.9))
        for a, total, count in (("memcoord", (115.4, 123.1), {6, 7}), (OFF, (104.4, 124.5), {5, 6})):
            with self.subTest(allocator=a):
                for p in bf16[a]:
                    steps = p["memcoord_steps"]
                    self.assertEqual([i for i, s in enumerate(steps) if s["pack_waits"]], [2, 13, 17, 20])
                    self.assertEqual(steps[0]["misses"], 109)
                    self.assertEqual(steps[2]["pack_waits"], 2 if a == "memcoord" else 1)
                self.assertEqual(span([sum(s["pack_wait_ms"] for s in p["memcoord_steps"]) for p in bf16[a]]), total)
                self.assertEqual({sum(s["pack_waits"] for s in p["memcoord_steps"]) for p in bf16[a]}, count)
        firsts = {a: sorted(round(p["first_step_ms"]) for p in ps) for a, ps in bf16.items()}
        self.assertEqual(span(firsts["memcoord"], 0), (422, 464))
        self.assertEqual(span(firsts[OFF], 0), (415, 528))
        self.assertEqual(firsts["expandable"], [458, 461, 479, 482, 511, 1466])

    def test_first_steps_under_the_new_default(self):
        a = processes("650c2d7-firststep-a.json.gz")
        pair = a[("alternating", "memcoord")]
        self.assertTrue(all(s["pack_waits"] == 0 for p in pair for s in p["memcoord_steps"]))
        self.assertEqual(span([p["memcoord_first_step"]["miss_ms"] for p in pair]), (25.5, 26.8))
        self.assertEqual(span([p["first_step_ms"] for p in pair], 0), (425, 452))
        self.assertEqual(span([p["first_step_ms"] for p in a[("alternating", "expandable")]], 0), (434, 672))
        for workload, nbytes in (("alternating", 16313745408), ("resnet50_amp", 6350176256)):
            for allocator in ("expandable", "memcoord"):
                self.assertEqual({p["device_bytes"] for p in a[(workload, allocator)]}, {nbytes})
        resnet = {k: a[("resnet50_amp", k)] for k in ("expandable", "memcoord")}
        self.assertEqual(span([p["first_step_ms"] for p in resnet["memcoord"]], 0), (767, 807))
        self.assertEqual(span([p["first_step_ms"] for p in resnet["expandable"]], 0), (742, 761))
        self.assertEqual(span([p["memcoord_first_step"]["miss_ms"] for p in resnet["memcoord"]]), (18.4, 20.8))
        summary, _ = pooled.pooled([(p, pooled.load(p, keep_first=True)) for p in [RUNS.file(FIRSTSTEPS[0])]])
        self.assertEqual((summary["resnet50_amp"]["memcoord_shorter"], summary["resnet50_amp"]["pairs"]), (0, 16))
        self.assertEqual(round(summary["resnet50_amp"]["shift_ms"]), 33)
        self.assertEqual(tuple(round(x) for x in summary["resnet50_amp"]["interval_ms"]), (12, 55))
        self.assertEqual(round(summary["resnet50_amp"]["permutation_p"], 3), 0.029)
        self.assertTrue(summary["resnet50_amp"]["verdict"].startswith("memcoord longer"))
        self.assertEqual(round(summary["resnet50_amp"]["memory_call_ms"]["memcoord"], 1), 17.4)
        self.assertEqual(round(summary["resnet50_amp"]["memory_call_ms"]["expandable"], 1), 17.4)
        for name, pairs in (("650c2d7-firststep-b.json.gz", (15, 36)), ("be8f168-firststep-c.json.gz", (7, 16))):
            path = RUNS.file(name)
            summary, _ = pooled.pooled([(path, pooled.load(path, keep_first=True))])
            self.assertEqual((summary["resnet50_amp"]["memcoord_shorter"], summary["resnet50_amp"]["pairs"]), pairs)

    def test_pooled_with_the_runs_before(self):
        paths = bench_files([("2026-12-06c", ("bench", "firststep")),
                             ("2026-12-06d", ("firststep-a", "firststep-b", "firststep-c", "firststep-d")),
                             ("2026-12-06e", ("firststep",))])
        summary, _ = pooled.pooled([(p, pooled.load(p, keep_first=True)) for p in paths])
        figures = {"gpt2_bf16_varlen": (-36, (41, 45), 0.01, (-71, -15)), "alternating": (4, (62, 149), 0.38, (-4, 13)),
                   "resnet50_amp": (16, (88, 210), 0.26, (-14, 54))}
        for workload, (shift, pairs, p, interval) in figures.items():
            s = summary[workload]
            with self.subTest(workload=workload):
                self.assertEqual(round(s["shift_ms"]), shift)
                self.assertEqual((s["memcoord_shorter"], s["pairs"]), pairs)
                self.assertEqual(round(s["permutation_p"], 2), p)
                self.assertEqual(tuple(round(x) for x in s["interval_ms"]), interval)
        self.assertTrue(summary["gpt2_bf16_varlen"]["verdict"].startswith("memcoord shorter"))
        self.assertTrue(summary["resnet50_amp"]["verdict"].startswith("not resolved"))

    def test_graph_retry_under_both_allocators(self):
        native = text("650c2d7-checks-native.log")
        self.assertIn("beginAllocateToPool: already recording to mempool_id", native)
        ours = text("650c2d7-checks.log")
        self.assertIn("empty_cache() returned 0 of 346 MB; the retry fails at once (1 ms)", ours)
        self.assertIn("failed: none", ours)
        now = text("be8f168-checks.log")
        self.assertIn("one failed without ending it", now)
        self.assertIn("failed: none", now)
        first = text("84732fb-checks.log")
        self.assertIn("Offset increment outside graph capture encountered unexpectedly", first)
        for check in ("refuses_after_init", "stats", "hf_trainer", "lightning", "compile", "ddp"):
            self.assertRegex(first, rf"(?m)^{check} +pass ")

    def test_capi_bench_cpu_by_cpu(self):
        def results(name):
            return {(r["lib"].startswith("control"), r["threads"]): r for r in RUNS.json(name)["results"]}

        def medians(r):
            return {k: round(v["median_ns_per_pair"], 1) for k, v in r.items()}

        self.assertEqual(medians(results("84732fb-capi_bench.json")),
                         {(False, 1): 45.5, (False, 4): 45.8, (True, 1): 31.3, (True, 4): 31.6})
        h100_pinned = results("84732fb-capi_bench_pinned.json")
        self.assertEqual(medians(h100_pinned), {(False, 1): 54.7, (False, 4): 59.2, (True, 1): 31.7, (True, 4): 31.8})
        one = h100_pinned[(False, 1)]
        self.assertEqual([round(ns, 1) for ns in one["runs"]], [41.1, 54.7, 73.3, 66.7, 43.6, 56.6, 45.7])
        self.assertEqual(one["run_cpus"], [[0], [1], [2], [3], [0], [1], [2]])
        self.assertEqual(medians(results("650c2d7-capi_bench.json")),
                         {(False, 1): 81.7, (False, 4): 80.3, (True, 1): 51.0, (True, 4): 51.5})
        h200_pinned = results("650c2d7-capi_bench_pinned.json")
        self.assertEqual(medians(h200_pinned), {(False, 1): 79.4, (False, 4): 80.4, (True, 1): 50.4, (True, 4): 51.6})
        per_cpu = {k: {c: round(ns, 1) for c, ns in r["cpu_median_ns"].items()} for k, r in h200_pinned.items()}
        self.assertEqual(per_cpu[(False, 1)], {"0": 84.2, "1": 79.5, "2": 73.4, "3": 47.6})
        self.assertEqual(per_cpu[(False, 4)], {"0": 85.4, "1": 80.7, "2": 73.5, "3": 50.9})
        self.assertEqual(per_cpu[(True, 1)], {"0": 55.7, "1": 51.2, "2": 49.7, "3": 50.3})
        self.assertEqual(per_cpu[(True, 4)], {"0": 56.8, "1": 51.7, "2": 48.1, "3": 51.5})


if __name__ == "__main__":
    unittest.main()
