"""The runs kept in bench/pytorch_runs/2026-12-07a against what README.md and that folder's README say of them:
the GPU tests and the C ABI's cost with its paired control, bench1 and bench2 at 483d37e (the README's table),
ResNet-50's first steps in three more runs, pooled with the runs before and read round by round, and the Llama's
first-step profile through the direct shim."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import driver_timer  # noqa: E402
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files, step_rounds, thread_rounds  # noqa: E402
from test_runs_2026_12_06k import SINCE_GROW_TO_UNIT_END as BEFORE  # noqa: E402

RUNS = RunFolder("2026-12-07a")
C = "483d37e"
BENCH1, BENCH2 = f"{C}-bench1.json.gz", f"{C}-bench2.json.gz"
FIRSTSTEPS = [f"{C}-firststep-{x}.json.gz" for x in "abc"]
ALLOCATORS = ("native", "expandable", "memcoord")
WORKLOADS = ("gpt2_fp32", "gpt2_bf16_varlen", "resnet50_amp", "llama_1b", "alternating")
SINCE_GROW_TO_UNIT_END = BEFORE + [("2026-12-07a", ("bench1", "bench2", "firststep"))]


def processes(workload, allocator):
    return RUNS.processes(BENCH1, BENCH2)[(workload, allocator)]


class Runs20261207aTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        prof = [f"{C}-firstprof-{a}-{i}.{x}" for a in ("expandable", "memcoord") for i in (1, 2) for x in
                ("kernels.json", "log")]
        self.assertEqual(RUNS.names(), sorted(
            ["README.md", f"{C}-allocator_gpu_tests.log", f"{C}-worker_c_abi_gpu_tests.log", f"{C}-capi_bench.json",
             f"{C}-capi_bench_pinned.json", BENCH1, f"{C}-bench1.log", BENCH2, f"{C}-bench2.log",
             f"{C}-firstprof-kernels-diff.json"] + FIRSTSTEPS + [f"{C}-firststep-{x}.log" for x in "abc"] + prof))

    def test_gpu_tests_passed(self):
        self.assertRegex(RUNS.text(f"{C}-allocator_gpu_tests.log"), r"\[  PASSED  \] 23 tests\.\n\[  SKIPPED \] 1 test")
        self.assertNotIn("FAILED", RUNS.text(f"{C}-allocator_gpu_tests.log"))
        self.assertIn("[  PASSED  ] 8 tests.", RUNS.text(f"{C}-worker_c_abi_gpu_tests.log"))

    def test_capi_bench(self):
        unpinned, pinned = RUNS.capi_bench(f"{C}-capi_bench.json"), RUNS.capi_bench(f"{C}-capi_bench_pinned.json")
        self.assertEqual([round(r[("memcoord", n)]["median_ns_per_pair"], 1)
                          for r in (unpinned, pinned) for n in (1, 4)], [44.3, 44.7, 43.3, 44.0])
        self.assertEqual([round(r[("control", 1)]["median_ns_per_pair"], 1) for r in (unpinned, pinned)], [32.1, 31.9])
        four = pinned[("memcoord", 4)]
        self.assertEqual(round(four["median_cpu_ratio"], 3), 1.017)
        self.assertEqual({c: round(x, 3) for c, x in four["cpu_ratio"].items()},
                         {"0": 1.017, "1": 1.013, "2": 1.003, "3": 1.021})
        self.assertEqual((round(four["median_undisturbed_cpu_ratio"], 3), four["disturbed_threads"],
                          len(four["runs"]) * four["threads"]), (1.017, 3, 160))
        self.assertEqual(pinned[("memcoord", 1)]["disturbed_threads"], 1)
        self.assertEqual(round(pinned[("control", 4)]["median_cpu_ratio"], 3), 1.001)
        self.assertEqual((pinned[("memcoord", 1)]["peak_sums"], round(four["peak_sums_per_million_pairs"])), (4, 1192))
        self.assertEqual(four["runs_sharing_a_core"], 0)
        # Unpinned, the 1.574 came from pairs whose control ended on another CPU (a097b1a leaves those out).
        loose = unpinned[("memcoord", 4)]
        self.assertEqual((round(loose["median_undisturbed_cpu_ratio"], 3), round(loose["median_cpu_ratio"], 3)),
                         (1.574, 0.958))
        self.assertNotIn("paired_control_run_cpus", loose)  # recorded from a097b1a on

    def test_device_memory(self):
        device = {(w, a): {p["device_bytes"] for p in processes(w, a)} for w in WORKLOADS for a in ALLOCATORS}
        self.assertEqual(device, {
            ("gpt2_fp32", "native"): {16758341632}, ("gpt2_fp32", "expandable"): {16078864384},
            ("gpt2_fp32", "memcoord"): {16078864384},
            ("gpt2_bf16_varlen", "native"): {47202697216}, ("gpt2_bf16_varlen", "expandable"): {26912751616},
            ("gpt2_bf16_varlen", "memcoord"): {25262292992},
            ("resnet50_amp", "native"): {7073693696}, ("resnet50_amp", "expandable"): {6350176256},
            ("resnet50_amp", "memcoord"): {6350176256},
            ("llama_1b", "native"): {13432258560}, ("llama_1b", "expandable"): {11100225536},
            ("llama_1b", "memcoord"): {10007609344},
            ("alternating", "native"): {16900947968}, ("alternating", "expandable"): {16313745408},
            ("alternating", "memcoord"): {16313745408}})

    def test_median_and_first_steps(self):
        rows = {(r["workload"], r["allocator"]): r for name in (BENCH1, BENCH2) for r in RUNS.json(name)["runs"]}
        self.assertEqual({w: tuple(round(rows[(w, a)]["median_step_ms"], 1) for a in ALLOCATORS) for w in WORKLOADS}, {
            "gpt2_fp32": (186.8, 186.2, 186.3), "gpt2_bf16_varlen": (148.1, 147.3, 147.8),
            "resnet50_amp": (28.8, 28.8, 28.7), "llama_1b": (188.3, 186.6, 187.7),
            "alternating": (108.2, 108.1, 108.4)})
        self.assertEqual({w: tuple(round(statistics.median(p["first_step_ms"] for p in processes(w, a)))
                                   for a in ALLOCATORS) for w in WORKLOADS}, {
            "gpt2_fp32": (415, 424, 422), "gpt2_bf16_varlen": (420, 430, 431), "resnet50_amp": (590, 592, 592),
            "llama_1b": (709, 627, 617), "alternating": (401, 405, 405)})
        log = RUNS.text(f"{C}-bench1.log") + RUNS.text(f"{C}-bench2.log")
        for workload, ratio in (("gpt2_fp32", "0.998"), ("gpt2_bf16_varlen", "0.998"), ("resnet50_amp", "0.995"),
                                ("llama_1b", "0.997"), ("alternating", "1.002")):
            self.assertRegex(log, rf"{workload} +median within 2% of native +yes +x{ratio}")
        self.assertRegex(log, r"alternating +median within 2% of native +yes +x1\.002 \(gpt2_fp32 x1\.001, "
                              r"resnet50_amp x1\.000\)")
        for workload in ("gpt2_bf16_varlen", "resnet50_amp"):
            self.assertRegex(log, rf"{workload} +first step <= expandable +NO ")
        for workload in ("gpt2_fp32", "llama_1b", "alternating"):
            self.assertRegex(log, rf"{workload} +first step <= expandable +yes ")
        memory = {w: tuple(round(statistics.median(driver_timer.memory_ms(p["first_step_driver_calls"])
                                                   for p in processes(w, a)), 1) for a in ALLOCATORS)
                  for w in WORKLOADS}
        self.assertEqual(memory, {
            "gpt2_fp32": (11.7, 30.9, 22.9), "gpt2_bf16_varlen": (8.2, 20.8, 16.9), "resnet50_amp": (10.4, 15.2, 13.9),
            "llama_1b": (12.8, 18.2, 16.1), "alternating": (11.6, 31.4, 23.0)})
        self.assertEqual({w: {p["memcoord_first_step"]["pack_waits"] for p in processes(w, "memcoord")}
                          for w in WORKLOADS}, {w: {0} for w in WORKLOADS})

    def test_losses_within_native_spread(self):
        log = RUNS.text(f"{C}-bench1.log") + RUNS.text(f"{C}-bench2.log")
        for workload in WORKLOADS:
            self.assertRegex(log, rf"{workload} +losses within expandable's spread +yes ")
        for workload in ("resnet50_amp",):
            self.assertRegex(log, rf"{workload} +losses memcoord = native +yes +max \|diff\| 0 ")

    def test_resnet_first_steps_pooled_and_round_by_round(self):
        paths = bench_files(SINCE_GROW_TO_UNIT_END)
        self.assertEqual(sum("2026-12-07a" in p for p in paths), 5)
        new = [RUNS.file(n) for n in [BENCH1] + FIRSTSTEPS]  # this folder's ResNet-50 runs
        every = pooled.pooled([(p, pooled.load(p)) for p in paths])[0]
        these = pooled.pooled([(p, pooled.load(p)) for p in new])[0]

        def figures(s):
            return (s["runs"], round(s["shift_ms"]), s["memcoord_shorter"], s["pairs"], round(s["permutation_p"], 3),
                    tuple(round(x) for x in s["interval_ms"]))

        self.assertEqual(figures(these["resnet50_amp"]), (4, 1, 173, 369, 0.756, (-8, 15)))
        self.assertEqual(figures(every["resnet50_amp"]), (26, 4, 840, 1890, 0.095, (0, 10)))
        self.assertTrue(every["resnet50_amp"]["verdict"].startswith("not resolved"))
        others = ("gpt2_fp32", "gpt2_bf16_varlen", "llama_1b", "alternating")
        self.assertEqual({w: figures(every[w])[:5] for w in others},
                         {"gpt2_fp32": (3, -47, 23, 27, 0.011), "gpt2_bf16_varlen": (4, -24, 46, 57, 0.013),
                          "llama_1b": (6, -3, 50, 93, 0.662), "alternating": (8, 1, 64, 147, 0.602)})
        # Round by round: each round's memcoord process against that round's expandable process.
        self.assertEqual(step_rounds(pooled, paths, "resnet50_amp"), (204, 90, 3.5, 0.107))
        self.assertEqual(round(statistics.median(pooled.round_differences(new, "resnet50_amp")), 1), 1.4)

    def test_resnet_first_steps_extra_time_is_on_the_autograd_thread(self):
        # The runs that recorded each thread's CPU time in the first step (since 2026-12-06f), round by round:
        # PyTorch's autograd thread (the backward pass) took longer under memcoord in most rounds; the Python thread
        # (the forward pass and the optimizer) did not.
        paths = bench_files(SINCE_GROW_TO_UNIT_END)

        self.assertEqual(thread_rounds(pooled, paths, "resnet50_amp", "pt_autograd_0"), (154, 2.2, 61, 0.012))
        self.assertEqual(thread_rounds(pooled, paths, "resnet50_amp", "python3"), (154, 0.5, 74, 0.747))

    def test_firstprof_through_the_direct_shim(self):
        diff = RUNS.json(f"{C}-firstprof-kernels-diff.json")
        self.assertEqual(diff["differences"]["only_expandable"] + diff["differences"]["only_memcoord"], [])
        self.assertEqual(diff["differences"]["counts_apart"], {})
        self.assertEqual({a: (s["processes"], s["launches"], round(s["first_step_ms"]), round(s["gpu_ms"], 1))
                          for a, s in diff["summary"].items()},
                         {"expandable": (2, 3620.0, 696, 247.7), "memcoord": (2, 3620.0, 658, 248.8)})
        for i in (1, 2):
            self.assertIn("memcoord's Python functions during the step: 0, 0.0 ms",
                          RUNS.text(f"{C}-firstprof-memcoord-{i}.log"))


if __name__ == "__main__":
    unittest.main()
