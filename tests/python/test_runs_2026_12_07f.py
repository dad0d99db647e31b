"""The runs kept in bench/pytorch_runs/2026-12-07f against what README.md and that folder's README say of them:
ResNet-50's first steps under the 40 MiB units (c41db21, 12+12 processes with two cold steps each), the alternating
pair again beside native (4 processes each, 48 steps), and both pooled with every run since grow_to_unit_end."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import (  # noqa: E402
    RunFolder, bench_files, first_step_memory_ms, pool_figures, span, step_rounds, target_detail, thread_rounds)
from test_runs_2026_12_07a import SINCE_GROW_TO_UNIT_END as BEFORE  # noqa: E402

RUNS = RunFolder("2026-12-07f")
RESNET, PAIR = "c41db21-firststep-resnet50.json.gz", "c41db21-firststep-pair.json.gz"
W = "resnet50_amp"
# Every ResNet-50 and pair run since grow_to_unit_end before this folder (36 ResNet-50 runs, 9 of the pair).
EARLIER = BEFORE + [("2026-12-07c", ("firststep",)), ("2026-12-07d", ("firststep",)),
                    ("2026-12-07e", ("firststep", "bench1", "bench2"))]


class Runs20261207fTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        names = ["README.md"] + [f"c41db21-firststep-{w}.{x}" for w in ("pair", "resnet50")
                                 for x in ("json.gz", "log")]
        self.assertEqual(RUNS.names(), sorted(names))

    def test_resnet50_first_steps_under_the_40_mib_units(self):
        document, procs = RUNS.json(RESNET), RUNS.processes(RESNET)
        mc, ex = procs[(W, "memcoord")], procs[(W, "expandable")]
        self.assertEqual((len(mc), len(ex)), (12, 12))
        self.assertEqual({p["device_bytes"] for p in mc + ex}, {6350176256})
        self.assertEqual(span([p["first_step_ms"] for p in mc + ex], 0), (867, 1051))
        self.assertEqual(target_detail(document, W, "first step <= expandable"), "1011 vs 1020 ms")
        self.assertTrue(target_detail(document, W, "first steps, pairs of processes").startswith(
            "memcoord's shorter in 82 of 144"))
        self.assertEqual(pool_figures(pooled, [RUNS.file(RESNET)], W), (1, -8, 82, 144, 0.498, [-30, 13]))
        self.assertEqual(step_rounds(pooled, [RUNS.file(RESNET)], W), (12, 8, -13.5, 0.388))
        self.assertEqual(thread_rounds(pooled, [RUNS.file(RESNET)], W, "python3")[:3], (12, -9.1, 9))
        self.assertEqual(thread_rounds(pooled, [RUNS.file(RESNET)], W, "pt_autograd_0")[:3], (12, 0.2, 6))
        def calls(processes):
            return {(name, n) for p in processes for name, (n, _) in p["first_step_driver_calls"].items() if n}

        self.assertEqual(calls(mc), {("cuMemCreate", 193), ("cuMemMap", 193), ("cuMemSetAccess", 97),
                                     ("cuMemUnmap", 1), ("cuMemRelease", 1)})
        self.assertEqual(calls(ex), {("cuMemCreate", 285), ("cuMemMap", 285), ("cuMemSetAccess", 97)})
        self.assertEqual(span([first_step_memory_ms(pooled, p) for p in mc]), (16.4, 18.7))
        self.assertEqual(span([first_step_memory_ms(pooled, p) for p in ex]), (23.7, 29.1))
        self.assertEqual({(f["misses"], f["units_mapped"], f["units_unmapped"], f["pack_waits"])
                          for f in (p["memcoord_first_step"] for p in mc)}, {(97, 193, 1, 0)})
        self.assertEqual(span([p["memcoord_first_step"]["miss_ms"] for p in mc]), (18.5, 21.2))
        self.assertEqual(target_detail(document, W, "first step's driver calls <= expandable's"),
                         "16.8 vs 24.4 ms of memory calls")
        self.assertEqual(target_detail(document, W, "cold steps (after empty_cache)"),
                         "memcoord 51.71 ms, expandable 60.86 ms (medians over the processes of each one's median); "
                         "memcoord's shorter in 141 of 144 pairs; memory calls 12.62 against 20.19 ms a step (medians)")
        rows = {r["allocator"]: r for r in document["runs"]}
        self.assertEqual((round(rows["memcoord"]["median_step_ms"], 2), round(rows["expandable"]["median_step_ms"], 2)),
                         (33.05, 33.08))

    def test_the_pair_beside_native(self):
        document, procs = RUNS.json(PAIR), RUNS.processes(PAIR)
        self.assertEqual({a: len(procs[("alternating", a)]) for a in ("native", "expandable", "memcoord")},
                         {"native": 4, "expandable": 4, "memcoord": 4})
        self.assertEqual({len(p["step_ms"]) for a in ("native", "expandable", "memcoord")
                          for p in procs[("alternating", a)]}, {48})
        self.assertEqual(target_detail(document, "alternating", "median within 2% of native"),
                         "x0.994 (gpt2_fp32 x0.999, resnet50_amp x0.967)")
        self.assertEqual(target_detail(document, "alternating", "steps paired with native's"),
                         "median x0.999, all steps x0.999, slowest x1.062 (step 29)")
        resnet = {a: span([statistics.median(p["step_ms"][1::2][1:]) for p in procs[("alternating", a)]])
                  for a in ("native", "memcoord")}
        self.assertEqual(resnet, {"native": (33.2, 35.1), "memcoord": (33.2, 35.9)})
        self.assertEqual(target_detail(document, "alternating", "first step <= expandable"), "564 vs 597 ms")
        rows = {r["allocator"]: r for r in document["runs"]}
        self.assertEqual(round(rows["native"]["first_step_ms"]), 559)
        self.assertEqual({p["device_bytes"] for p in procs[("alternating", "native")]}, {16900947968})
        self.assertTrue(target_detail(document, "alternating", "first steps, pairs of processes").startswith(
            "memcoord's shorter in 13 of 16"))
        self.assertEqual(target_detail(document, "alternating", "first step's driver calls <= expandable's"),
                         "28.8 vs 49.9 ms of memory calls")
        self.assertEqual(pool_figures(pooled, [RUNS.file(PAIR)], "alternating"), (1, -30, 13, 16, 0.143, [-45, 0]))
        self.assertEqual(target_detail(document, "alternating", "losses within expandable's spread"),
                         "9.54e-07 vs 9.54e-07")
        self.assertEqual(target_detail(document, "alternating", "native's own loss spread"),
                         "max |diff| 9.54e-07 between 4 native processes")
        self.assertEqual({p["device_bytes"] for a in ("expandable", "memcoord") for p in procs[("alternating", a)]},
                         {16313745408})

    def test_the_pools(self):
        earlier = bench_files(EARLIER)
        resnet = earlier + [RUNS.file(RESNET)]
        self.assertEqual(pool_figures(pooled, earlier, W, digits=1), (36, 5.6, 1033, 2374, 0.027, [1.3, 12.0]))
        self.assertEqual(pool_figures(pooled, resnet, W, digits=1), (37, 4.9, 1115, 2518, 0.05, [0.5, 11.1]))
        summary = pooled.pooled([(p, pooled.load(p)) for p in resnet])[0][W]
        self.assertEqual((round(summary["permutation_p"], 4), summary["verdict"]), (0.0498, "memcoord longer"))
        # On the 5% line: ten times the relabellings fall on the other side of it.
        finer = pooled.pooled([(p, pooled.load(p)) for p in resnet], permutations=100000)[0][W]
        self.assertEqual((round(finer["permutation_p"], 4), round(finer["permutation_se"], 4)), (0.0507, 0.0007))
        self.assertTrue(finer["verdict"].startswith("not resolved"))
        self.assertEqual(step_rounds(pooled, resnet, W), (282, 121, 5.6, 0.02))
        self.assertEqual(thread_rounds(pooled, resnet, W, "pt_autograd_0"), (232, 3.3, 89, 0.0))
        self.assertEqual(thread_rounds(pooled, resnet, W, "python3"), (232, 0.8, 109, 0.43))
        forty = [p for p in earlier if "e5e6152-bench1" in p] + [RUNS.file(RESNET)]
        self.assertEqual(pool_figures(pooled, forty, W, digits=1), (2, -7.6, 84, 148, 0.494, [-29.8, 13.5]))
        pair = earlier + [RUNS.file(PAIR)]
        self.assertEqual(pool_figures(pooled, pair, "alternating", digits=1), (10, 0.6, 77, 167, 0.722, [-4.6, 6.6]))
        forty_pair = [p for p in earlier if "e5e6152-bench2" in p] + [RUNS.file(PAIR)]
        self.assertEqual(pool_figures(pooled, forty_pair, "alternating", digits=1),
                         (2, -26.8, 13, 20, 0.157, [-35.8, 4.7]))
        for quoted in ("+4.9 ms [+0.5, +11.1]", "−7.6 ms [−29.8, +13.5]", "+0.6 ms [−4.6, +6.6]",
                       "−26.8 ms [−35.8, +4.7]", "x0.994"):
            self.assertIn(quoted, RUNS.text("README.md"))
        with open(os.path.join(EXAMPLES, "..", "..", "README.md"), encoding="utf-8") as f:
            readme = " ".join(f.read().split())
        for quoted in ("+4.9 ms [+0.5, +11.1], memcoord shorter in 1115 of 2518 pairs, p = 0.0498 with 10,000 random "
                       "relabellings and 0.0507 ± 0.0007 with 100,000",
                       "−8 ms [−30, +13], p 0.50", "x0.994 against native's: GPT-2 x0.999, ResNet-50 x0.967",
                       "first steps 564 ms against their 597", "−7.6 ms [−29.8, +13.5] (84 of 148 pairs, p 0.49)"):
            self.assertIn(quoted, readme)


if __name__ == "__main__":
    unittest.main()
