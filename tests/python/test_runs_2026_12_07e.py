"""The runs kept in bench/pytorch_runs/2026-12-07e against what README.md and that folder's README say of them:
steps after empty_cache() (bench_allocators.py --cold-steps) with 20 and 40 MiB units, bench1 and bench2 with the
40 MiB units that grow by 20 MiB (e5e6152), its GPU tests, and ResNet-50's first steps pooled with every run since
grow_to_unit_end."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import bench_allocators as bench  # noqa: E402
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files, pool_figures, span, target_detail  # noqa: E402
from test_runs_2026_12_07a import SINCE_GROW_TO_UNIT_END as BEFORE  # noqa: E402

RUNS = RunFolder("2026-12-07e")
OLD, NEW = "5271b8e", "e5e6152"
W = "resnet50_amp"
VARIANT = "memcoord[large_map_unit:40MiB]"


def cold_medians(runs):
    return span([statistics.median(s["ms"] for s in p["cold_steps"]) for p in runs], 2)


class Runs20261207eTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        names = [f"{OLD}-firststep-a.json.gz", f"{OLD}-firststep-a.log", "README.md"]
        names += [f"{NEW}-{n}" for n in ("bench1.json.gz", "bench1.log", "bench2.json.gz", "bench2.log",
                                          "allocator_gpu_tests.log", "worker_c_abi_gpu_tests.log",
                                          "gtests-capi_bench.json", "gtests-capi_bench_pinned.json")]
        self.assertEqual(RUNS.names(), sorted(names))

    def test_cold_steps_with_20_and_40_mib_units(self):
        procs = RUNS.processes(f"{OLD}-firststep-a.json.gz")
        self.assertEqual({p["device_bytes"] for a in ("expandable", "memcoord", VARIANT) for p in procs[(W, a)]},
                         {6350176256})
        self.assertEqual({p["device_bytes"] for p in procs[(W, "native")]}, {7073693696})
        self.assertEqual(cold_medians(procs[(W, "native")]), (34.99, 47.33))
        self.assertEqual(cold_medians(procs[(W, "expandable")]), (39.08, 53.68))
        self.assertEqual(cold_medians(procs[(W, "memcoord")]), (38.97, 48.13))
        self.assertEqual(cold_medians(procs[(W, VARIANT)]), (33.97, 46.95))
        for allocator, units in (("memcoord", (279, 90)), (VARIANT, (140, 73))):
            self.assertEqual({(s["memcoord"]["units_mapped"], s["memcoord"]["misses"])
                              for p in procs[(W, allocator)] for s in p["cold_steps"]}, {units})
        driver = {a: span([statistics.median(s["driver"][1] for s in p["cold_steps"]) for p in procs[(W, a)]], 2)
                  for a in ("memcoord", VARIANT)}
        self.assertEqual(driver, {"memcoord": (11.12, 14.02), VARIANT: (7.09, 9.81)})
        first = {a: span([bench.driver_timer.memory_ms(p["first_step_driver_calls"]) for p in procs[(W, a)]])
                 for a in ("expandable", "memcoord", VARIANT)}
        self.assertEqual(first, {"expandable": (14.9, 22.9), "memcoord": (14.1, 20.1), VARIANT: (8.6, 12.5)})
        rising = [round(s["ms"], 1) for s in procs[(W, "memcoord")][0]["cold_steps"]]
        self.assertEqual((rising[0], max(rising)), (42.1, 59.4))
        self.assertEqual(target_detail(RUNS.json(f"{OLD}-firststep-a.json.gz"), W, "cold steps (after empty_cache)"),
                         "memcoord 44.39 ms, expandable 46.63 ms (medians over the processes of each one's median); "
                         "memcoord's shorter in 11 of 16 pairs; memory calls 12.49 against 14.83 ms a step (medians)")

    def test_bench1_and_bench2_with_the_new_units(self):
        b1, b2 = RUNS.json(f"{NEW}-bench1.json.gz"), RUNS.json(f"{NEW}-bench2.json.gz")
        rows = {(r["workload"], r["allocator"]): r for d in (b1, b2) for r in d["runs"]}
        device = {w: tuple({p["device_bytes"] for p in rows[(w, a)]["runs"]} for a in ("expandable", "memcoord"))
                  for w in ("gpt2_fp32", "gpt2_bf16_varlen", W, "llama_1b", "alternating")}
        self.assertEqual(device, {"gpt2_fp32": ({16078864384}, {16078864384}),
                                  "gpt2_bf16_varlen": ({26912751616}, {25442648064}),
                                  W: ({6350176256}, {6350176256}),
                                  "llama_1b": ({11100225536}, {10009706496}),
                                  "alternating": ({16313745408}, {16313745408})})
        cold = {"gpt2_fp32": ("186.92", "186.71", "1 of 4", "18.41 against 29.63"),
                "gpt2_bf16_varlen": ("163.92", "176.28", "3 of 4", "11.29 against 17.16"),
                W: ("38.86", "43.86", "4 of 4", "8.69 against 13.28"),
                "llama_1b": ("191.13", "188.06", "0 of 4", "7.89 against 11.45"),
                "alternating": ("116.80", "117.75", "2 of 4", "14.56 against 23.17")}
        driver = {"gpt2_fp32": "21.0 vs 29.9", "gpt2_bf16_varlen": "13.0 vs 21.1", W: "11.3 vs 16.4",
                  "llama_1b": "16.4 vs 19.3", "alternating": "24.1 vs 31.1"}
        for w, (mine, theirs, pairs, calls) in cold.items():
            document = b1 if w in b1["targets"] else b2
            self.assertEqual(target_detail(document, w, "cold steps (after empty_cache)"),
                             f"memcoord {mine} ms, expandable {theirs} ms (medians over the processes of each one's "
                             f"median); memcoord's shorter in {pairs} pairs; memory calls {calls} ms a step (medians)")
            self.assertEqual(target_detail(document, w, "first step's driver calls <= expandable's"),
                             f"{driver[w]} ms of memory calls")
        units = {(s["memcoord"]["units_mapped"], s["memcoord"]["misses"])
                 for p in rows[(W, "memcoord")]["runs"] for s in p["cold_steps"]}
        self.assertEqual(units, {(184, 90)})
        waits = [s["memcoord"]["pack_wait_ms"] for p in rows[("llama_1b", "memcoord")]["runs"] for s in p["cold_steps"]]
        self.assertEqual({s["memcoord"]["pack_waits"] for p in rows[("llama_1b", "memcoord")]["runs"]
                          for s in p["cold_steps"]}, {1})
        self.assertEqual(span(waits), (0.7, 16.9))
        self.assertEqual(target_detail(b2, "alternating", "median within 2% of native"),
                         "x1.006 (gpt2_fp32 x0.999, resnet50_amp x1.055)")
        resnet = [p["step_ms"][1::2][3:] for p in rows[("alternating", "memcoord")]["runs"]]
        self.assertEqual([span(r) for r in resnet], [(28.6, 31.5), (31.1, 35.0)])
        self.assertEqual(span(rows[("alternating", "memcoord")]["runs"][1]["step_ms"][0::2][1:]), (186.7, 189.5))
        self.assertIn("[  PASSED  ] 23 tests.", RUNS.text(f"{NEW}-allocator_gpu_tests.log"))
        self.assertIn("[  PASSED  ] 8 tests.", RUNS.text(f"{NEW}-worker_c_abi_gpu_tests.log"))

    def test_the_pool_of_first_steps(self):
        every = bench_files(BEFORE + [("2026-12-07c", ("firststep",)), ("2026-12-07d", ("firststep",)),
                                      ("2026-12-07e", ("firststep", "bench1"))])
        self.assertEqual(pool_figures(pooled, every, W, digits=1), (36, 5.6, 1033, 2374, 0.027, [1.3, 12.0]))
        self.assertIn("+5.6 ms [+1.3, +12.0]", RUNS.text("README.md"))


if __name__ == "__main__":
    unittest.main()
