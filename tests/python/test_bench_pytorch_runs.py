"""The runs kept in bench/pytorch_runs against what bench_allocators.py makes of them: README.md's "Measured
under PyTorch" table recomputed from each process's figures (2026-12-05b, 693c4d5-bench1 and -bench2), and what
the figures show about how they were taken."""

import gzip
import json
import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import bench_allocators as bench  # noqa: E402

RUNS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "pytorch_runs", "2026-12-05b"))
ALLOCATORS = ("native", "expandable", "memcoord")
# README's table: device GB, median step ms, first step ms; native, expandable segments, memcoord.
TABLE = {
    "gpt2_fp32": ((16.76, 16.08, 16.07), (186.9, 187.9, 187.1), (546, 613, 590)),
    "gpt2_bf16_varlen": ((47.20, 26.91, 25.28), (248.7, 237.3, 238.2), (746, 714, 684)),
    "resnet50_amp": ((7.07, 6.35, 6.34), (35.3, 35.2, 30.5), (903, 953, 953)),
    "llama_1b": ((13.43, 11.10, 10.17), (187.6, 187.9, 191.0), (940, 816, 964)),
    "alternating": ((16.90, 16.31, 16.32), (186.6, 186.7, 186.5), (510, 534, 531)),
}


def rows():
    out = {}
    for name in ("693c4d5-bench1.json.gz", "693c4d5-bench2.json.gz"):
        with gzip.open(os.path.join(RUNS, name), "rt") as f:
            for row in json.load(f)["runs"]:
                out[(row["workload"], row["allocator"])] = row
    return out


class TableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rows = rows()

    def test_the_table_is_the_runs_figures(self):
        for workload, (device, median, first) in TABLE.items():
            for i, allocator in enumerate(ALLOCATORS):
                row = self.rows[(workload, allocator)]
                with self.subTest(workload=workload, allocator=allocator):
                    self.assertEqual(round(row["device_bytes"] / 1e9, 2), device[i])
                    self.assertEqual(round(row["median_step_ms"], 1), median[i])
                    self.assertEqual(round(row["first_step_ms"]), first[i])

    def test_each_row_is_its_three_processes_combined(self):
        for (workload, allocator), row in self.rows.items():
            runs = row["runs"]
            with self.subTest(workload=workload, allocator=allocator):
                self.assertEqual(len(runs), 3)
                self.assertFalse(any(r.get("error") for r in runs))
                self.assertNotIn("failed_runs", row)
                self.assertEqual(row["cpus"], "0-15")
                # Each process's median is every step's but the first (step_ms keeps them to 0.01 ms); the row's
                # the median of those.
                for r in runs:
                    self.assertAlmostEqual(r["median_step_ms"], statistics.median(r["step_ms"][1:]), delta=0.005)
                self.assertEqual(row["median_step_ms"], statistics.median(r["median_step_ms"] for r in runs))
                self.assertEqual(row["first_step_ms"], statistics.median(r["first_step_ms"] for r in runs))
                self.assertEqual(row["device_bytes"], max(r["device_bytes"] for r in runs))

    def test_the_device_reading_at_step_ends_held_each_pools_peak(self):
        # cudaMemGetInfo is read after each step's synchronize, not inside the step: a pool that unmapped
        # within a step could peak above it. Device minus the pool's peak reserve is the same for the three
        # allocators of each workload (what the libraries hold outside the pools), so it did not.
        for workload in TABLE:
            beside = {self.rows[(workload, a)]["device_bytes"] - self.rows[(workload, a)]["peak_reserved_bytes"]
                      for a in ALLOCATORS}
            self.assertEqual(len(beside), 1, workload)
            self.assertEqual({self.rows[(workload, a)]["context_bytes"] for a in ALLOCATORS}, {552402944})

    def test_the_alternating_pairs_median_was_gpt2s_fastest_step(self):
        # The table's 186.6, 186.7 and 186.5 ms: in every process, the median of every step but the first is
        # the fastest GPT-2 step; ResNet-50's seven steps after its first never reach it.
        parts = {}
        for allocator in ALLOCATORS:
            runs = self.rows[("alternating", allocator)]["runs"]
            for r in runs:
                self.assertAlmostEqual(r["median_step_ms"], min(r["step_ms"][2::2]), delta=0.005)
            per = [bench.step_medians(r["step_ms"], 2)[1] for r in runs]
            parts[allocator] = [round(statistics.median(p[i] for p in per), 1) for i in range(2)]
        # Each model's median over the processes (GPT-2, ResNet-50), as bench_allocators now reports them.
        self.assertEqual(parts, {"native": [186.9, 33.1], "expandable": [186.9, 35.5], "memcoord": [187.0, 38.0]})


if __name__ == "__main__":
    unittest.main()
