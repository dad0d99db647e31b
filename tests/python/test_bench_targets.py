"""The side-by-side bench's own logic, without PyTorch or a GPU (examples/pytorch/bench_allocators.py): how
fresh-process runs combine into a row (median times, highest memory, native's own loss spread), which
targets hold, what --deterministic sets in the child and the environment a configuration runs under. Also
what the other PyTorch examples and run_on_h200.sh check before they touch a GPU: their options, and the
ranks' environment."""

import contextlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import types
import unittest
import warnings
from unittest import mock

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import bench_allocators as bench  # noqa: E402

GB = 10**9


def run(allocator, losses, median=100.0, first=500.0, device=10 * GB, workload="w"):
    return {"workload": workload, "allocator": allocator, "losses": list(losses), "median_step_ms": median,
            "first_step_ms": first, "device_bytes": device, "peak_reserved_bytes": device,
            "peak_allocated_bytes": device // 2}


def checks_of(rows, tolerance=0.0):
    return {name: (held, detail) for name, held, detail in bench.targets(rows, tolerance)["w"]}


class SummaryTest(unittest.TestCase):
    def test_loss_diff_is_the_largest_step_difference_and_infinite_across_lengths(self):
        self.assertAlmostEqual(bench.loss_diff([1.0, 2.5, 3.0], [1.0, 2.0, 3.25]), 0.5)
        self.assertEqual(bench.loss_diff([], []), 0.0)
        self.assertEqual(bench.loss_diff([1.0], [1.0, 2.0]), float("inf"))

    def test_driver_summary_names_misses_waits_and_their_time(self):
        line = bench.driver_summary({"misses": 12, "miss_ms": 3.25, "units_mapped": 30, "units_unmapped": 4,
                                     "pack_waits": 2, "pack_wait_ms": 1.5, "pack_stream_syncs": 0, "pack_drains": 1,
                                     "markers": 40, "deferred_markers": 3, "idle_cache_flushes": 31})
        self.assertEqual(line, "12 misses (3.2 ms), 30 units mapped, 4 unmapped, 2 packing waits (1.5 ms; 0 of "
                               "them whole-stream, 1 for a miss's own marker), 40 markers (3 deferred), 31 idle "
                               "thread caches flushed")

    def test_step_figures_leave_out_drains_and_markers_they_do_not_hold(self):
        line = bench.driver_summary({"misses": 2, "miss_ms": 0.5, "units_mapped": 3, "units_unmapped": 0,
                                     "pack_waits": 1, "pack_wait_ms": 40.0, "pack_stream_syncs": 0})
        self.assertEqual(line, "2 misses (0.5 ms), 3 units mapped, 0 unmapped, 1 packing waits (40.0 ms; 0 of them "
                               "whole-stream)")


class StepFiguresTest(unittest.TestCase):
    """memcoord_step_figures() on the package's host backend: the pools' counters, as the snapshot counts them."""

    def test_step_figures_are_the_snapshots_counters(self):
        import support  # noqa: F401  (the host backend, before memcoord starts)
        import memcoord

        memcoord.init()
        before = bench.memcoord_step_figures()
        ptr = memcoord.alloc(64 << 20, device=0)  # a miss: the pool maps units
        memcoord.free(ptr, device=0)
        after = bench.memcoord_step_figures()
        step = bench.figures_since(before, after)
        self.assertGreaterEqual(step["misses"], 1)
        self.assertGreaterEqual(step["units_mapped"], 1)
        self.assertGreater(step["miss_ms"], 0.0)
        # The same counters as the snapshot's pools report them (memcoord_snapshot_json, another C path).
        pools = [pool.get("stats", {}) for document in memcoord._snapshot_documents([0])
                 for pool in document.get("pools", [])]
        names = {"misses": "misses", "units_mapped": "backend_allocations", "units_unmapped": "backend_frees",
                 "pack_waits": "pack_waits", "pack_stream_syncs": "pack_stream_syncs"}
        for key, name in names.items():
            self.assertEqual(after[key], sum(p.get(name, 0) for p in pools), key)
        self.assertAlmostEqual(after["miss_ms"], sum(p.get("miss_ns", 0) for p in pools) / 1e6, places=6)
        whole = bench.memcoord_driver_figures()  # the counters, plus drains and markers from the snapshot
        self.assertEqual(whole["misses"], after["misses"])
        self.assertEqual(whole["markers"], sum(p.get("markers", 0) for p in pools))
        self.assertEqual(whole["idle_cache_flushes"], sum(p["idle_cache_flushes"] for p in pools))  # a key of each
        self.assertNotIn("markers", after)


class LaterStepsTest(unittest.TestCase):
    def test_later_steps_sum_every_step_but_the_first(self):
        run = {"step_driver": [[10, 5.0], [2, 0.5], [3, 0.25]],
               "memcoord_steps": [{"misses": 5, "miss_ms": 9.0},
                                  {"misses": 2, "miss_ms": 1.0, "pack_waits": 1, "pack_wait_ms": 40.0},
                                  {"misses": 1, "miss_ms": 0.5, "pack_waits": 0, "pack_wait_ms": 0.0}]}
        self.assertEqual(bench.later_steps(run), "5 memory calls (0.8 ms), 3 misses (1.5 ms), 1 packing waits (40.0 ms)")

    def test_a_run_without_timer_or_memcoord_says_nothing(self):
        self.assertIsNone(bench.later_steps({"step_driver": [], "step_ms": [1.0, 2.0]}))
        self.assertEqual(bench.later_steps({"step_driver": [[4, 2.0], [1, 0.125]]}), "1 memory calls (0.1 ms)")

    def test_combine_keeps_each_processs_steps(self):
        a = run("memcoord", [1.0])
        a["step_driver"] = [[1, 1.0], [2, 2.0]]
        a["memcoord"] = {"steps": [{"misses": 1}, {"misses": 2}]}
        a["first_step_driver_threads"] = {"python3": [90, 10.5], "pt_autograd_0": [40, 4.25]}
        row = bench.combine([a, run("memcoord", [1.0])])
        self.assertEqual(row["runs"][0]["step_driver"], [[1, 1.0], [2, 2.0]])
        self.assertEqual(row["runs"][0]["first_step_driver_threads"],
                         {"python3": [90, 10.5], "pt_autograd_0": [40, 4.25]})
        self.assertIsNone(row["runs"][1]["first_step_driver_threads"])
        self.assertEqual(row["runs"][0]["memcoord_steps"], [{"misses": 1}, {"misses": 2}])
        self.assertNotIn("memcoord_steps", row["runs"][1])


class CombineTest(unittest.TestCase):
    def test_times_are_medians_memory_the_highest_and_the_loss_spread_kept(self):
        row = bench.combine([run("native", [2.0, 1.5], median=100, first=900, device=5 * GB),
                             run("native", [2.0, 1.5004], median=110, first=700, device=6 * GB),
                             run("native", [2.0, 1.5], median=105, first=800, device=4 * GB)])
        self.assertEqual(row["median_step_ms"], 105)
        self.assertEqual(row["first_step_ms"], 800)
        self.assertEqual(row["device_bytes"], 6 * GB)
        self.assertAlmostEqual(row["own_loss_spread"], 0.0004, places=9)
        self.assertEqual(len(row["runs"]), 3)

    def test_each_processs_own_first_step_figures_are_kept(self):
        a, b = run("memcoord", [1.0]), run("memcoord", [1.0])
        a["memcoord"] = {"first_step": {"misses": 3, "pack_waits": 1}}
        b["memcoord"] = {"first_step": {"misses": 5, "pack_waits": 0}}
        row = bench.combine([a, b, run("memcoord", [1.0])])
        self.assertEqual([r.get("memcoord_first_step") for r in row["runs"]],
                         [{"misses": 3, "pack_waits": 1}, {"misses": 5, "pack_waits": 0}, None])

    def test_first_step_figures_leave_out_what_came_before_it(self):
        before = {"misses": 40, "miss_ms": 10.5, "pack_waits": 1}
        after = {"misses": 140, "miss_ms": 33.25, "pack_waits": 1}
        self.assertEqual(bench.figures_since(before, after), {"misses": 100, "miss_ms": 22.75, "pack_waits": 0})

    def test_one_run_has_no_spread_and_a_failed_run_is_counted(self):
        self.assertNotIn("own_loss_spread", bench.combine([run("native", [1.0])]))
        row = bench.combine([run("memcoord", [1.0]), {"workload": "w", "allocator": "memcoord", "error": "x"}])
        self.assertEqual(row["failed_runs"], 1)


class TargetsTest(unittest.TestCase):
    def test_every_target_held(self):
        checks = checks_of([run("native", [3.0, 2.0]), run("expandable", [3.0, 2.0], device=9 * GB),
                            run("memcoord", [3.0, 2.0], median=101.0, first=450.0, device=9 * GB)])
        for name in ("device <= expandable", "first step <= expandable", "median within 2% of native",
                     "losses memcoord = native", "losses expandable = native"):
            self.assertTrue(checks[name][0], name)
        self.assertEqual(checks["median within 2% of native"][1], "x1.010")

    def test_each_miss_is_named(self):
        checks = checks_of([run("native", [3.0, 2.0]), run("expandable", [3.0, 2.0], device=9 * GB, first=400),
                            run("memcoord", [3.0, 2.0001], median=103.0, first=450.0, device=9 * GB + 1)])
        self.assertFalse(checks["device <= expandable"][0])
        self.assertFalse(checks["first step <= expandable"][0])
        self.assertFalse(checks["median within 2% of native"][0])
        self.assertFalse(checks["losses memcoord = native"][0])  # bit for bit unless a tolerance is given
        self.assertTrue(checks_of([run("native", [2.0]), run("memcoord", [2.0001])], 1e-3)
                        ["losses memcoord = native"][0])

    def test_deterministic_runs_are_judged_on_their_losses_alone(self):
        rows = [run("native", [3.0, 2.0]), run("expandable", [3.0, 2.0], device=9 * GB, first=400),
                run("memcoord", [3.0, 2.0001], median=103.0, first=450.0, device=9 * GB + 1)]
        for row in rows:
            row["deterministic"] = True
        checks = checks_of(rows)
        self.assertEqual(set(checks), {"losses expandable = native", "losses memcoord = native",
                                       "losses within expandable's spread"})
        self.assertFalse(checks["losses memcoord = native"][0])  # a loss that differs still fails
        rows[2]["losses"] = [3.0, 2.0]
        self.assertTrue(all(held for held, _ in checks_of(rows).values()))
        rows[0].pop("deterministic")  # a mix of deterministic and not: every target, as before
        self.assertIn("device <= expandable", checks_of(rows))

    def test_a_shorter_loss_list_never_counts_as_equal(self):
        checks = checks_of([run("native", [3.0, 2.0]), run("memcoord", [3.0])])
        self.assertFalse(checks["losses memcoord = native"][0])

    def test_native_spread_is_reported_not_a_target(self):
        native = bench.combine([run("native", [2.0, 1.0]), run("native", [2.0, 1.001])])
        checks = checks_of([native, run("memcoord", [2.0, 1.0])])
        self.assertIn("native's own loss spread", checks)
        self.assertIn("native's own loss spread", bench.INFORMATIONAL)
        self.assertIn("2 native processes", checks["native's own loss spread"][1])

    def test_first_steps_of_each_process_are_reported_not_a_target(self):
        rows = [bench.combine([run(a, [2.0], first=f) for f in firsts])
                for a, firsts in (("native", (700, 500)), ("expandable", (480, 440)), ("memcoord", (470, 490)))]
        checks = checks_of(rows)
        self.assertIn("first steps per process", bench.INFORMATIONAL)
        self.assertEqual(checks["first steps per process"][1],
                         "native 700, 500; expandable 480, 440; memcoord 470, 490 ms")
        self.assertFalse(checks["first step <= expandable"][0])  # medians: 480 against 460
        self.assertNotIn("first steps per process", checks_of([run("native", [2.0]), run("memcoord", [2.0])]))

    def test_first_steps_are_also_counted_over_pairs_of_processes_not_a_target(self):
        rows = [bench.combine([run(a, [2.0], first=f) for f in firsts])
                for a, firsts in (("native", (700, 500)), ("expandable", (480, 440, 600)),
                                  ("memcoord", (470, 490, 440, 900)))]
        checks = checks_of(rows)
        name = "first steps, pairs of processes"
        self.assertIn(name, bench.INFORMATIONAL)
        # 470 beats 480 and 600; 490 beats 600; 440 ties 440 and beats 480 and 600; 900 beats none.
        self.assertEqual(checks[name], (True, "memcoord's shorter in 5 of 12 (memcoord, expandable) pairs, equal "
                                              "in 1 (equal first steps: 6)"))
        # The target holds on the medians (480 against 480) while memcoord's first step is the shorter in fewer
        # than half the pairs: the two figures answer different questions, and both are printed.
        self.assertTrue(checks["first step <= expandable"][0])
        one_each = checks_of([run("native", [2.0]), run("expandable", [2.0]), run("memcoord", [2.0])])
        self.assertNotIn(name, one_each)  # one process each: a single pair says no more than the target

    def test_first_step_driver_calls_are_compared_by_their_median_not_a_target(self):
        def timed(allocator, first_step_ms_of_calls):
            runs = []
            for ms in first_step_ms_of_calls:
                r = run(allocator, [2.0])
                # memory calls count, the event query beside them does not
                r["first_step_driver_calls"] = {"cuMemCreate": [100, ms / 4], "cuMemSetAccess": [100, 3 * ms / 4],
                                                "cudaEventQuery": [50, 100.0]}
                runs.append(r)
            return bench.combine(runs)

        rows = [timed("native", (10.0, 12.0)), timed("expandable", (40.0, 30.0, 36.0)),
                timed("memcoord", (37.0, 41.0, 35.0))]
        checks = checks_of(rows)
        name = "first step's driver calls <= expandable's"
        self.assertIn(name, bench.INFORMATIONAL)
        self.assertEqual(checks[name], (False, "37.0 vs 36.0 ms of memory calls"))
        # Without the timer (or with one process untimed) there is nothing to compare.
        self.assertNotIn(name, checks_of([run("native", [2.0]), run("expandable", [2.0]), run("memcoord", [2.0])]))
        untimed = run("memcoord", [2.0])
        self.assertNotIn(name, checks_of([rows[1], bench.combine([untimed, untimed])]))

    def test_first_step_cpu_work_is_set_side_by_side_not_a_target(self):
        def counted(allocator, pairs):
            runs = []
            for instructions, cycles in pairs:
                r = run(allocator, [2.0])
                r["first_step_counters"] = {"instructions": instructions, "cycles": cycles}
                runs.append(r)
            return bench.combine(runs)

        rows = [run("native", [2.0]), counted("expandable", ((2.0e9, 2.4e9), (2.2e9, 2.2e9))),
                counted("memcoord", ((2.1e9, 3.15e9), (2.1e9, 2.52e9), (2.3e9, 2.3e9)))]
        name = "first step's CPU work (perf counters)"
        self.assertIn(name, bench.INFORMATIONAL)
        self.assertEqual(checks_of(rows)[name], (True, "memcoord 2.100 G instructions, 1.200 cycles each; expandable "
                                                       "2.100 G instructions, 1.100 cycles each (medians over the "
                                                       "processes)"))
        self.assertNotIn(name, checks_of([rows[0], rows[1], run("memcoord", [2.0])]))

    def test_cold_steps_are_set_side_by_side_not_a_target(self):
        def cold(allocator, per_process):
            runs = []
            for times in per_process:
                r = run(allocator, [2.0])
                r["cold_steps"] = [{"ms": ms, "threads": {"python3": ms / 2}, "driver": [300, ms / 10]} for ms in times]
                runs.append(r)
            return bench.combine(runs)

        # memcoord's processes' medians 41 and 45, expandable's 40, 42 and 50: 43 against 42, shorter in 3 of 6.
        rows = [run("native", [2.0]), cold("expandable", ((40.0, 39.0, 41.0), (42.0, 60.0, 41.0), (50.0, 50.0, 51.0))),
                cold("memcoord", ((41.0, 40.0, 42.0), (45.0, 45.0, 45.0)))]
        name = "cold steps (after empty_cache)"
        self.assertIn(name, bench.INFORMATIONAL)
        self.assertEqual(checks_of(rows)[name], (
            True, "memcoord 43.00 ms, expandable 42.00 ms (medians over the processes of each one's median); "
                  "memcoord's shorter in 3 of 6 pairs; memory calls 4.35 against 4.20 ms a step (medians)"))
        # Not when either side ran none.
        self.assertNotIn(name, checks_of([rows[0], rows[1], run("memcoord", [2.0])]))
        self.assertNotIn(name, checks_of([rows[0], run("expandable", [2.0]), rows[2]]))
        # A process's line says what its cold steps took, its threads' run time among them.
        process = run("memcoord", [2.0])
        process["cold_steps"] = rows[2]["runs"][1]["cold_steps"]
        line = bench.process_line(process)
        self.assertIn("3 cold steps: median 45.00 ms (threads' python3 22.5), memory calls 300 in 4.50 ms", line)

    def test_cold_steps_empty_the_cache_before_each_step_and_time_it(self):
        calls = []
        cuda = types.SimpleNamespace(synchronize=lambda: calls.append("sync"),
                                     empty_cache=lambda: calls.append("empty"))
        workload = types.SimpleNamespace(step=lambda i: calls.append(("step", i)))
        steps = bench.cold_steps(types.SimpleNamespace(cuda=cuda), workload, "expandable", 8, 2)
        self.assertEqual(calls, ["sync", "empty", ("step", 8), "sync", "sync", "empty", ("step", 9), "sync"])
        self.assertEqual(len(steps), 2)
        for step in steps:
            self.assertGreaterEqual(step["ms"], 0.0)
            self.assertIsInstance(step["threads"], dict)
            self.assertNotIn("memcoord", step)  # not memcoord's process
            self.assertNotIn("driver", step)  # no timer loaded here

    def test_driver_timer_flag_preloads_the_timer(self):
        recorded = {}

        def fake_run(command, capture_output, text, timeout, env, preexec_fn=None):
            recorded.update(env=env)
            return types.SimpleNamespace(stdout="RESULT " + json.dumps({"workload": "w", "losses": [1.0]}) + "\n",
                                         stderr="", returncode=0)

        real = bench.subprocess.run
        real_preload = os.environ.get("LD_PRELOAD")
        bench.subprocess.run = fake_run
        try:
            os.environ.pop("LD_PRELOAD", None)
            bench.run_config("w", "expandable", 3, 60, driver_timer_lib="timer.so")
            self.assertEqual(recorded["env"]["LD_PRELOAD"], os.path.abspath("timer.so"))
            os.environ["LD_PRELOAD"] = "/opt/other.so"  # what the user preloads stays, after the timer
            bench.run_config("w", "expandable", 3, 60, driver_timer_lib="timer.so")
            self.assertEqual(recorded["env"]["LD_PRELOAD"], os.path.abspath("timer.so") + ":/opt/other.so")
        finally:
            bench.subprocess.run = real
            os.environ.pop("LD_PRELOAD", None)
            if real_preload is not None:
                os.environ["LD_PRELOAD"] = real_preload

    def test_memory_calls_and_their_time_leave_the_calls_beside_out(self):
        figures = {"cuMemCreate": (3, 1.5), "cudaMalloc": (2, 4.0), "cudaMemGetInfo": (9, 7.0)}
        self.assertEqual(bench.driver_timer.memory_calls(figures), 5)
        self.assertEqual(bench.driver_timer.memory_ms(figures), 5.5)
        self.assertEqual(bench.driver_timer.memory_pair({"cuMemMap": (4, 1.23456), "cudaEventQuery": (9, 7.0)}, 2),
                         [4, 1.23])


class FakeTorch(types.SimpleNamespace):
    """The parts of torch that make_deterministic touches, recording what it set."""

    def __init__(self):
        calls = {}
        cuda = types.SimpleNamespace(
            enable_flash_sdp=lambda on: calls.__setitem__("flash", on),
            enable_mem_efficient_sdp=lambda on: calls.__setitem__("mem_efficient", on),
            enable_cudnn_sdp=lambda on: calls.__setitem__("cudnn_sdp", on))
        super().__init__(calls=calls, backends=types.SimpleNamespace(
            cudnn=types.SimpleNamespace(deterministic=False, benchmark=True), cuda=cuda))

    def use_deterministic_algorithms(self, on, warn_only=False):
        self.calls["deterministic"] = (on, warn_only)


class DeterministicTest(unittest.TestCase):
    def test_flags_set_and_nondeterministic_ops_collected_once(self):
        torch = FakeTorch()
        shown = warnings.showwarning
        try:
            seen = bench.make_deterministic(torch)
            for _ in range(2):  # warn_explicit without a registry shows each call: collected once all the same
                warnings.warn_explicit("scatter_add_cuda_kernel does not have a deterministic implementation",
                                       UserWarning, "x.py", 1)
            warnings.warn_explicit("an unrelated warning", UserWarning, "y.py", 2)
        finally:
            warnings.showwarning = shown
        self.assertEqual(torch.calls["deterministic"], (True, True))
        self.assertEqual((torch.calls["flash"], torch.calls["mem_efficient"], torch.calls["cudnn_sdp"]),
                         (False, False, False))
        self.assertTrue(torch.backends.cudnn.deterministic)
        self.assertFalse(torch.backends.cudnn.benchmark)
        self.assertEqual(seen, ["scatter_add_cuda_kernel does not have a deterministic implementation"])


class RunConfigTest(unittest.TestCase):
    """run_config's child command and environment, with subprocess.run replaced by a recorder."""

    def launch(self, allocator, deterministic=False, trace_dir=None, cpus=None, recorded=None):
        recorded = {} if recorded is None else recorded

        def fake_run(command, capture_output, text, timeout, env, preexec_fn):
            recorded.update(command=command, env=env, preexec_fn=preexec_fn)
            result = {"workload": "w", "allocator": allocator, "losses": [1.0]}
            return types.SimpleNamespace(stdout="noise\nRESULT " + json.dumps(result) + "\n", stderr="",
                                         returncode=0)

        real = bench.subprocess.run
        bench.subprocess.run = fake_run
        try:
            row = bench.run_config("w", allocator, 3, 60, trace_dir, deterministic, cpus=cpus)
        finally:
            bench.subprocess.run = real
        return row, recorded["command"], recorded["env"]

    def test_deterministic_reaches_the_child_and_cublas(self):
        row, command, env = self.launch("memcoord", deterministic=True)
        self.assertEqual(row["losses"], [1.0])
        self.assertIn("--deterministic", command)
        self.assertEqual(env["CUBLAS_WORKSPACE_CONFIG"], ":4096:8")
        _, command, env = self.launch("native")
        self.assertNotIn("--deterministic", command)
        self.assertNotIn("CUBLAS_WORKSPACE_CONFIG", env)
        self.assertNotIn("PYTORCH_CUDA_ALLOC_CONF", env)

    def test_cpus_pin_the_child_and_are_recorded(self):
        recorded = {}
        row, _, _ = self.launch("memcoord", recorded=recorded)
        self.assertIsNone(recorded["preexec_fn"])
        self.assertEqual(row["cpus"], "any")
        row, _, _ = self.launch("memcoord", cpus={0, 1, 2, 6}, recorded=recorded)
        self.assertTrue(callable(recorded["preexec_fn"]))
        self.assertEqual(row["cpus"], "0-2,6")

    def test_cold_steps_reach_the_child_only_when_asked(self):
        _, command, _ = self.launch("memcoord")
        self.assertNotIn("--cold-steps", command)
        recorded = {}
        real = bench.subprocess.run
        bench.subprocess.run = lambda command, **kw: (recorded.update(command=command), types.SimpleNamespace(
            stdout='RESULT {"workload": "w"}', stderr="", returncode=0))[1]
        try:
            bench.run_config("w", "expandable", 3, 60, cold=12)
        finally:
            bench.subprocess.run = real
        self.assertEqual(recorded["command"][-2:], ["--cold-steps", "12"])

    def test_each_allocator_gets_its_own_environment(self):
        _, _, env = self.launch("expandable")
        self.assertEqual(env["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True")
        _, _, env = self.launch("memcoord", trace_dir="/tmp/traces")
        self.assertEqual(env["MEMCOORD_TRACE_DIR"], "/tmp/traces/w")
        self.assertNotIn("PYTORCH_CUDA_ALLOC_CONF", env)


class VariantTest(unittest.TestCase):
    """memcoord[CONF]: memcoord under MEMCOORD_ALLOC_CONF=CONF beside the others; plain memcoord keeps the
    defaults users get, and only it is held to the targets."""

    def test_the_list_splits_at_commas_outside_a_variants_brackets(self):
        self.assertEqual(bench.split_allocators("native,memcoord,memcoord[thread_cache:0,large_map_unit:40MiB]"),
                         ["native", "memcoord", "memcoord[thread_cache:0,large_map_unit:40MiB]"])
        self.assertTrue(bench.is_memcoord("memcoord[thread_cache:0]"))
        self.assertTrue(bench.is_memcoord("memcoord"))
        self.assertFalse(bench.is_memcoord("memcoordish"))
        self.assertFalse(bench.is_memcoord("expandable"))

    def test_a_variant_runs_with_its_conf_and_plain_memcoord_with_none(self):
        launch = RunConfigTest.launch.__get__(self)
        saved = os.environ.get("MEMCOORD_ALLOC_CONF")
        os.environ["MEMCOORD_ALLOC_CONF"] = "thread_cache:4MiB"  # the caller's shell: not what users get
        try:
            _, command, env = launch("memcoord")
            self.assertNotIn("MEMCOORD_ALLOC_CONF", env)
            variant = "memcoord[thread_cache:0,large_map_unit:40MiB]"
            row, command, env = launch(variant, trace_dir="/tmp/traces")
            self.assertEqual(env["MEMCOORD_ALLOC_CONF"], "thread_cache:0,large_map_unit:40MiB")
            self.assertEqual(env["MEMCOORD_TRACE_DIR"], "/tmp/traces/w")
            self.assertIn(variant, command)
            self.assertEqual(row["allocator"], variant)
        finally:
            if saved is None:
                os.environ.pop("MEMCOORD_ALLOC_CONF", None)
            else:
                os.environ["MEMCOORD_ALLOC_CONF"] = saved

    def test_targets_read_plain_memcoord_only(self):
        base = [run("native", [3.0, 2.0]), run("expandable", [3.0, 2.0], device=9 * GB),
                run("memcoord", [3.0, 2.0], device=9 * GB)]
        worse = run("memcoord[thread_cache:0]", [9.0, 9.0], median=500.0, first=9000.0, device=99 * GB)
        self.assertEqual(checks_of(base + [worse]), checks_of(base))


class LoadedControlTest(unittest.TestCase):
    """expandable+memcoord: PyTorch's expandable segments in a process where memcoord runs beside it (what
    memcoord's presence costs apart from its allocations); no target reads it."""

    def test_the_control_runs_expandable_segments_without_memcoords_settings(self):
        launch = RunConfigTest.launch.__get__(self)
        row, command, env = launch(bench.LOADED_CONTROL, trace_dir="/tmp/traces")
        self.assertEqual(env["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True")
        self.assertNotIn("MEMCOORD_TRACE_DIR", env)  # its allocations are PyTorch's: nothing to record
        self.assertNotIn("MEMCOORD_ALLOC_CONF", env)
        self.assertIn(bench.LOADED_CONTROL, command)
        self.assertEqual(row["allocator"], bench.LOADED_CONTROL)
        self.assertFalse(bench.is_memcoord(bench.LOADED_CONTROL))

    def test_targets_ignore_the_control(self):
        base = [run("native", [3.0, 2.0]), run("expandable", [3.0, 2.0], device=9 * GB),
                run("memcoord", [3.0, 2.0], device=9 * GB)]
        control = run(bench.LOADED_CONTROL, [9.0, 9.0], median=1.0, first=1.0, device=1 * GB)
        self.assertEqual(checks_of(base + [control]), checks_of(base))


class LossesTest(unittest.TestCase):
    """Losses compared at every step of every process, a NaN never equal to a number."""

    def test_a_nan_never_equals_a_number_at_any_step(self):
        nan, inf = float("nan"), float("inf")
        # max(0.0, nan) is 0.0: a NaN after the first step compared as equal.
        self.assertEqual(bench.loss_diff([1.0, nan], [1.0, 2.0]), inf)
        self.assertEqual(bench.loss_diff([nan, 1.0], [2.0, 1.0]), inf)
        self.assertEqual(bench.loss_diff([1.0, 2.0], [1.0, nan]), inf)
        self.assertEqual(bench.loss_diff([1.0, inf], [1.0, 2.0]), inf)
        self.assertEqual(bench.loss_diff([nan, inf], [nan, inf]), 0.0)  # the same non-finite losses: equal
        self.assertEqual(bench.loss_diff([1.0, None], [1.0, 2.0]), inf)  # a null in the JSON
        checks = checks_of([run("native", [3.0, 2.0, 1.0]), run("memcoord", [3.0, 2.0, nan])])
        self.assertFalse(checks["losses memcoord = native"][0])
        self.assertFalse(checks_of([run("native", [3.0, 2.0, 1.0]), run("memcoord", [3.0, 2.0, nan])], 1e9)
                         ["losses memcoord = native"][0])  # no tolerance takes a NaN

    def test_every_process_is_compared_not_the_first_alone(self):
        native = bench.combine([run("native", [3.0, 2.0]), run("native", [3.0, 2.0])])
        memcoord = bench.combine([run("memcoord", [3.0, 2.0]), run("memcoord", [3.0, 2.5]),
                                  run("memcoord", [3.0, 2.0])])
        self.assertEqual([r["losses"] for r in memcoord["runs"]], [[3.0, 2.0], [3.0, 2.5], [3.0, 2.0]])
        checks = checks_of([native, memcoord])
        self.assertEqual(checks["losses memcoord = native"], (False, "max |diff| 0.5 over 3 processes"))
        # A row of the JSON written before each process's losses were kept: its own (the first process's).
        old = dict(memcoord, runs=[{k: v for k, v in r.items() if k != "losses"} for r in memcoord["runs"]])
        self.assertTrue(checks_of([native, old])["losses memcoord = native"][0])

    def test_the_spread_of_a_configuration_takes_nan_too(self):
        row = bench.combine([run("native", [2.0, 1.0]), run("native", [2.0, float("nan")])])
        self.assertEqual(row["own_loss_spread"], float("inf"))


class StepMediansTest(unittest.TestCase):
    """step_medians: every step but the first; a workload of models stepped in turn, each model apart."""

    def test_one_model_every_step_but_the_first(self):
        self.assertEqual(bench.step_medians([900.0, 30.0, 31.0, 35.0]), (31.0, None, None))
        self.assertEqual(bench.step_medians([900.0]), (900.0, None, None))

    def test_two_models_in_turn_each_their_own_median(self):
        # A memcoord process of the table's alternating run (693c4d5-bench2): GPT-2 at even steps, ResNet-50 at
        # odd ones, each model's first step a warm-up (ResNet-50's, step 1, holds cuDNN's set-up).
        times = [474, 740, 192, 31, 187, 55, 187, 38, 187, 34, 187, 31, 186, 30, 186, 30]
        # The median of all the steps but the first was GPT-2's fastest step: ResNet-50's never reached it.
        self.assertEqual(statistics.median(times[1:]), min(times[2::2]))
        median, parts, firsts = bench.step_medians(times, 2)
        self.assertEqual(parts, [187, 31])
        self.assertEqual(firsts, [474, 740])
        self.assertEqual(median, 109.0)
        self.assertEqual(bench.step_medians([500.0, 800.0], 2), (650.0, [500.0, 800.0], [500.0, 800.0]))

    def test_each_model_is_held_to_the_median_target(self):
        def rows(resnet_ms):
            out = []
            for allocator, resnet in (("native", 33.0), ("memcoord", resnet_ms)):
                r = run(allocator, [3.0])
                r.update(parts=["gpt2_fp32", "resnet50_amp"], part_median_step_ms=[187.0, resnet],
                         median_step_ms=(187.0 + resnet) / 2)
                out.append(r)
            return out

        held, detail = checks_of(rows(38.0))["median within 2% of native"]
        # GPT-2's steps as native's, ResNet-50's x1.152: the target fails on the part (their mean: x1.023).
        self.assertFalse(held)
        self.assertEqual(detail, "x1.023 (gpt2_fp32 x1.000, resnet50_amp x1.152)")
        self.assertTrue(checks_of(rows(33.5))["median within 2% of native"][0])

    def test_combine_takes_each_parts_median_over_the_processes(self):
        runs = []
        for gpt, resnet in ((187.0, 30.0), (188.0, 38.0), (186.0, 37.0)):
            r = run("memcoord", [1.0])
            r.update(parts=["a", "b"], part_median_step_ms=[gpt, resnet], part_first_step_ms=[500.0, 800.0])
            runs.append(r)
        row = bench.combine(runs)
        self.assertEqual(row["part_median_step_ms"], [187.0, 37.0])
        self.assertEqual(row["part_first_step_ms"], [500.0, 800.0])
        self.assertEqual([r["part_median_step_ms"] for r in row["runs"]], [[187.0, 30.0], [188.0, 38.0], [186.0, 37.0]])


class PairedStepsTest(unittest.TestCase):
    """paired_steps: step i against native's step i, each the median over the processes (reported, not a target)."""

    # Steps of one length each (GPT-2 bf16's varlen: the lengths are seeded, so step i is the same batch in every
    # process): the per-process median sits in the gap between 137 and 151 ms.
    NATIVE = [420.0, 125.0, 130.0, 137.0, 151.0, 170.0]

    def rows(self, memcoord_steps):
        native = run("native", [3.0], median=statistics.median(self.NATIVE[1:]))
        native["runs"] = [{"step_ms": list(self.NATIVE)}, {"step_ms": [t + 1 for t in self.NATIVE]},
                          {"step_ms": list(self.NATIVE)}]
        mc = run("memcoord", [3.0], median=statistics.median(memcoord_steps[1:]))
        mc["runs"] = [{"step_ms": list(memcoord_steps)}]
        return [native, mc]

    def test_one_slow_step_moves_the_median_not_the_paired_figures(self):
        # Step 4 2 ms slower, step 5 25 ms slower (a packing drain): the median crosses the gap.
        native, mc = self.rows([430.0, 125.0, 130.0, 137.0, 153.0, 195.0])
        median, total, worst, at = bench.paired_steps(mc, native)
        self.assertEqual(median, 1.0)
        self.assertAlmostEqual(total, (125 + 130 + 137 + 153 + 195) / (125 + 130 + 137 + 151 + 170))
        self.assertAlmostEqual(worst, 195 / 170)
        self.assertEqual(at, 5)
        checks = checks_of([native, mc])
        self.assertEqual(checks["steps paired with native's"],
                         (True, f"median x1.000, all steps x{total:.3f}, slowest x{worst:.3f} (step 5)"))
        self.assertIn("steps paired with native's", bench.INFORMATIONAL)

    def test_different_step_counts_give_none(self):
        native, mc = self.rows([430.0, 125.0, 130.0])
        self.assertIsNone(bench.paired_steps(mc, native))
        self.assertNotIn("steps paired with native's", checks_of([native, mc]))


class FailuresTest(unittest.TestCase):
    """A process that failed is named in the targets and the rows, never dropped from them silently."""

    def test_a_failed_process_is_a_failed_target_and_said_beside_the_row(self):
        crashed = {"workload": "w", "allocator": "memcoord", "error": "exit -11: Segmentation fault"}
        memcoord = bench.combine([run("memcoord", [3.0, 2.0], device=9 * GB), crashed,
                                  run("memcoord", [3.0, 2.0], device=9 * GB)])
        self.assertEqual(memcoord["failed_runs"], 1)
        rows = [run("native", [3.0, 2.0]), run("expandable", [3.0, 2.0], device=9 * GB), memcoord]
        checks = checks_of(rows)
        held, detail = checks["every process finished"]
        self.assertFalse(held)
        self.assertNotIn("every process finished", bench.INFORMATIONAL)
        self.assertIn("memcoord: 1 of 3 failed and are left out of its figures (exit -11: Segmentation fault)",
                      detail)
        self.assertTrue(checks["device <= expandable"][0])  # the others' figures are still compared
        self.assertNotIn("every process finished", checks_of(rows[:2] + [run("memcoord", [3.0, 2.0])]))

    def test_a_configuration_whose_processes_all_failed_is_named(self):
        failed = [{"workload": "w", "allocator": "memcoord", "error": "timed out after 420 s"} for _ in range(3)]
        row = bench.combine(failed)
        self.assertIn("error", row)
        self.assertEqual(row["failed_runs"], 3)
        checks = checks_of([run("native", [3.0]), run("expandable", [3.0]), row])
        self.assertNotIn("device <= expandable", checks)  # nothing of memcoord to compare...
        self.assertFalse(checks["every process finished"][0])  # ...and that is said
        self.assertIn("memcoord: 3 of 3 failed (timed out after 420 s)", checks["every process finished"][1])

    def test_a_process_that_exits_non_zero_after_its_result_counts_as_failed(self):
        def fake_run(command, capture_output, text, timeout, env, preexec_fn=None):
            result = {"workload": "w", "allocator": "memcoord", "losses": [1.0], "device_bytes": GB,
                      "median_step_ms": 10.0, "first_step_ms": 20.0}
            return types.SimpleNamespace(stdout="RESULT " + json.dumps(result) + "\n",
                                         stderr="free(): invalid pointer\n", returncode=-6)

        real = bench.subprocess.run
        bench.subprocess.run = fake_run
        try:
            result = bench.run_config("w", "memcoord", 3, 60)
        finally:
            bench.subprocess.run = real
        self.assertEqual(result["exit_code"], -6)
        self.assertIn("free(): invalid pointer", result["exit_tail"])
        self.assertIn("FAILED on exit (code -6)", bench.process_line(dict(result, process_s=1.0)))
        row = bench.combine([dict(run("memcoord", [1.0]), **{"exit_code": -6}), run("memcoord", [1.0])])
        self.assertEqual(row["exit_failures"], 1)
        self.assertEqual(bench.failures(row), "1 of 2 exited non-zero after measuring")


class ChildTest(unittest.TestCase):
    """child() end to end with stand-ins for torch and workloads.py: what one process measures and prints."""

    def test_a_process_of_two_models_in_turn_reports_each(self):
        free = [80 * GB - 500_000_000]  # the context: 0.5 GB of 80

        def step(i):
            free[0] -= 1_000_000_000 if i < 2 else 0  # the pool grows in each model's first step
            return 10.0 - i

        cuda = types.SimpleNamespace(
            init=lambda: None, set_device=lambda d: None, synchronize=lambda: None,
            mem_get_info=lambda: (free[0], 80 * GB), max_memory_reserved=lambda: 2 * GB,
            max_memory_allocated=lambda: GB, memory_stats=lambda: {"reserved_bytes.large_pool.peak": 2 * GB})
        fake_torch = types.SimpleNamespace(cuda=cuda)
        workload = types.SimpleNamespace(step=step, parts=["gpt", "resnet"])
        fake_workloads = types.SimpleNamespace(make=lambda name: workload, STEPS={"alternating": 6})
        out = io.StringIO()
        with mock.patch.dict(sys.modules, torch=fake_torch, workloads=fake_workloads):
            with contextlib.redirect_stdout(out):
                self.assertEqual(bench.child("alternating", "native", 6), 0)
        line = next(l for l in out.getvalue().splitlines() if l.startswith("RESULT "))
        result = json.loads(line[len("RESULT "):])
        self.assertEqual(result["device_bytes"], 2 * GB)  # above the context, the highest at a step's end
        self.assertEqual(result["context_bytes"], 500_000_000)
        self.assertEqual(result["losses"], [10.0, 9.0, 8.0, 7.0, 6.0, 5.0])
        self.assertEqual(result["parts"], ["gpt", "resnet"])
        self.assertEqual(len(result["part_median_step_ms"]), 2)
        self.assertEqual(len(result["step_ms"]), 6)
        self.assertEqual(result["torch_pools"]["large_pool.peak"], 2 * GB)

    def test_a_memcoord_process_reports_each_steps_misses_and_its_first_step_thread_by_thread(self):
        misses = [3]  # building the model missed 3 times; each step misses twice, the first step 5 times more

        def step(i):
            misses[0] += 2 + (5 if i == 0 else 0)
            return 1.0

        def stats(device):
            self.assertEqual(device, 0)
            return {"misses": misses[0], "miss_ns": misses[0] * 1_000_000, "backend_allocations": misses[0],
                    "backend_frees": 0, "pack_waits": 0, "pack_wait_ns": 0, "pack_stream_syncs": 0,
                    "other_thread_frees": 430, "peak_reserved_bytes": 3 * GB, "peak_allocated_bytes": 2 * GB,
                    "peak_requested_bytes": 2 * GB, "peak_active_bytes": 2 * GB, "cache_hits": 10,
                    "allocations": 20}

        segments = [{"small": True, "mapped_bytes": 2 << 20}, {"small": False, "size": 40 << 20}]
        fake_memcoord = types.SimpleNamespace(
            __file__="/pkg/memcoord/__init__.py", enable=lambda: {"hooks": {"empty_cache": True}}, stats=stats,
            _snapshot_documents=lambda devices: [{"pools": [{"segments": segments, "stats": {"markers": 4}}]}],
            _torch=types.SimpleNamespace(_state={"shim": None}))
        free = [80 * GB - 500_000_000]
        cuda = types.SimpleNamespace(
            init=lambda: None, set_device=lambda d: None, synchronize=lambda: None,
            mem_get_info=lambda: (free[0], 80 * GB), max_memory_reserved=lambda: 3 * GB,
            max_memory_allocated=lambda: 2 * GB)
        workload = types.SimpleNamespace(step=step)
        fake_workloads = types.SimpleNamespace(make=lambda name: workload, STEPS={"resnet50_amp": 4})
        out = io.StringIO()
        with mock.patch.dict(sys.modules, torch=types.SimpleNamespace(cuda=cuda), workloads=fake_workloads,
                             memcoord=fake_memcoord), mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("MEMCOORD_BACKEND", None)
            with contextlib.redirect_stdout(out):
                self.assertEqual(bench.child("resnet50_amp", "memcoord", 0), 0)
        line = next(l for l in out.getvalue().splitlines() if l.startswith("RESULT "))
        result = json.loads(line[len("RESULT "):])
        self.assertEqual(result["steps"], 4)  # 0: the workload's own count
        own = result["memcoord"]
        # Counted from the first step on: the model's 3 misses are not the first step's.
        self.assertEqual([s["misses"] for s in own["steps"]], [7, 2, 2, 2])
        self.assertEqual(own["first_step"], own["steps"][0])
        self.assertEqual(own["first_step"]["miss_ms"], 7.0)
        self.assertEqual((own["all_steps"]["misses"], own["all_steps"]["markers"]), (3 + 13, 4))
        self.assertEqual(own["arenas_mapped"], {"small": 2 << 20, "large": 40 << 20})
        self.assertEqual((own["package"], own["hooks"], own["backend"]), ("/pkg/memcoord", {"empty_cache": True},
                                                                          "cuda-vmm"))
        self.assertEqual(own["peak_reserved_bytes"], 3 * GB)
        self.assertNotIn("torch_pools", result)  # PyTorch's own pools are not the allocator here
        self.assertEqual(len(result["step_cpu"]), 4)
        # The first step's figures thread by thread: this thread ran, and the counters said whether they could.
        self.assertGreater(sum(result["first_step_threads"].values()), 0)
        self.assertEqual(set(result["first_step_places"]), set(result["first_step_threads"]))
        self.assertTrue(result["first_step_counters"])
        self.assertIsNone(result["first_step_driver_calls"])  # no driver timer preloaded
        self.assertEqual(result["step_driver"], [])

    def test_with_the_driver_timer_each_step_keeps_its_own_memory_calls(self):
        readings = iter([{"cuMemMap": (2, 1.0)}, {"cuMemMap": (7, 3.5)}, {"cuMemMap": (7, 3.5)},
                         {"cuMemMap": (10, 4.25)}])  # before the steps, then after each of three
        cuda = types.SimpleNamespace(
            init=lambda: None, set_device=lambda d: None, synchronize=lambda: None,
            mem_get_info=lambda: (70 * GB, 80 * GB), max_memory_reserved=lambda: GB, max_memory_allocated=lambda: GB,
            memory_stats=lambda: {})
        workload = types.SimpleNamespace(step=lambda i: 1.0)
        fake_workloads = types.SimpleNamespace(make=lambda name: workload, STEPS={"w": 3})
        out = io.StringIO()
        with mock.patch.dict(sys.modules, torch=types.SimpleNamespace(cuda=cuda), workloads=fake_workloads), \
                mock.patch.object(bench.driver_timer, "read", lambda: next(readings)), \
                contextlib.redirect_stdout(out):
            self.assertEqual(bench.child("w", "expandable", 3), 0)
        result = json.loads(next(l for l in out.getvalue().splitlines() if l.startswith("RESULT "))[len("RESULT "):])
        self.assertEqual(result["step_driver"], [[5, 2.5], [0, 0.0], [3, 0.75]])
        self.assertEqual(result["first_step_driver_calls"], {"cuMemMap": [5, 2.5]})


class EnvironmentTest(unittest.TestCase):
    def test_allocator_settings_of_the_callers_shell_reach_no_process(self):
        shell = {"PYTORCH_ALLOC_CONF": "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64",
                 "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "MEMCOORD_ALLOC_CONF": "thread_cache:0",
                 "MEMCOORD_TRACE_DIR": "/tmp/t"}
        with mock.patch.dict(os.environ, shell):
            for allocator in ("native", "expandable", "memcoord"):
                _, _, env = RunConfigTest.launch(self, allocator)
                for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "MEMCOORD_ALLOC_CONF",
                             "MEMCOORD_TRACE_DIR"):
                    self.assertNotIn(name, env, (allocator, name))
                self.assertEqual(env.get("PYTORCH_CUDA_ALLOC_CONF"),
                                 "expandable_segments:True" if allocator == "expandable" else None)


class ProcessOrderTest(unittest.TestCase):
    def test_rounds_rotate_so_each_allocator_runs_once_in_each_place(self):
        allocators = ["native", "expandable", "memcoord"]
        rounds = [bench.process_order(allocators, r) for r in range(3)]
        self.assertEqual(rounds[0], allocators)
        self.assertEqual(rounds[1], ["expandable", "memcoord", "native"])
        for place in range(3):
            self.assertEqual(sorted(r[place] for r in rounds), sorted(allocators))
        self.assertEqual(bench.process_order(allocators, 3), allocators)
        self.assertEqual(allocators, ["native", "expandable", "memcoord"])  # the caller's list is left as it was

    def test_one_allocator_always_runs_alone(self):
        self.assertEqual(bench.process_order(["memcoord"], 5), ["memcoord"])

    def test_a_workload_runs_each_allocator_in_each_place_and_prints_every_process(self):
        started = []

        def fake_run_config(name, allocator, steps, timeout, trace_dir, deterministic, driver_timer, cpus, cold):
            started.append(allocator)
            self.assertEqual((name, steps, cpus, cold), ("w", 8, {3}, 2))
            return run(allocator, [1.0], first=600.0 + len(started), workload=name)

        args = types.SimpleNamespace(repeat=2, steps=8, timeout=60, trace_dir=None, deterministic=False,
                                     driver_timer=None, cold_steps=2)
        out = io.StringIO()
        with mock.patch.object(bench, "run_config", fake_run_config), contextlib.redirect_stdout(out):
            rows = bench.run_workload("w", ["expandable", "memcoord"], args, {3})
        self.assertEqual(started, ["expandable", "memcoord", "memcoord", "expandable"])
        self.assertEqual([r["allocator"] for r in rows], ["expandable", "memcoord"])
        self.assertEqual([(p["round"], p["place"]) for p in rows[1]["runs"]], [(0, 1), (1, 0)])
        self.assertEqual([p["first_step_ms"] for p in rows[0]["runs"]], [601.0, 604.0])
        self.assertEqual(rows[0]["first_step_ms"], 602.5)  # the median over its processes
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[2].startswith("w memcoord process 2/2: "))


class ProgressTest(unittest.TestCase):
    def test_each_process_gets_a_line_failed_or_not(self):
        line = bench.process_line(dict(run("memcoord", [1.0], median=180.25, first=512.4, device=16_326_000_000),
                                       process_s=21.5))
        self.assertEqual(line, "device 16.3260 GB, median 180.2 ms, first 512 ms, process 21.5 s")
        self.assertEqual(bench.process_line({"error": "timed out after 420 s"}), "FAILED: timed out after 420 s")

    def test_the_json_holds_the_rows_so_far_with_their_targets(self):
        import tempfile

        rows = [run("native", [2.0]), run("expandable", [2.0], device=9 * GB), run("memcoord", [2.0], device=8 * GB)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.json")
            bench.write_json(path, rows[:1], 0.0)
            with open(path) as f:
                self.assertEqual(len(json.load(f)["runs"]), 1)
            bench.write_json(path, rows, 0.0)
            with open(path) as f:
                written = json.load(f)
        held = {name: ok for name, ok, _ in written["targets"]["w"]}
        self.assertTrue(held["device <= expandable"])
        self.assertEqual(len(written["runs"]), 3)


class FirstStepFiguresTest(unittest.TestCase):
    """What a process records of where its steps' time went on the host, and the discarded warm-up process."""

    def test_cpu_figures_count_this_threads_work(self):
        before, threads_before = bench.cpu_figures(), bench.thread_run_ms()
        sum(i * i for i in range(300000))
        spent, threads = bench.cpu_since(before, bench.cpu_figures()), bench.run_ms_since(threads_before,
                                                                                           bench.thread_run_ms())
        self.assertEqual(set(spent), set(bench.CPU_FIGURES))
        self.assertGreater(spent["thread_ms"], 0)
        self.assertGreaterEqual(spent["process_ms"], spent["thread_ms"] - 1)
        self.assertGreater(sum(threads.values()), 0)  # this thread ran, under its name
        places = bench.places_since({}, bench.thread_places(), threads)
        self.assertEqual(set(places), set(threads))
        for place in places.values():
            self.assertIn(place["cpu"], range(os.cpu_count()))
            self.assertGreaterEqual(place["wait_ms"], 0)
        line = bench.process_line({"device_bytes": GB, "median_step_ms": 30.0, "first_step_ms": 650.0,
                                   "step_cpu": [{"thread_ms": 420.0, "process_ms": 650.0, "voluntary_switches": 2,
                                                 "involuntary_switches": 1, "minor_faults": 101000}],
                                   "first_step_threads": {"python3": 421.0, "pt_autograd_0": 229.0},
                                   "first_step_driver_threads": {"pt_autograd_0": [40, 4.25], "python3": [90, 10.5]},
                                   "first_step_places": {"pt_autograd_0": {"cpu": 7, "wait_ms": 0.25},
                                                         "python3": {"cpu": 12, "wait_ms": 1.5}}})
        self.assertIn("first step's CPU: training thread 420 ms, process 650 ms, thread's switches 2 voluntary "
                      "1 involuntary, 101000 minor faults; threads' run time: python3 421, pt_autograd_0 229; threads' "
                      "last CPU and wait for one: pt_autograd_0 CPU 7 0.2 ms, python3 CPU 12 1.5 ms; memory calls by "
                      "thread: python3 90 (10.5 ms), pt_autograd_0 40 (4.2 ms)", line)

    def test_the_first_steps_cpu_counters_are_kept_printed_and_compared(self):
        base = {"device_bytes": GB, "median_step_ms": 30.0, "first_step_ms": 650.0}
        line = bench.process_line(dict(base, first_step_counters={"instructions": 2_500_000_000,
                                                                  "cycles": 3_000_000_000}))
        self.assertIn("first step's user-space CPU work: 2.500 G instructions, 3.000 G cycles (1.200 a instruction)",
                      line)
        line = bench.process_line(dict(base, first_step_counters={"unavailable": "No such file or directory"}))
        self.assertIn("no CPU counters: No such file or directory", line)
        a, b = run("memcoord", [1.0]), run("memcoord", [1.0])
        a["first_step_counters"] = {"instructions": 100, "cycles": 150}
        b["first_step_counters"] = {"instructions": 300, "cycles": 300}
        self.assertEqual(bench.combine([a, b])["runs"][0]["first_step_counters"], {"instructions": 100, "cycles": 150})
        self.assertEqual(bench.first_step_work(bench.combine([a, b])), (200, 1.25))
        b["first_step_counters"] = {"unavailable": "no PMU"}
        self.assertIsNone(bench.first_step_work(bench.combine([a, b])))

    def test_the_warm_up_process_is_run_once_and_written_beside_the_runs(self):
        asked = []

        def fake_run(workload, allocator, steps, timeout, trace_dir=None, deterministic=False, driver_timer_lib=None,
                     cpus=None):
            asked.append((workload, allocator, steps))
            return {"first_step_ms": 1300.0, "step_cpu": [{"process_ms": 700.0}]}

        with mock.patch.object(bench, "run_config", fake_run), contextlib.redirect_stdout(io.StringIO()) as out:
            warmup = bench.warm_up("resnet50_amp", "expandable", 60, None)
        self.assertEqual(asked, [("resnet50_amp", "expandable", 1)])
        self.assertEqual(warmup["first_step_waiting_ms"], 600.0)
        self.assertIn("warm-up process (resnet50_amp expandable, discarded): first step 1300 ms, 600 ms of it "
                      "waiting", out.getvalue())
        failing = lambda *args, **kwargs: {"error": "exit 1: no GPU"}  # noqa: E731
        with mock.patch.object(bench, "run_config", failing), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(bench.warm_up("w", "memcoord", 60, None)["error"], "exit 1: no GPU")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.json")
            bench.write_json(path, [run("memcoord", [2.0])], 0.0, warmup)
            with open(path) as f:
                written = json.load(f)
            self.assertEqual(written["warmup"]["first_step_ms"], 1300.0)
            self.assertNotIn("cpu_probe_ms", written)  # only with --cpus fastest:N
            bench.write_json(path, [run("memcoord", [2.0])], 0.0, warmup, {15: 0.005123, 0: 0.0089})
            with open(path) as f:
                self.assertEqual(json.load(f)["cpu_probe_ms"], {"0": 8.9, "15": 5.12})


def run_example(script, *args, env=None, **kwargs):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], capture_output=True, text=True,
                          timeout=60, env=env, **kwargs)


