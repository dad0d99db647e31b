"""The run kept in bench/pytorch_runs/2026-12-07b against what README.md and that folder's README say of it:
ResNet-50's frees of another thread's block counted on an H200 (other_thread_frees), the C ABI's GPU tests, and
the pinned capi_bench with its paired control."""

import os
import sys
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch")))
from pytorch_runs import RunFolder  # noqa: E402

RUNS = RunFolder("2026-12-07b")
C = "779964f"


class Runs20261207bTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(["README.md", f"{C}-call.log", f"{C}-capi_bench_pinned.json",
                                               f"{C}-resnet50-memcoord.json.gz"]))

    def test_every_resnet_step_freed_430_blocks_of_another_thread(self):
        (row,) = RUNS.json(f"{C}-resnet50-memcoord.json.gz")["runs"]
        self.assertEqual((row["workload"], row["allocator"], len(row["runs"])), ("resnet50_amp", "memcoord", 2))
        for p in row["runs"]:
            first = p["memcoord_first_step"]
            self.assertEqual((first["other_thread_frees"], first["misses"], first["units_mapped"],
                              first["units_unmapped"], first["pack_waits"]), (430, 97, 287, 2, 0))
            self.assertEqual([s["other_thread_frees"] for s in p["memcoord_steps"]], [430, 430, 430])
        self.assertEqual([round(p["first_step_ms"]) for p in row["runs"]], [1575, 779])
        self.assertEqual([round(p["first_step_threads"]["pt_autograd_0"]) for p in row["runs"]], [334, 263])
        self.assertIn("1290 frees of another thread's block", RUNS.text(f"{C}-call.log"))

    def test_the_c_abi_gpu_tests_passed(self):
        self.assertIn("[  PASSED  ] 8 tests.", RUNS.text(f"{C}-call.log"))
        self.assertIn("capi rc=0", RUNS.text(f"{C}-call.log"))

    def test_capi_bench_pinned(self):
        bench = RUNS.capi_bench(f"{C}-capi_bench_pinned.json")
        one, four = bench[("memcoord", 1)], bench[("memcoord", 4)]
        self.assertEqual((round(one["median_ns_per_pair"], 1), round(four["median_ns_per_pair"], 1)), (81.2, 82.4))
        self.assertEqual(round(bench[("control", 1)]["median_ns_per_pair"], 1), 60.6)
        self.assertEqual({c: round(x, 3) for c, x in four["cpu_ratio"].items()},
                         {"0": 1.018, "1": 0.997, "2": 0.994, "3": 1.025})
        self.assertEqual(round(four["median_cpu_ratio"], 3), 1.018)
        self.assertEqual((round(min(bench[("control", 4)]["cpu_ratio"].values()), 3),
                          round(max(bench[("control", 4)]["cpu_ratio"].values()), 3)), (0.982, 0.996))
        for r in (one, four):
            self.assertEqual(r["disturbed_threads"], 0)
            self.assertEqual(r["paired_control_run_cpus"], r["run_cpus"])
        self.assertEqual(round(four["peak_sums_per_million_pairs"]), 1303)


if __name__ == "__main__":
    unittest.main()
