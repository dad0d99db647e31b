"""examples/pytorch/replay_cost.py without PyTorch or a GPU: the traces it reads (four fields, or five where a
trace names its threads), the environment each allocator's process starts from, the order of the processes, and
a failed or stuck process named beside the others' medians (it ended the script, or was left out silently)."""

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import replay_cost  # noqa: E402


def process(allocator, cold, warm=1.0):
    return {"trace": "t", "allocator": allocator, "events": 2, "peak_reserved_bytes": 2 << 20,
            "passes": [{"ms": cold, "driver": None}, {"ms": warm, "driver": None}]}


class ReadEventsTest(unittest.TestCase):
    def test_four_and_five_field_traces(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.trace.gz")
            with gzip.open(path, "wt") as f:
                f.write("# memcoord workload=x; code addr size stream thread\n"
                        "S 7f00 4096 0\na 302000000 512 0 t0\na 302000200 256 0\nf 302000000 512 0 t1\n")
            self.assertEqual(replay_cost.read_events(path),
                             [(True, "302000000", 512), (True, "302000200", 256), (False, "302000000", 512)])

    def test_the_committed_threaded_trace_reads(self):
        path = replay_cost.TRACES / "alternating_threads.trace.gz"
        if not path.exists():
            self.skipTest(f"no {path}")
        events = replay_cost.read_events(path)  # "too many values to unpack" before
        self.assertGreater(len(events), 30000)


class RunChildTest(unittest.TestCase):
    def fake(self, recorded, outcome):
        def run(command, capture_output, text, timeout, env, preexec_fn=None):
            recorded.update(command=command, env=env, timeout=timeout, preexec_fn=preexec_fn)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        return run

    def test_each_allocator_starts_from_the_same_environment(self):
        shell = {"PYTORCH_ALLOC_CONF": "expandable_segments:True", "MEMCOORD_ALLOC_CONF": "thread_cache:0",
                 "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}
        saved = {k: os.environ.get(k) for k in shell}
        os.environ.update(shell)
        real = replay_cost.subprocess.run
        try:
            for allocator in replay_cost.ALLOCATORS:
                recorded = {}
                done = types.SimpleNamespace(stdout='RESULT {"trace": "t"}\n', stderr="", returncode=0)
                replay_cost.subprocess.run = self.fake(recorded, done)
                replay_cost.run_child("t", allocator, None)
                env = recorded["env"]
                self.assertNotIn("PYTORCH_ALLOC_CONF", env)
                self.assertIsNone(recorded["preexec_fn"])  # no --cpus: not pinned
                self.assertNotIn("MEMCOORD_ALLOC_CONF", env)  # memcoord ran with the caller's conf before
                self.assertEqual(env.get("PYTORCH_CUDA_ALLOC_CONF"),
                                 "expandable_segments:True" if allocator == "expandable" else None)
        finally:
            replay_cost.subprocess.run = real
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_a_stuck_process_is_a_failed_one_not_the_end_of_the_script(self):
        real = replay_cost.subprocess.run
        recorded = {}
        replay_cost.subprocess.run = self.fake(recorded, subprocess.TimeoutExpired("python3", 300))
        try:
            result = replay_cost.run_child("t", "memcoord", None)
        finally:
            replay_cost.subprocess.run = real
        self.assertEqual(result, {"trace": "t", "allocator": "memcoord", "error": "timed out after 300 s"})


class PairsTest(unittest.TestCase):
    """The pair loops: every pair allocates and frees one block of the size asked, and the figure is the median
    of the rounds; the report gives each size's median over the processes."""

    def test_pairs_allocate_and_free_one_block_of_the_size_each(self):
        calls = []

        class Block:
            def __init__(self, size):
                calls.append(("a", size))

            def __del__(self):
                calls.append(("f", None))

        fake = types.SimpleNamespace(uint8="u8", empty=lambda size, dtype, device: Block(size))
        ns = replay_cost.pair_ns(fake, 4096, pairs=5, rounds=3)
        self.assertGreater(ns, 0)
        self.assertEqual(len(calls), 2 * (1 + 5 * 3))  # one untimed pair first
        self.assertEqual(calls[:4], [("a", 4096), ("f", None), ("a", 4096), ("f", None)])  # freed before the next

    def test_a_child_whose_loop_fails_still_prints_its_passes(self):
        class Cuda:
            @staticmethod
            def set_device(device):
                pass

            @staticmethod
            def synchronize():
                pass

            @staticmethod
            def max_memory_reserved():
                return 1

        def empty(size, dtype, device):
            if size == 0:  # the first pair loop's size (the trace allocates none of 0 bytes)
                raise RuntimeError("no empty tensors")
            return object()

        fake = types.SimpleNamespace(uint8="u8", cuda=Cuda, empty=empty)
        real = sys.modules.get("torch")
        sys.modules["torch"] = fake
        try:
            with contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(replay_cost.child("resnet50_amp", "expandable"), 0)
        finally:
            if real is None:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = real
        result = json.loads(out.getvalue().split("RESULT ", 1)[1])
        self.assertEqual(len(result["passes"]), 2)
        self.assertEqual(result["pair_error"], "RuntimeError: no empty tensors")
        self.assertNotIn("pair_ns", result)

    def test_memcoord_runs_with_the_shim_and_memcoord_pluggable_without(self):
        class Cuda:
            set_device = synchronize = staticmethod(lambda *a: None)
            max_memory_reserved = staticmethod(lambda: 1)

        fake_torch = types.SimpleNamespace(uint8="u8", cuda=Cuda, empty=lambda size, dtype, device: object())
        enabled = []
        fake_memcoord = types.SimpleNamespace(enable=lambda **options: enabled.append(options))
        saved = {name: sys.modules.get(name) for name in ("torch", "memcoord")}
        sys.modules.update(torch=fake_torch, memcoord=fake_memcoord)
        figures = replay_cost.memcoord_step_figures, replay_cost.figures_since
        replay_cost.memcoord_step_figures, replay_cost.figures_since = dict, lambda before, after: {}
        try:
            for allocator in ("memcoord", "memcoord-pluggable", "expandable"):
                with contextlib.redirect_stdout(io.StringIO()) as out, mock.patch.dict(os.environ):
                    self.assertEqual(replay_cost.child("resnet50_amp", allocator), 0)
                result = json.loads(out.getvalue().split("RESULT ", 1)[1])
                self.assertEqual(result["allocator"], allocator)
                self.assertEqual("pool" in result["passes"][0], allocator != "expandable")
        finally:
            replay_cost.memcoord_step_figures, replay_cost.figures_since = figures
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        self.assertEqual(enabled, [{}, {"shim": "off"}])  # memcoord as users enable it; then PyTorch's layer alone
        self.assertNotIn("memcoord-pluggable", replay_cost.DEFAULT_ALLOCATORS)

    def test_a_failing_loop_is_reported_and_the_passes_kept(self):
        run = process("memcoord", 10.0)
        run["pair_error"] = "RuntimeError: boom"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            replay_cost.print_row("t", "memcoord", [run])
        self.assertIn("cold     10.0 ms", out.getvalue())
        self.assertIn("alloc+free pairs FAILED in 1 of 1 processes: RuntimeError: boom", out.getvalue())

    def test_the_report_gives_each_sizes_median(self):
        runs = []
        for ns in (100.0, 300.0, 200.0):
            run = process("memcoord", 10.0)
            run["pair_ns"] = {"0": ns, "65536": ns + 1, "8388608": ns + 2}
            runs.append(run)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            replay_cost.print_row("t", "memcoord", runs)
        self.assertIn("alloc+free pairs: 0 B 200 ns, 64 KiB 201 ns, 8 MiB 202 ns", out.getvalue())
        self.assertEqual([replay_cost.size_text(n) for n in (0, 512, 1 << 20, 3 << 10)],
                         ["0 B", "512 B", "1 MiB", "3 KiB"])


class ReportTest(unittest.TestCase):
    def test_a_failed_process_is_named_beside_the_others_medians(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            replay_cost.print_row("t", "memcoord", [process("memcoord", 10.0), {"error": "exit -11: Segmentation"},
                                                   process("memcoord", 14.0)])
        text = out.getvalue()
        self.assertIn("cold     12.0 ms", text)  # the median of the two that finished
        self.assertIn("FAILED: 1 of 3 processes (left out of the figures): exit -11: Segmentation", text)

    def test_processes_rotate_and_a_failure_exits_1(self):
        order = []

        def fake_child(trace, allocator, timer, cpus=None):
            order.append(allocator)
            self.assertIsNone(cpus)  # --cpus none, the default
            if allocator == "memcoord" and len(order) > 3:
                return {"trace": trace, "allocator": allocator, "error": "exit 1: boom"}
            return process(allocator, 10.0)

        real, argv = replay_cost.run_child, sys.argv
        replay_cost.run_child = fake_child
        sys.argv = ["replay_cost.py", "--traces", "gpt2_fp32", "--repeat", "3"]
        try:
            with contextlib.redirect_stdout(io.StringIO()) as out:
                code = replay_cost.main()
        finally:
            replay_cost.run_child, sys.argv = real, argv
        self.assertEqual(order, ["native", "expandable", "memcoord", "expandable", "memcoord", "native",
                                 "memcoord", "native", "expandable"])
        self.assertEqual(code, 1)
        self.assertIn("replay_cost: 2 of 9 processes failed", out.getvalue())


class CpusTest(unittest.TestCase):
    """--cpus as bench_allocators.py takes it: a bad value is refused before any process runs; the CPUs chosen go to
    every process and into its result."""

    def run_main(self, *args):
        started = []

        def fake_child(trace, allocator, timer, cpus=None):
            started.append(cpus)
            return process(allocator, 10.0)

        real, argv = replay_cost.run_child, sys.argv
        replay_cost.run_child = fake_child
        sys.argv = ["replay_cost.py", "--traces", "gpt2_fp32", "--repeat", "1", "--allocators", "memcoord", *args]
        try:
            with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
                try:
                    code = replay_cost.main()
                except SystemExit as e:
                    code = e.code
        finally:
            replay_cost.run_child, sys.argv = real, argv
        return code, started, out.getvalue() + err.getvalue()

    def test_bad_cpus_are_refused_before_any_process(self):
        for value, says in (("fastest:0", "from 1"), ("7-2", "runs backwards"), ("100000", "not among those")):
            with self.subTest(value=value):
                code, started, text = self.run_main("--cpus", value)
                self.assertEqual((code, started), (2, []))
                self.assertIn(f"--cpus {value}:", text)
                self.assertIn(says, text)

    def test_the_cpus_chosen_reach_every_process(self):
        cpu = min(os.sched_getaffinity(0))
        code, started, text = self.run_main("--cpus", str(cpu))
        self.assertEqual((code, started), (0, [{cpu}]))
        self.assertIn(f"replay_cost: every process runs on CPUs {cpu}", text)
        code, started, text = self.run_main("--cpus", "fastest:1")
        self.assertEqual((code, len(started), len(started[0])), (0, 1, 1))
        self.assertIn("replay_cost: the CPUs' probe times (ms): ", text)

    def test_a_child_is_pinned(self):
        recorded = {}
        done = types.SimpleNamespace(stdout='RESULT {"trace": "t"}\n', stderr="", returncode=0)
        real = replay_cost.subprocess.run
        replay_cost.subprocess.run = RunChildTest.fake(None, recorded, done)
        try:
            replay_cost.run_child("t", "memcoord", None, cpus={0})
        finally:
            replay_cost.subprocess.run = real
        self.assertIsNotNone(recorded["preexec_fn"])


if __name__ == "__main__":
    unittest.main()
