"""The runs kept in bench/pytorch_runs/2026-12-06h against what README.md and that folder's README say of them:
each allocator's own cost replayed through torch.empty, ResNet-50's first step again and pooled with the runs
before it, bench1 at 1dc52e5, the checks, the abort, the trim and capi_bench."""

import os
import statistics
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
import kernels_diff  # noqa: E402
from pytorch_runs import RunFolder, bench_files, span  # noqa: E402

RUNS = RunFolder("2026-12-06h")
KERNELS = [f"1dc52e5-firstprof-{a}-{n}.kernels.json" for a in ("expandable", "memcoord") for n in (1, 2)]
# Every run since grow_to_unit_end: the stop before this one's fourteen, and this folder's firststep and bench1.
SINCE_GROW_TO_UNIT_END = [("2026-12-06c", ("bench", "firststep")),
                          ("2026-12-06d", ("firststep-a", "firststep-b", "firststep-c", "firststep-d")),
                          ("2026-12-06e", ("firststep",)), ("2026-12-06f", ("firststep",)),
                          ("2026-12-06g", ("firststep",)), ("2026-12-06h", ("firststep", "bench1.json"))]


def replays(trace, allocator):
    return [r for r in RUNS.json("1dc52e5-replaycost.json") if r["trace"] == trace and r["allocator"] == allocator]


def shift(summary):
    """(shift ms, memcoord shorter, pairs, permutation p to 0.01, interval ms) of one workload's pooled figures."""
    return (round(summary["shift_ms"]), summary["memcoord_shorter"], summary["pairs"],
            round(summary["permutation_p"], 2), tuple(round(x) for x in summary["interval_ms"]))


