"""The runs kept in bench/pytorch_runs/2026-12-07g against what README.md and that folder's README say of them:
three runs of ResNet-50's first steps under the default 40 MiB units (253d2a1, 12+12 processes with two cold steps
each, one H100 start), pooled with the earlier runs of those units and with every run since grow_to_unit_end."""

import os
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import (  # noqa: E402
    RunFolder, bench_files, first_step_memory_ms, pool_figures, span, step_rounds, target_detail, thread_rounds)
from test_runs_2026_12_07f import EARLIER as BEFORE_07F  # noqa: E402

RUNS = RunFolder("2026-12-07g")
NAMES = [f"253d2a1-firststep-resnet50-{n}.json.gz" for n in (1, 2, 3)]
W = "resnet50_amp"
# Every ResNet-50 run since grow_to_unit_end before this folder (37), and those of the 40 MiB units among them (2).
EARLIER = bench_files(BEFORE_07F + [("2026-12-07f", ("firststep-resnet50",))])
FORTY = [p for p in EARLIER if "e5e6152-bench1" in p or "c41db21-firststep-resnet50" in p]


class Runs20261207gTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        names = ["README.md"] + NAMES + [n.replace(".json.gz", ".log") for n in NAMES]
        self.assertEqual(RUNS.names(), sorted(names))
        self.assertEqual(len(FORTY), 2)

    def test_each_run(self):
        # (first-step spans memcoord, expandable; the bench's medians line; pairs; this run pooled; round by round)
        expected = [((576, 583), (578, 591), "578 vs 580 ms", 118, (1, -2.4, 118, 144, 0.012, [-4.2, -0.6]),
                     (12, 11, -1.9, 0.006)),
                    ((575, 591), (577, 592), "578 vs 581 ms", 100, (1, -2.5, 100, 144, 0.134, [-6.2, 0.3]),
                     (12, 8, -3.6, 0.388)),
                    ((577, 624), (582, 603), "589 vs 588 ms", 72, (1, -0.1, 72, 144, 0.971, [-7.2, 11.6]),
                     (12, 7, -1.4, 0.774))]
        cold = [("34.89", "38.91", "8.37", "12.23"), ("35.09", "38.99", "8.45", "12.31"),
                ("35.91", "40.24", "8.66", "12.58")]
        memory = ["10.1 vs 14.7", "10.2 vs 14.8", "10.9 vs 15.2"]
        medians = [(28.30, 28.25), (28.30, 28.25), (28.39, 28.51)]
        for name, (mc_span, ex_span, line, shorter, alone, rounds), c, m, med in zip(NAMES, expected, cold, memory,
                                                                                    medians):
            document, procs = RUNS.json(name), RUNS.processes(name)
            mc, ex = procs[(W, "memcoord")], procs[(W, "expandable")]
            self.assertEqual((len(mc), len(ex)), (12, 12))
            self.assertEqual({p["device_bytes"] for p in mc + ex}, {6350176256})
            self.assertEqual(span([p["first_step_ms"] for p in mc], 0), mc_span)
            self.assertEqual(span([p["first_step_ms"] for p in ex], 0), ex_span)
            self.assertEqual(target_detail(document, W, "first step <= expandable"), line)
            self.assertTrue(target_detail(document, W, "first steps, pairs of processes").startswith(
                f"memcoord's shorter in {shorter} of 144"))
            self.assertEqual(pool_figures(pooled, [RUNS.file(name)], W, digits=1), alone)
            self.assertEqual(step_rounds(pooled, [RUNS.file(name)], W), rounds)
            self.assertEqual(target_detail(document, W, "first step's driver calls <= expandable's"),
                             f"{m} ms of memory calls")
            self.assertEqual(target_detail(document, W, "cold steps (after empty_cache)"),
                             f"memcoord {c[0]} ms, expandable {c[1]} ms (medians over the processes of each one's "
                             f"median); memcoord's shorter in 144 of 144 pairs; memory calls {c[2]} against {c[3]} "
                             "ms a step (medians)")
            rows = {r["allocator"]: r for r in document["runs"]}
            self.assertEqual((round(rows["memcoord"]["median_step_ms"], 2),
                              round(rows["expandable"]["median_step_ms"], 2)), med)

    def test_what_every_process_did_in_its_first_step(self):
        mc = [p for n in NAMES for p in RUNS.processes(n)[(W, "memcoord")]]
        ex = [p for n in NAMES for p in RUNS.processes(n)[(W, "expandable")]]

        def calls(processes):
            return {(name, n) for p in processes for name, (n, _) in p["first_step_driver_calls"].items() if n}

        self.assertEqual(calls(mc), {("cuMemCreate", 193), ("cuMemMap", 193), ("cuMemSetAccess", 97),
                                     ("cuMemUnmap", 1), ("cuMemRelease", 1)})
        self.assertEqual(calls(ex), {("cuMemCreate", 285), ("cuMemMap", 285), ("cuMemSetAccess", 97)})
        firsts = [p["memcoord_first_step"] for p in mc]
        self.assertEqual({(f["misses"], f["units_mapped"], f["units_unmapped"], f["pack_waits"],
                           f["other_thread_frees"]) for f in firsts}, {(97, 193, 1, 0, 430)})
        self.assertEqual(span([first_step_memory_ms(pooled, p) for p in mc]), (10.0, 11.8))
        self.assertEqual(span([first_step_memory_ms(pooled, p) for p in ex]), (14.5, 19.4))
        self.assertEqual(span([p["memcoord_first_step"]["miss_ms"] for p in mc]), (11.1, 13.3))
        # Every process's losses, under both allocators, step for step the same numbers.
        (losses,) = {tuple(p["losses"]) for p in mc + ex}
        self.assertEqual((len(mc + ex), len(losses), losses[0], losses[-1]), (72, 8, 7.09869384765625, 7.0634765625))
        probes = [v for n in NAMES for v in RUNS.json(n)["cpu_probe_ms"].values()]
        self.assertEqual(span(probes), (9.5, 12.9))

    def test_the_pools(self):
        new = [RUNS.file(n) for n in NAMES]
        self.assertEqual(pool_figures(pooled, new, W, digits=1), (3, -2.2, 290, 432, 0.022, [-3.8, -0.6]))
        self.assertEqual(step_rounds(pooled, new, W), (36, 26, -2.0, 0.011))
        forty = FORTY + new
        self.assertEqual(pool_figures(pooled, forty, W, digits=1), (5, -2.3, 374, 580, 0.029, [-4.1, -0.4]))
        summary = pooled.pooled([(p, pooled.load(p)) for p in forty])[0][W]
        self.assertEqual((round(summary["permutation_p"], 4), round(summary["permutation_se"], 4),
                          summary["verdict"]), (0.0288, 0.0017, "memcoord shorter"))
        for paths, p, se in ((new, 0.0243, 0.0005), (forty, 0.0319, 0.0006)):
            finer = pooled.pooled([(path, pooled.load(path)) for path in paths], permutations=100000)[0][W]
            self.assertEqual((round(finer["permutation_p"], 4), round(finer["permutation_se"], 4), finer["verdict"]),
                             (p, se, "memcoord shorter"))
        self.assertEqual(step_rounds(pooled, forty, W), (50, 35, -2.7, 0.007))
        self.assertEqual(thread_rounds(pooled, forty, W, "python3"), (50, -3.6, 39, 0.0))
        self.assertEqual(thread_rounds(pooled, forty, W, "pt_autograd_0"), (50, 1.0, 16, 0.021))
        every = EARLIER + new
        self.assertEqual(pool_figures(pooled, every, W, digits=1), (40, 1.3, 1405, 2950, 0.296, [-1.2, 4.3]))
        self.assertEqual(step_rounds(pooled, every, W), (318, 147, 2.2, 0.197))
        self.assertEqual(thread_rounds(pooled, every, W, "pt_autograd_0"), (268, 2.3, 99, 0.0))
        self.assertEqual(thread_rounds(pooled, every, W, "python3"), (268, -0.4, 137, 0.714))
        text = " ".join(RUNS.text("README.md").split())
        for quoted in ("−2.2 ms [−3.8, −0.6], memcoord's shorter in 290 of 432 pairs, p 0.024 ± 0.0005",
                       "−2.3 ms [−4.1, −0.4], memcoord's shorter in 374 of 580 pairs, p 0.0288 ± 0.0017",
                       "0.0319 ± 0.0006 with 100,000", "+1.3 ms [−1.2, +4.3], memcoord's shorter in 1405 of 2950 pairs",
                       "+1.0 ms (16 shorter, 33 longer, p 0.021)", "50 rounds, 35 shorter, −2.7 ms, p 0.007"):
            self.assertIn(quoted, text)
        with open(os.path.join(EXAMPLES, "..", "..", "README.md"), encoding="utf-8") as f:
            readme = " ".join(f.read().split())
        for quoted in ("**−2.3 ms [−4.1, −0.4], 374 of 580 pairs, p 0.029**",
                       "+1.3 ms [−1.2, +4.3], p 0.30, not resolved",
                       "−2.4 ms [−4.2, −0.6] (p 0.012), −2.5 [−6.2, +0.3] (p 0.13) and −0.1 [−7.2, +11.6] (p 0.97), "
                       "memcoord shorter in 118, 100 and 72 of 144 pairs",
                       "p 0.0288 ± 0.0017 with 10,000 relabellings and 0.0319 ± 0.0006 with 100,000",
                       "round by round 50 rounds, 35 shorter, −2.7 ms, p 0.007",
                       "+1.0 ms over those 50 rounds (16 shorter, p 0.021)", "the Python thread's −3.6 ms (39 shorter)",
                       "9.3–9.9 ms against expandable segments' 13.9–14.4"):
            self.assertIn(quoted, readme)


if __name__ == "__main__":
    unittest.main()