class ExampleOptionsTest(unittest.TestCase):
    """Bad options end the examples at once (argparse: exit 2, naming the option and what it accepts), before
    torch is even imported: here, where torch is missing, they used to end with 77 (skipped) or run on."""

    def assert_refused(self, done, *texts):
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        for text in texts:
            self.assertIn(text, done.stderr)

    def test_abort_demo_modes_are_memcoord_and_plain(self):
        # A typo ('memcord,plain') ran plain twice and reported the memcoord target met.
        import abort_demo

        self.assert_refused(run_example("abort_demo.py", "--modes", "memcord,plain"),
                            "unknown mode(s) 'memcord'; accepted: memcoord, plain")
        self.assert_refused(run_example("abort_demo.py", "--modes", "plain"), "memcoord must be one of the modes")
        self.assertEqual(abort_demo.modes_list("memcoord, plain,memcoord"), ["memcoord", "plain"])

    def test_cluster_trim_ranks_get_their_local_rank_and_eval_at_leaves_steps_to_trim_at(self):
        import cluster_trim

        # init() reads the launcher's LOCAL_RANK only when MEMCOORD_RANK is unset: every rank was on GPU 0.
        env = cluster_trim.rank_environment({"PATH": "/bin"}, 1)
        self.assertEqual((env["MEMCOORD_RANK"], env["MEMCOORD_LOCAL_RANK"], env["LOCAL_RANK"]), ("1", "1", "1"))
        self.assert_refused(run_example("cluster_trim.py", "--steps", "5", "--eval-at", "3"),
                            "--eval-at must be >= 0 and < --steps - 2", "got --eval-at 3 with --steps 5")
        self.assert_refused(run_example("cluster_trim.py", "--ranks", "0"), "argument --ranks: expected a whole")
        # The usage line's defaults are argparse's.
        parser = cluster_trim.make_parser()
        usage = next(line for line in cluster_trim.__doc__.splitlines() if line.startswith("Usage:"))
        shown = re.findall(r"\[--([a-z-]+) (\d+)\]", usage)
        self.assertTrue(shown, usage)
        for name, value in shown:
            self.assertEqual(str(parser.get_default(name.replace("-", "_"))), value, f"--{name} in {usage!r}")

    def test_train_steps_and_log_every_must_be_positive(self):
        # train.py makes memcoord PyTorch's allocator and imports torch at its top: stand-ins for both here.
        with tempfile.TemporaryDirectory() as fakes:
            os.makedirs(os.path.join(fakes, "torch"))
            for name, text in (("torch/__init__.py", ""), ("torch/distributed.py", ""),
                               ("memcoord.py", "def enable(**options):\n    pass\n")):
                with open(os.path.join(fakes, name), "w") as f:
                    f.write(text)
            env = dict(os.environ, PYTHONPATH=fakes)
            # --log-every 0 divided by zero; --steps -1 ran no step and failed on losses[-1].
            self.assert_refused(run_example("train.py", "--log-every", "0", env=env),
                                "argument --log-every: expected a whole number >= 1, got '0'")
            self.assert_refused(run_example("train.py", "--steps", "-1", env=env),
                                "argument --steps: expected a whole number >= 1, got '-1'")