class Runs20261206hTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), sorted(KERNELS + ["README.md", "1dc52e5-replaycost.json",
            "1dc52e5-replaycost.log", "1dc52e5-capi_bench.json", "1dc52e5-capi_bench_pinned.json",
            "1dc52e5-firstprof-kernels-diff.json", "1dc52e5-firststep.json.gz", "1dc52e5-bench1.json.gz",
            "1dc52e5-bench1-bf16.json.gz", "1dc52e5-checks.log", "1dc52e5-abort.log", "1dc52e5-trim.log"]))

    def test_each_allocators_own_cost_replayed(self):
        quoted = {  # (trace, allocator): (cold ms, warm ms, cold passes' span)
            ("resnet50_amp", "expandable"): (44.1, 21.6, (31, 139)),
            ("resnet50_amp", "memcoord"): (45.0, 22.3, (33, 54)),
            ("gpt2_fp32", "expandable"): (59.4, 22.1, (49, 78)), ("gpt2_fp32", "memcoord"): (61.1, 21.7, (41, 74))}
        for (trace, allocator), (cold, warm, cold_span) in quoted.items():
            with self.subTest(trace=trace, allocator=allocator):
                runs = replays(trace, allocator)
                self.assertEqual(len(runs), 6)
                self.assertEqual(round(statistics.median(r["passes"][0]["ms"] for r in runs), 1), cold)
                self.assertEqual(round(statistics.median(r["passes"][1]["ms"] for r in runs), 1), warm)
                self.assertEqual(span([r["passes"][0]["ms"] for r in runs], 0), cold_span)
        warm = {t: span([r["passes"][1]["ms"] for a in ("expandable", "memcoord") for r in replays(t, a)])
                for t in ("resnet50_amp", "gpt2_fp32")}
        self.assertEqual(warm, {"resnet50_amp": (13.1, 29.2), "gpt2_fp32": (14.7, 36.4)})
        first = replays("resnet50_amp", "memcoord")[0]["passes"][0]
        beside = {k: first["driver"][k][0] for k in ("cudaEventRecord", "cudaEventQuery", "cudaSetDevice",
                                                      "cudaMemGetInfo", "cudaGetDevice")}
        self.assertEqual(beside, {"cudaEventRecord": 134, "cudaEventQuery": 134, "cudaSetDevice": 141,
                                  "cudaMemGetInfo": 1, "cudaGetDevice": 18234})
        self.assertEqual((first["pool"]["misses"], round(first["pool"]["miss_ms"], 1)), (127, 17.8))
        self.assertEqual(replays("resnet50_amp", "expandable")[0]["passes"][0]["driver"]["cudaGetDevice"][0], 18093)

    def test_the_same_kernels_under_both(self):
        records = [kernels_diff.load(RUNS.file(n)) for n in KERNELS]
        self.assertEqual({(len(r["kernels"]), sum(k["count"] for k in r["kernels"].values())) for r in records},
                         {(83, 814)})
        self.assertEqual(len({frozenset(r["kernels"]) for r in records}), 1)
        diff = RUNS.json("1dc52e5-firstprof-kernels-diff.json")["differences"]
        self.assertEqual((diff["only_expandable"], diff["only_memcoord"], diff["counts_apart"]), ([], [], {}))

    def test_resnet50s_first_step_in_this_folder(self):
        procs = RUNS.processes("1dc52e5-firststep.json.gz")
        firsts = {a: [p["first_step_ms"] for p in procs[("resnet50_amp", a)]] for a in ("expandable", "memcoord")}
        self.assertEqual({a: span(f, 0) for a, f in firsts.items()},
                         {"expandable": (637, 1035), "memcoord": (667, 908)})
        python_thread = [p["step_cpu"][0]["thread_ms"] for p in procs[("resnet50_amp", "expandable")]]
        self.assertEqual(span(python_thread, 0), (418, 700))
        path = RUNS.file("1dc52e5-firststep.json.gz")
        summary, _ = pooled.pooled([(path, pooled.load(path))])
        self.assertEqual(shift(summary["resnet50_amp"]), (-31, 39, 64, 0.58, (-150, 77)))
        bench = RUNS.processes("1dc52e5-bench1.json.gz")
        self.assertEqual({a: span([p["first_step_ms"] for p in bench[("resnet50_amp", a)]], 0)
                          for a in ("native", "expandable", "memcoord")},
                         {"native": (945, 1110), "expandable": (674, 792), "memcoord": (666, 1001)})

    def test_pooled_since_grow_to_unit_end(self):
        paths = bench_files(SINCE_GROW_TO_UNIT_END)
        self.assertEqual(sum("2026-12-06h" in p for p in paths), 2)
        summary, _ = pooled.pooled([(p, pooled.load(p)) for p in paths])
        s = summary["resnet50_amp"]
        # 10,000 random relabellings drawn in the order of the files' paths: p is quoted to 0.01.
        self.assertEqual(shift(s), (4, 265, 657, 0.07, (0, 12)))
        self.assertTrue(s["verdict"].startswith("not resolved"), s["verdict"])
        h100 = [p for p in paths if not p.endswith("650c2d7-firststep-a.json.gz")]  # the H200's run left out
        summary, _ = pooled.pooled([(p, pooled.load(p)) for p in h100])
        self.assertEqual(shift(summary["resnet50_amp"]), (4, 265, 641, 0.1, (0, 10)))

    def test_the_quietest_runs_gap_against_the_pools_miss_time(self):
        procs = RunFolder("2026-12-06g").processes("6b31db3-firststep.json.gz")
        mc, ex = procs[("resnet50_amp", "memcoord")], procs[("resnet50_amp", "expandable")]
        self.assertEqual([round(statistics.median(p["first_step_ms"] for p in r), 1) for r in (mc, ex)], [622.0, 620.1])
        miss = statistics.median(p["memcoord_first_step"]["miss_ms"] for p in mc)
        driver = statistics.median(sum(v[1] for k, v in p["first_step_driver_calls"].items() if k.startswith("cuMem"))
                                   for p in ex)
        self.assertEqual((round(miss, 2), round(driver, 2)), (17.01, 16.58))

    def test_bench1_at_1dc52e5(self):
        every = RUNS.processes("1dc52e5-bench1.json.gz")
        bf16 = RUNS.processes("1dc52e5-bench1-bf16.json.gz")
        device = {k: {p["device_bytes"] for p in v} for k, v in every.items() if k[1] != "native"}
        self.assertEqual(device[("gpt2_fp32", "memcoord")], device[("gpt2_fp32", "expandable")])
        self.assertEqual(device[("resnet50_amp", "memcoord")], {6350176256})
        self.assertEqual(device[("resnet50_amp", "expandable")], {6350176256})
        self.assertEqual(device[("gpt2_bf16_varlen", "memcoord")], {25262292992})
        self.assertEqual({p["device_bytes"] for p in bf16[("gpt2_bf16_varlen", "memcoord")]},
                         {25262292992, 25365053440})
        self.assertEqual({p["device_bytes"] for p in bf16[("gpt2_bf16_varlen", "expandable")]}, {26912751616})

        def ratio(procs, workload):
            med = {a: statistics.median(p["median_step_ms"] for p in procs[(workload, a)])
                   for a in ("native", "memcoord")}
            return round(med["memcoord"] / med["native"], 3)

        self.assertEqual([ratio(every, w) for w in ("gpt2_fp32", "resnet50_amp", "gpt2_bf16_varlen")],
                         [1.001, 1.005, 1.029])
        self.assertEqual(ratio(bf16, "gpt2_bf16_varlen"), 0.992)
        waits = [sum(s["pack_wait_ms"] for s in p["memcoord_steps"])
                 for procs in (every, bf16) for p in procs[("gpt2_bf16_varlen", "memcoord")]]
        self.assertEqual(span(waits, 0), (84, 112))
        steps = {i for procs in (every, bf16) for p in procs[("gpt2_bf16_varlen", "memcoord")]
                 for i, s in enumerate(p["memcoord_steps"]) if s["pack_waits"]}
        self.assertEqual(steps, {2, 13, 17, 20})

    def test_checks_abort_and_trim(self):
        RUNS.check_gpu_parts(self, "1dc52e5", abort_s="0.177", plain_s="0.430", trim_step=14, trim_gb="28.14")

    def test_capi_bench(self):
        capi = RUNS.capi_bench
        unpinned, pinned = capi("1dc52e5-capi_bench.json"), capi("1dc52e5-capi_bench_pinned.json")
        self.assertEqual([round(r[k]["median_ns_per_pair"], 1) for r in (unpinned, pinned)
                          for k in (("memcoord", 1), ("control", 1))], [83.7, 57.5, 84.1, 56.7])
        self.assertEqual((round(pinned[("memcoord", 4)]["median_cpu_ratio"], 3),
                          round(pinned[("control", 4)]["median_cpu_ratio"], 3)), (1.020, 1.036))
        self.assertEqual([round(pinned[("memcoord", t)]["peak_sums_per_million_pairs"], 1) for t in (1, 4)],
                         [0.5, 1302.8])


if __name__ == "__main__":
    unittest.main()
