"""The runs kept in bench/pytorch_runs/2026-12-07d against what README.md and that folder's README say of them:
ResNet-50's first step before and after 2696a5b's fewer free-memory readings (the per-thread driver timer, a
profile, five firststep runs and where their threads ran), the GPU tests on both libraries, and the pool of every
run since grow_to_unit_end."""

import os
import re
import sys
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files, pool_figures, span, step_rounds, thread_rounds  # noqa: E402
from test_runs_2026_12_07a import SINCE_GROW_TO_UNIT_END as BEFORE  # noqa: E402

RUNS = RunFolder("2026-12-07d")
OLD, NEW, TREE = "9061b7a", "2696a5b", "24e3c9d"
STEPS = {"a": OLD, "b": NEW, "c": TREE, "d": TREE, "e": TREE, "f": "ca81233"}
W = "resnet50_amp"


def firststep(run):
    return f"{STEPS[run]}-firststep-{run}"


def figures(paths):
    return pool_figures(pooled, paths, W, digits=1)


def rounds(paths):
    return step_rounds(pooled, paths, W)


class Runs20261207dTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        steps = [f"{firststep(r)}.{e}" for r in STEPS for e in ("json.gz", "log")]
        prof = [f"{NEW}-firstprof-{a}-{n}.kernels.json.gz" for a in ("expandable", "memcoord") for n in (1, 2, 3)]
        prof += [f"{NEW}-firstprof-call.log", f"{NEW}-firstprof-kernels-diff.json"]
        gtests = [f"{c}-{name}" for c in (OLD, NEW) for name in (
            "allocator_gpu_tests.log", "worker_c_abi_gpu_tests.log", "gtests-capi_bench.json",
            "gtests-capi_bench_pinned.json")]
        self.assertEqual(RUNS.names(), sorted(["README.md", f"{TREE}-cpu_counters.log"] + steps + prof + gtests))

    def test_the_per_thread_driver_timer_before_the_change(self):
        procs = RUNS.processes(f"{firststep('a')}.json.gz")
        mc, ex = procs[(W, "memcoord")], procs[(W, "expandable")]

        def calls(runs, thread):
            return ({p["first_step_driver_threads"][thread][0] for p in runs},
                    span([p["first_step_driver_threads"][thread][1] for p in runs], 2))

        self.assertEqual(calls(mc, "python3"), ({652}, (13.0, 18.94)))
        self.assertEqual(calls(ex, "python3"), ({646}, (14.44, 22.16)))
        self.assertEqual(calls(mc, "pt_autograd_0"), ({23}, (1.08, 1.43)))
        self.assertEqual(calls(ex, "pt_autograd_0"), ({21}, (0.95, 1.24)))
        for p in mc:
            c = p["first_step_driver_calls"]
            self.assertEqual([c[k][0] for k in ("cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
                                                "cuMemRelease")], [287, 287, 97, 2, 2])
        for p in ex:
            c = p["first_step_driver_calls"]
            self.assertEqual([c[k][0] for k in ("cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap")],
                             [285, 285, 97, 0])

    def test_gtests_on_both_libraries(self):
        for commit, figures in ((OLD, (72.0, {"0": 1.0, "1": 0.99, "2": 0.997, "3": 0.977}, 0.997, 19, 45, 1.0)),
                                (NEW, (41.6, {"0": 0.987, "1": 1.026, "2": 1.003, "3": 1.008}, 1.008, 44, 57, 1.043))):
            self.assertIn("[  PASSED  ] 23 tests.", RUNS.text(f"{commit}-allocator_gpu_tests.log"))
            self.assertIn("[  SKIPPED ] 1 test", RUNS.text(f"{commit}-allocator_gpu_tests.log"))
            self.assertIn("[  PASSED  ] 8 tests.", RUNS.text(f"{commit}-worker_c_abi_gpu_tests.log"))
            bench = RUNS.capi_bench(f"{commit}-gtests-capi_bench_pinned.json")
            one, four = bench[("memcoord", 1)], bench[("memcoord", 4)]
            ratios = {c: round(x, 3) for c, x in four["cpu_ratio"].items()}
            self.assertEqual((round(one["median_ns_per_pair"], 1), ratios,
                              round(four["median_cpu_ratio"], 3), four["disturbed_threads"],
                              round(four["peak_sums_per_million_pairs"]),
                              round(bench[("control", 4)]["median_cpu_ratio"], 3)), figures)

    def test_the_profile_after_the_change_reads_the_device_never_in_the_step(self):
        def threads(allocator, n):
            return RUNS.json(f"{NEW}-firstprof-{allocator}-{n}.kernels.json.gz")["threads"]

        def op(allocator, thread, name, field="self_ms"):
            return [threads(allocator, n)[thread]["ops"].get(name, {}).get(field, 0) for n in (1, 2, 3)]

        for thread in ("python", "autograd"):
            self.assertEqual(op("memcoord", thread, "cudaMemGetInfo", "count"), [0, 0, 0])
        self.assertEqual(op("memcoord", "python", "cudaStreamIsCapturing", "count"), [105] * 3)
        self.assertEqual(op("memcoord", "autograd", "cudaStreamIsCapturing", "count"), [37, 42, 33])
        self.assertEqual(op("expandable", "autograd", "aten::empty_strided"), [0.741, 0.982, 0.808])
        self.assertEqual(op("memcoord", "autograd", "aten::empty_strided"), [1.49, 1.663, 1.019])
        self.assertEqual([round(threads("memcoord", n)["autograd"]["self_ms"]) for n in (1, 2, 3)], [341, 337, 230])
        self.assertEqual(round(min(threads("expandable", n)["autograd"]["self_ms"] for n in (1, 2, 3))), 241)
        call = RUNS.text(f"{NEW}-firstprof-call.log")
        self.assertIn("expandable: self CPU by thread: autograd 275.0 ms, python 523.1 ms (medians)", call)
        self.assertIn("memcoord: self CPU by thread: autograd 337.5 ms, python 481.0 ms (medians)", call)

    def test_the_five_firststep_runs(self):
        table = {"a": (759, 708, 19, 15.5, 16.1), "b": (749, 684, 11, 15.8, 16.8), "c": (586, 570, 15, 13.2, 14.2),
                 "d": (650, 663, 39, 14.5, 16.5), "e": (628, 623, 32, 14.2, 15.2), "f": (685, 608, 3, 14.4, 15.0)}
        for run, (mc, ex, shorter, mc_calls, ex_calls) in table.items():
            log = RUNS.text(f"{firststep(run)}.log")
            self.assertRegex(log, rf"first step <= expandable +(yes|NO) +{mc} vs {ex} ms")
            self.assertIn(f"memcoord's shorter in {shorter} of {16 if run == 'f' else 64}", log)
            self.assertIn(f"{mc_calls} vs {ex_calls} ms of memory calls", log)
        d = RUNS.text(f"{firststep('d')}.log")
        self.assertRegex(d, r"resnet50_amp +memcoord\[thread_cache:0\] +(\S+ +){5}714 ")
        self.assertRegex(d, r"resnet50_amp +expandable\+memcoord +(\S+ +){5}654 ")
        f = RUNS.processes(f"{firststep('f')}.json.gz")
        narrow = "memcoord[address_range:40GiB]"
        self.assertRegex(RUNS.text(f"{firststep('f')}.log"),
                         r"resnet50_amp +memcoord\[address_range:40GiB\] +(\S+ +){5}681 ")
        self.assertEqual([round(p["first_step_threads"]["pt_autograd_0"]) for p in f[(W, narrow)]],
                         [262, 291, 269, 300])
        self.assertEqual(sorted(round(p["first_step_threads"]["pt_autograd_0"]) for p in f[(W, "memcoord")]),
                         [215, 265, 299, 304])
        self.assertEqual(sorted(round(p["first_step_threads"]["pt_autograd_0"]) for p in f[(W, "expandable")]),
                         [211, 217, 221, 296])
        self.assertEqual({p["first_step_places"]["pt_autograd_0"]["cpu"] for runs in f.values() for p in runs}, {4})

    def test_where_the_threads_ran_and_the_allocators_own_figures(self):
        c = RUNS.processes(f"{firststep('c')}.json.gz")
        autograd_cpus = [p["first_step_places"]["pt_autograd_0"]["cpu"] for runs in c.values() for p in runs]
        self.assertEqual(autograd_cpus.count(5), 15)
        self.assertEqual(len(autograd_cpus), 16)

        def autograd(procs, allocator):
            return sorted(round(p["first_step_threads"]["pt_autograd_0"]) for p in procs[(W, allocator)])

        self.assertEqual(autograd(c, "expandable"), [175, 189, 189, 196, 197, 197, 203, 212])
        self.assertEqual(autograd(c, "memcoord"), [182, 196, 200, 209, 209, 238, 273, 295])
        d = RUNS.processes(f"{firststep('d')}.json.gz")
        self.assertEqual({p["first_step_places"]["pt_autograd_0"]["cpu"] for runs in d.values() for p in runs}, {7})
        self.assertEqual(sum(len(runs) for runs in d.values()), 32)
        self.assertEqual(autograd(d, "expandable")[-3:], [300, 310, 318])
        waits = [w["wait_ms"] for r in "cde" for runs in RUNS.processes(f"{firststep(r)}.json.gz").values()
                 for p in runs for w in p["first_step_places"].values()]
        self.assertEqual(max(waits), 0.1)
        memcoord = [p["memcoord_first_step"] for r in STEPS
                    for p in RUNS.processes(f"{firststep(r)}.json.gz")[(W, "memcoord")]]
        self.assertEqual(len(memcoord), 44)
        self.assertEqual({(m["misses"], m["units_mapped"], m["units_unmapped"], m["other_thread_frees"],
                           m.get("pack_waits", 0)) for m in memcoord}, {(97, 287, 2, 430, 0)})

    def test_no_cpu_counters_on_the_device(self):
        why = ("perf_event_open: no such hardware counter here (No such file or directory) "
               "(perf_event_paranoid 2)")
        self.assertIn(why, RUNS.text(f"{TREE}-cpu_counters.log"))
        for r in "cde":
            for runs in RUNS.processes(f"{firststep(r)}.json.gz").values():
                for p in runs:
                    self.assertEqual(p["first_step_counters"], {"unavailable": why})

    def test_the_pools(self):
        new = bench_files([("2026-12-07d", ("firststep",))])
        self.assertEqual(figures(new), (6, 29.6, 119, 336, 0.03, [5.4, 50.3]))
        after = bench_files([("2026-12-07d", (f"{NEW}-firststep", f"{TREE}-firststep", "ca81233-firststep"))])
        self.assertEqual(figures(after), (5, 25.0, 100, 272, 0.083, [2.6, 45.4]))
        self.assertEqual(rounds(new), (44, 12, 32.7, 0.004))
        self.assertEqual(thread_rounds(pooled, new, W, "pt_autograd_0"), (44, 16.2, 13, 0.01))
        self.assertEqual(thread_rounds(pooled, new, W, "python3"), (44, 16.3, 13, 0.01))
        every = bench_files(BEFORE + [("2026-12-07c", ("firststep",)), ("2026-12-07d", ("firststep",))])
        self.assertEqual(figures(every), (34, 5.6, 1022, 2354, 0.02, [1.1, 12.3]))
        self.assertEqual(rounds(every), (264, 110, 6.4, 0.008))
        self.assertEqual(thread_rounds(pooled, every, W, "pt_autograd_0"), (214, 3.6, 81, 0.0))
        self.assertEqual(thread_rounds(pooled, every, W, "python3"), (214, 1.5, 96, 0.17))
        self.assertTrue(re.search(r"\+5\.6 ms \[\+1\.1, \+12\.3\]", RUNS.text("README.md")))


if __name__ == "__main__":
    unittest.main()