class RunOnH200Test(unittest.TestCase):
    """examples/pytorch/run_on_h200.sh without a GPU: its syntax, its refusals before any part runs, and its
    test for a shim built earlier (device time is spent on every rebuild)."""

    SCRIPT = os.path.join(EXAMPLES, "run_on_h200.sh")

    def test_syntax_and_shellcheck(self):
        done = subprocess.run(["bash", "-n", self.SCRIPT], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        if shutil.which("shellcheck"):
            done = subprocess.run(["shellcheck", self.SCRIPT], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stdout)

    def test_shim_built_finds_either_place(self):
        # `ls A B` failed when either pattern matched nothing, so the shim part (rm -rf of the site, a rebuild)
        # ran on every call. The script's own function, run in a scratch folder.
        with open(self.SCRIPT) as f:
            function = re.search(r"^shim_built\(\) \{\n.*?^\}\n", f.read(), re.S | re.M).group(0)
        with tempfile.TemporaryDirectory() as tmp:
            site = os.path.join(tmp, "site")
            for where, built in ((None, False), ("site", True), ("tree", True)):
                with self.subTest(shim_in=where):
                    shutil.rmtree(os.path.join(tmp, "python"), ignore_errors=True)
                    shutil.rmtree(site, ignore_errors=True)
                    folder = {"site": os.path.join(site, "memcoord"), "tree": os.path.join(tmp, "python", "memcoord")}
                    if where:
                        os.makedirs(folder[where])
                        open(os.path.join(folder[where], "_torch_shim.cpython-311-x86_64-linux-gnu.so"), "w").close()
                    done = subprocess.run(["bash", "-c", f"site={site}\n{function}shim_built"], cwd=tmp)
                    self.assertEqual(done.returncode == 0, built)

    def test_capi_bench_pins_one_thread_per_physical_core(self):
        # The gtests part's second capi_bench run: the first CPU of each physical core, never two SMT siblings,
        # over a made-up sysfs (siblings n and n+4 as on most x86 servers, adjacent ones, two packages).
        with open(self.SCRIPT) as f:
            function = re.search(r"^distinct_core_cpus\(\) \{\n.*?^\}\n", f.read(), re.S | re.M).group(0)
        layouts = {
            "siblings n and n+4": ([(0, c % 4) for c in range(8)], 4, "0,1,2,3"),
            "adjacent siblings": ([(0, c // 2) for c in range(8)], 4, "0,2,4,6"),
            "two packages, same core ids": ([(c // 4, (c % 4) // 2) for c in range(8)], 4, "0,2,4,6"),
            "fewer cores than asked": ([(0, c // 2) for c in range(4)], 4, "0,2"),
            "ten CPUs sort numerically": ([(0, c) for c in range(10)], 10, ",".join(str(c) for c in range(10))),
        }
        for name, (topology, n, want) in layouts.items():
            with self.subTest(layout=name), tempfile.TemporaryDirectory() as root:
                for cpu, (package, core) in enumerate(topology):
                    folder = os.path.join(root, f"cpu{cpu}", "topology")
                    os.makedirs(folder)
                    with open(os.path.join(folder, "physical_package_id"), "w") as f:
                        f.write(f"{package}\n")
                    with open(os.path.join(folder, "core_id"), "w") as f:
                        f.write(f"{core}\n")
                os.makedirs(os.path.join(root, "cpufreq"))  # not a CPU
                done = subprocess.run(["bash", "-c", f"{function}distinct_core_cpus {n}"], capture_output=True,
                                      text=True, env=dict(os.environ, SYSFS_CPU=root))
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(done.stdout.strip(), want)

    def test_the_refusal_names_every_part_and_only_those(self):
        # A part added without its name in the refusal's list is refused in the usage's words but not named.
        with open(self.SCRIPT) as f:
            text = f.read()
        defined = re.findall(r"^part_([a-z_0-9]+)\(\) \{", text, re.M)
        accepted = re.search(r"accepted: ([a-z_0-9 ]+)\"", text).group(1).split()
        self.assertEqual(sorted(accepted), sorted(defined))
        self.assertIn("replaycost", defined)

    def test_no_part_or_an_unknown_one_runs_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            env = dict(os.environ, OUT=out)
            # No part: the usage, before anything is built (the driver timer was compiled first).
            done = subprocess.run(["bash", self.SCRIPT], capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(done.returncode, 2)
            self.assertIn("run_on_h200.sh PART...", done.stdout)
            self.assertFalse(os.path.exists(out))
            # A typo among the parts: refused before the first part (and the shim build) runs.
            os.makedirs(os.path.join(tmp, "bundle", "lib"))
            open(os.path.join(tmp, "bundle", "lib", "libmemcoord_capi.so"), "w").close()
            env["MEMCOORD_BUNDLE"] = os.path.join(tmp, "bundle")
            done = subprocess.run(["bash", self.SCRIPT, "checks", "chekcs"], capture_output=True, text=True, env=env,
                                  timeout=60)
            self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
            self.assertIn("unknown part 'chekcs'; accepted: shim checks", done.stdout)
            self.assertNotIn("====", done.stdout)
            self.assertFalse(os.path.exists(os.path.join(out, "timer-build.log")))

    def test_pack_out_leaves_one_archive_and_the_exit_code(self):
        # The device tool returns a few files a call; PACK_OUT=1 leaves one archive of everything in $OUT. The
        # gtests part over a bundle without its programs fails here, and the script still says so by its code.
        with tempfile.TemporaryDirectory() as tmp:
            out, bundle = os.path.join(tmp, "out"), os.path.join(tmp, "bundle")
            os.makedirs(os.path.join(bundle, "lib"))
            open(os.path.join(bundle, "lib", "libmemcoord_capi.so"), "w").close()
            os.makedirs(os.path.join(out, "earlier"))
            with open(os.path.join(out, "earlier", "a log.txt"), "w") as f:
                f.write("kept\n")
            env = dict(os.environ, OUT=out, MEMCOORD_BUNDLE=bundle, PACK_OUT="1")
            done = subprocess.run(["bash", self.SCRIPT, "gtests"], capture_output=True, text=True, env=env,
                                  timeout=120)
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertIn("run_on_h200: parts failed: gtests", done.stdout)
            self.assertEqual(os.listdir(out), ["run_on_h200.tgz"])
            with tarfile.open(os.path.join(out, "run_on_h200.tgz")) as archive:
                names = set(archive.getnames())
                self.assertIn("earlier/a log.txt", names)
                self.assertIn("capi_bench.json", names)
                self.assertEqual(archive.extractfile("earlier/a log.txt").read(), b"kept\n")
            self.assertRegex(done.stdout, r"run_on_h200: \d+ entries packed in ")


if __name__ == "__main__":
    unittest.main()
