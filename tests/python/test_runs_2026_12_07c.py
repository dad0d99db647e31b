"""The runs kept in bench/pytorch_runs/2026-12-07c against what README.md and that folder's README say of them:
capi_bench at four threads before and after ce793aa's floor-window change (and with the peak sums compiled out),
ResNet-50's first step profiled thread by thread, three more firststep runs (two pooled with the runs before) and
the GPU tests on a second start."""

import gzip
import json
import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files, pool_figures, step_rounds, thread_rounds  # noqa: E402
from test_runs_2026_12_07a import SINCE_GROW_TO_UNIT_END as BEFORE  # noqa: E402

RUNS = RunFolder("2026-12-07c")
C = "ce793aa"
LIBS = ("6b85a4b", C, "nosum")


def capi(lib, call, n):
    return RUNS.capi_bench(f"capi-{lib}-c{call}-{n}.json")


class Runs20261207cTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        capi_files = [f"capi-{lib}-c1-{n}.json" for lib in LIBS for n in (1, 2, 3)]
        capi_files += [f"capi-{C}-c2-{n}.json" for n in (1, 2, 3)] + ["capi-c1-summary.txt", "capi-c2-summary.txt"]
        prof = [f"{C}-firstprof-{a}-{n}.kernels.json.gz" for a in ("expandable", "memcoord") for n in (1, 2, 3, 4)]
        prof += [f"{C}-firstprof-call.log", f"{C}-firstprof-kernels-diff.json"]
        steps = [f"{C}-firststep-a.log"] + [f"{C}-firststep-{x}.{e}" for x in "bc" for e in ("json.gz", "log")]
        gtests = [f"{C}-allocator_gpu_tests.log", f"{C}-worker_c_abi_gpu_tests.log",
                  f"{C}-gtests-capi_bench.json", f"{C}-gtests-capi_bench_pinned.json"]
        self.assertEqual(RUNS.names(), sorted(["README.md"] + capi_files + prof + steps + gtests))

    def test_capi_bench_four_threads_against_one_in_turns(self):
        def figures(lib, call, n):
            r = capi(lib, call, n)
            one, four = r[("memcoord", 1)], r[("memcoord", 4)]
            return (round(one["median_ns_per_pair"], 1), round(four["median_cpu_ratio"], 3),
                    round(four["peak_sums_per_million_pairs"]))

        self.assertEqual([figures("6b85a4b", 1, n) for n in (1, 2, 3)],
                         [(80.9, 1.028, 1538), (83.3, 1.014, 1214), (88.0, 1.012, 1953)])
        self.assertEqual([figures(C, 1, n) for n in (1, 2, 3)],
                         [(80.6, 1.008, 54), (81.8, 0.987, 78), (83.7, 1.014, 44)])
        self.assertEqual([figures("nosum", 1, n) for n in (1, 2, 3)],
                         [(79.0, 1.01, 0), (81.4, 1.005, 0), (86.0, 1.0, 0)])
        self.assertEqual([figures(C, 2, n) for n in (1, 2, 3)],
                         [(41.4, 0.999, 113), (51.0, 0.903, 203), (45.7, 1.005, 71)])
        self.assertEqual(round(statistics.mean(figures("6b85a4b", 1, n)[1] for n in (1, 2, 3)), 3), 1.018)
        self.assertEqual(capi(C, 2, 2)[("memcoord", 4)]["disturbed_threads"], 45)
        for lib in LIBS:
            for n in (1, 2, 3):
                r = capi(lib, 1, n)
                self.assertEqual(r[("memcoord", 4)]["runs_sharing_a_core"], 0)
                self.assertEqual(r[("memcoord", 4)]["paired_control_run_cpus"], r[("memcoord", 4)]["run_cpus"])
        controls = [capi(lib, 1, n) for lib in LIBS for n in (1, 2, 3)] + [capi(C, 2, n) for n in (1, 2, 3)]
        ratios = [round(r[("control", 4)]["median_cpu_ratio"], 3) for r in controls]
        self.assertEqual((min(ratios), max(ratios)), (0.989, 1.023))
        one_c1 = [round(r[("control", 1)]["median_ns_per_pair"], 1) for r in controls[:9]]
        one_c2 = [round(r[("control", 1)]["median_ns_per_pair"], 1) for r in controls[9:]]
        self.assertEqual((min(one_c1), max(one_c1), min(one_c2), max(one_c2)), (54.4, 59.1, 32.3, 36.9))

    def test_the_second_calls_summary_of_the_files_that_did_not_come_back(self):
        # A four-thread line of memcoord's: "LIB-ROUND 4 NS {CPU: RATIO, ...} UNDISTURBED_RATIO SUMS"; the
        # control's lines end "None None".
        ratios = {}
        for line in RUNS.text("capi-c2-summary.txt").splitlines():
            words = line.split()
            if len(words) > 2 and words[1] == "4" and words[-1] != "None":
                ratios.setdefault(words[0].rsplit("-", 1)[0], []).append(float(words[-2]))
        self.assertEqual(ratios, {"libmemcoord_capi_6b85a4b": [1.036397, 1.014574, 1.052759],
                                  "libmemcoord_capi": [0.997838, 0.90277, 1.004631],
                                  "libmemcoord_capi_nosum": [1.028755, 1.049046, 0.949151]})

    def test_firstprof_thread_by_thread(self):
        diff = RUNS.json(f"{C}-firstprof-kernels-diff.json")
        self.assertEqual(diff["differences"]["only_expandable"] + diff["differences"]["only_memcoord"], [])
        self.assertEqual(diff["differences"]["counts_apart"], {})
        self.assertEqual({a: (s["processes"], s["kernel_names"], s["launches"], round(s["gpu_ms"], 1))
                          for a, s in diff["summary"].items()},
                         {"expandable": (4, 83, 814, 26.2), "memcoord": (4, 83, 814, 26.2)})
        self.assertEqual({a: {t: round(ms, 1) for t, ms in th.items()} for a, th in diff["threads"].items()},
                         {"expandable": {"autograd": 288.8, "python": 702.9},
                          "memcoord": {"autograd": 366.9, "python": 537.7}})
        log = RUNS.text(f"{C}-firstprof-call.log")
        self.assertIn("self CPU apart on the autograd thread: aten::empty_strided: expandable [0.758, 0.815, 1.158, "
                      "0.915], memcoord [1.533, 1.543, 1.482, 1.356] ms (memcoord +0.64 ms)", log)

        def ops(allocator, thread, name, field="self_ms"):
            values = []
            for n in (1, 2, 3, 4):
                with gzip.open(RUNS.file(f"{C}-firstprof-{allocator}-{n}.kernels.json.gz"), "rt") as f:
                    values.append(json.load(f)["threads"][thread]["ops"].get(name, {}).get(field, 0))
            return values

        conv = "aten::convolution_backward"
        self.assertEqual([round(x) for x in ops("expandable", "autograd", conv)], [147, 149, 214, 155])
        self.assertEqual([round(x) for x in ops("memcoord", "autograd", conv)], [225, 212, 222, 168])
        capturing = "cudaStreamIsCapturing"
        self.assertEqual(ops("memcoord", "python", capturing, "count"), [105] * 4)
        self.assertEqual(ops("memcoord", "autograd", capturing, "count"), [43, 42, 37, 36])
        self.assertEqual(ops("expandable", "python", capturing, "count"), [6] * 4)
        self.assertEqual(ops("expandable", "autograd", capturing, "count"), [0] * 4)
        self.assertEqual((ops("memcoord", "autograd", "cudaMemGetInfo", "count"),
                          ops("memcoord", "python", "cudaMemGetInfo", "count")), ([3, 3, 3, 2], [6, 7, 7, 6]))
        readings = [a + p for a, p in zip(ops("memcoord", "autograd", "cudaMemGetInfo"),
                                          ops("memcoord", "python", "cudaMemGetInfo"))]
        self.assertEqual((round(min(readings), 2), round(max(readings), 2)), (0.37, 0.54))
        self.assertEqual(ops("expandable", "python", "cudaMemGetInfo", "count"), [0] * 4)
        for allocator in ("expandable", "memcoord"):
            for n in (1, 2, 3, 4):
                with gzip.open(RUNS.file(f"{C}-firstprof-{allocator}-{n}.kernels.json.gz"), "rt") as f:
                    threads = json.load(f)["threads"]
                self.assertFalse([op for t in threads.values() for op in t["ops"] if op.startswith("cuMem")])

    def test_firststep_runs_and_the_pool(self):
        self.assertIn("first step <= expandable           NO   740 vs 657 ms", RUNS.text(f"{C}-firststep-a.log"))
        self.assertIn("memcoord's shorter in 15 of 64", RUNS.text(f"{C}-firststep-a.log"))
        self.assertIn("memcoord's shorter in 41 of 64", RUNS.text(f"{C}-firststep-b.log"))
        self.assertIn("memcoord's shorter in 22 of 64", RUNS.text(f"{C}-firststep-c.log"))
        new = bench_files([("2026-12-07c", ("firststep",))])
        paths = bench_files(BEFORE + [("2026-12-07c", ("firststep",))])

        self.assertEqual(pool_figures(pooled, new, "resnet50_amp"), (2, 1, 63, 128, 0.95, [-38, 44]))
        self.assertEqual(pool_figures(pooled, paths, "resnet50_amp"), (28, 4, 903, 2018, 0.117, [-1, 10]))
        self.assertEqual(step_rounds(pooled, paths, "resnet50_amp"), (220, 98, 3.2, 0.121))

        self.assertEqual(thread_rounds(pooled, paths, "resnet50_amp", "pt_autograd_0"), (170, 2.2, 68, 0.011))
        self.assertEqual(thread_rounds(pooled, paths, "resnet50_amp", "python3"), (170, 0.3, 83, 0.878))

    def test_gtests_on_the_second_start(self):
        self.assertIn("[  PASSED  ] 23 tests.", RUNS.text(f"{C}-allocator_gpu_tests.log"))
        self.assertIn("[  SKIPPED ] 1 test.", RUNS.text(f"{C}-allocator_gpu_tests.log"))
        self.assertIn("[  PASSED  ] 8 tests.", RUNS.text(f"{C}-worker_c_abi_gpu_tests.log"))
        bench = RUNS.capi_bench(f"{C}-gtests-capi_bench_pinned.json")
        one, four = bench[("memcoord", 1)], bench[("memcoord", 4)]
        self.assertEqual((round(one["median_ns_per_pair"], 1), round(four["median_ns_per_pair"], 1)), (74.9, 74.2))
        self.assertEqual({c: round(x, 3) for c, x in four["cpu_ratio"].items()},
                         {"0": 1.0, "1": 0.991, "2": 0.953, "3": 1.005})
        self.assertEqual((round(four["median_cpu_ratio"], 3), four["disturbed_threads"],
                          round(four["peak_sums_per_million_pairs"])), (1.0, 4, 52))
        self.assertEqual(round(bench[("control", 4)]["median_cpu_ratio"], 3), 1.0)


if __name__ == "__main__":
    unittest.main()
