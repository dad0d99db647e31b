"""examples/pytorch/kernels_diff.py on made-up profile_first_step.py --kernels files: the medians per allocator,
the kernels one allocator alone launched, counts apart in every pair, "same kernels", each thread's self CPU time
and the operators apart on a thread in every pair, and the errors for files it cannot read; and
profile_first_step.py's thread-by-thread CPU figures on made-up profiler events."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import kernels_diff  # noqa: E402
import profile_first_step  # noqa: E402


class KernelsDiffTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.count = 0

    def tearDown(self):
        self.dir.cleanup()

    def write(self, allocator, first_ms, kernels, threads=None):
        """kernels: {name: (count, ms)}; threads: {role: {op: self ms}} (profile_first_step.py's "threads",
        left out when None); returns the file's path."""
        self.count += 1
        path = os.path.join(self.dir.name, f"{allocator}-{self.count}.kernels.json")
        record = {"workload": "w", "allocator": allocator, "first_step_ms": first_ms,
                  "kernels": {n: {"count": c, "ms": ms} for n, (c, ms) in kernels.items()}}
        if threads is not None:
            record["threads"] = {role: {"self_ms": sum(ops.values()),
                                        "ops": {op: {"count": 1, "self_ms": ms} for op, ms in ops.items()}}
                                 for role, ops in threads.items()}
        with open(path, "w") as f:
            json.dump(record, f)
        return path

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = kernels_diff.main(list(argv))
        return code, out.getvalue(), err.getvalue()

    def test_the_same_kernels_say_so_with_each_allocators_medians(self):
        paths = [self.write("expandable", 600, {"gemm": (10, 2.0), "conv": (4, 1.0)}),
                 self.write("memcoord", 610, {"gemm": (10, 2.5), "conv": (4, 1.0)}),
                 self.write("expandable", 580, {"gemm": (10, 2.0), "conv": (5, 1.5), "lazy": (1, 0.1)}),
                 self.write("memcoord", 590, {"gemm": (10, 2.0), "conv": (5, 1.0)})]
        code, out, _ = self.run_main(*paths)
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertEqual(lines[0], "expandable: 2 processes, first step 590 ms, 2.5 kernel names, 15 launches, "
                                   "3.3 GPU ms (medians)")
        self.assertEqual(lines[1], "memcoord: 2 processes, first step 600 ms, 2 kernel names, 14.5 launches, "
                                   "3.2 GPU ms (medians)")
        # "lazy" ran in one expandable process only, and conv's counts overlap: neither is a difference.
        self.assertEqual(lines[2:], ["same kernels: none launched by one allocator only, no count apart in every "
                                     "pair"])

    def test_a_kernel_of_one_allocator_only_and_counts_apart(self):
        paths = [self.write("expandable", 600, {"gemm_a": (10, 2.0), "conv": (4, 1.0), "fill": (3, 0.1)}),
                 self.write("expandable", 600, {"gemm_a": (10, 2.0), "conv": (4, 1.0), "fill": (2, 0.1)}),
                 self.write("memcoord", 640, {"gemm_b": (10, 2.0), "conv": (4, 1.0), "fill": (5, 0.1)}),
                 self.write("memcoord", 650, {"gemm_b": (10, 2.0), "conv": (4, 1.0), "fill": (4, 0.1)})]
        json_out = os.path.join(self.dir.name, "diff.json")
        code, out, _ = self.run_main(*paths, "--json", json_out)
        self.assertEqual(code, 0)
        self.assertIn("only expandable: gemm_a", out)
        self.assertIn("only memcoord: gemm_b", out)
        self.assertIn("counts apart: fill: expandable [3, 2], memcoord [5, 4]", out)
        self.assertNotIn("conv", out)
        self.assertNotIn("same kernels", out)
        with open(json_out) as f:
            written = json.load(f)
        self.assertEqual(written["differences"]["only_memcoord"], ["gemm_b"])
        self.assertEqual(written["summary"]["memcoord"]["first_step_ms"], 645)

    def test_a_kernel_missing_from_one_process_of_its_allocator_is_not_a_difference(self):
        paths = [self.write("expandable", 600, {"gemm_a": (10, 2.0)}),
                 self.write("expandable", 600, {"other": (1, 2.0)}),
                 self.write("memcoord", 640, {"other": (1, 2.0)})]
        _, out, _ = self.run_main(*paths)
        self.assertNotIn("only expandable", out)

    def test_one_allocator_gives_its_medians_and_says_differences_need_two(self):
        _, out, _ = self.run_main(self.write("memcoord", 600, {"gemm": (1, 1.0)}))
        self.assertIn("differences: need exactly two allocators", out)

    def test_self_cpu_thread_by_thread_and_the_operators_apart_in_every_pair(self):
        # The autograd thread's ConvolutionBackward0 took longer under memcoord in both pairs: apart. Its mm overlaps
        # (1.0-3.0 against 2.0-2.5): not apart. The python thread's ops are level.
        auto = "autograd::engine::evaluate_function: ConvolutionBackward0"
        paths = [self.write("expandable", 600, {"k": (1, 1.0)},
                            {"python": {"aten::conv": 10.0}, "autograd": {auto: 5.0, "aten::mm": 1.0}}),
                 self.write("expandable", 600, {"k": (1, 1.0)},
                            {"python": {"aten::conv": 11.0}, "autograd": {auto: 5.5, "aten::mm": 3.0}}),
                 self.write("memcoord", 610, {"k": (1, 1.0)},
                            {"python": {"aten::conv": 10.5}, "autograd": {auto: 7.0, "aten::mm": 2.0}}),
                 self.write("memcoord", 610, {"k": (1, 1.0)},
                            {"python": {"aten::conv": 10.5}, "autograd": {auto: 8.0, "aten::mm": 2.5}})]
        code, out, _ = self.run_main(*paths, "--json", os.path.join(self.dir.name, "diff.json"))
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertIn("expandable: self CPU by thread: autograd 7.2 ms, python 10.5 ms (medians)", lines)
        self.assertIn("memcoord: self CPU by thread: autograd 9.8 ms, python 10.5 ms (medians)", lines)
        apart = [line for line in lines if line.startswith("self CPU apart")]
        self.assertEqual(apart, [f"self CPU apart on the autograd thread: {auto}: expandable [5.0, 5.5], "
                                 "memcoord [7.0, 8.0] ms (memcoord +2.25 ms)"])
        with open(os.path.join(self.dir.name, "diff.json")) as f:
            written = json.load(f)
        self.assertEqual(written["threads_apart"], {"autograd": [{"op": auto, "expandable": [5.0, 5.5],
                                                                  "memcoord": [7.0, 8.0]}], "python": []})
        self.assertEqual(written["threads"]["memcoord"], {"autograd": 9.75, "python": 10.5})

    def test_files_without_threads_give_no_thread_lines(self):
        paths = [self.write("expandable", 600, {"k": (1, 1.0)}), self.write("memcoord", 600, {"k": (1, 1.0)},
                                                                            {"python": {"op": 1.0}})]
        _, out, _ = self.run_main(*paths)
        self.assertNotIn("self CPU apart", out)
        self.assertIn("memcoord: self CPU by thread: python 1.0 ms (medians)", out)
        self.assertNotIn("expandable: self CPU", out)

    def test_files_it_cannot_read_name_themselves_and_exit_2(self):
        good = self.write("memcoord", 600, {"gemm": (1, 1.0)})
        bad = os.path.join(self.dir.name, "bad.json")
        cases = {"not json": "{", "no kernels": json.dumps({"allocator": "m", "first_step_ms": 1}),
                 "a list": json.dumps([1, 2]),
                 "bad count": json.dumps({"allocator": "m", "first_step_ms": 1, "kernels": {"k": {"count": "x",
                                                                                                   "ms": 1}}})}
        for case, content in cases.items():
            with self.subTest(case=case):
                with open(bad, "w") as f:
                    f.write(content)
                code, out, err = self.run_main(good, bad)
                self.assertEqual(code, 2)
                self.assertEqual(out, "")
                self.assertIn(f"kernels_diff: {bad}: not profile_first_step.py --kernels JSON", err)
        code, _, err = self.run_main(os.path.join(self.dir.name, "missing.json"))
        self.assertEqual(code, 2)
        self.assertIn("missing.json: not profile_first_step.py --kernels JSON", err)
        self.assertIn("FileNotFoundError", err)


class Event:
    """What profile_first_step.cpu_by_thread reads of a torch.profiler FunctionEvent."""

    def __init__(self, thread, name, self_us, device="DeviceType.CPU"):
        self.thread, self.name, self.self_cpu_time_total, self.device_type = thread, name, self_us, device


class CpuByThreadTest(unittest.TestCase):
    def test_threads_are_named_by_their_role_and_summed_operator_by_operator(self):
        events = [Event(7, "aten::conv2d", 400.0), Event(7, "aten::conv2d", 600.0), Event(7, "aten::add_", 50.0),
                  Event(9, "autograd::engine::evaluate_function: AddBackward0", 30.0), Event(9, "aten::mm", 200.0),
                  Event(11, "aten::copy_", 5.0),
                  Event(9, "gemm_kernel", 900.0, device="DeviceType.CUDA")]  # a kernel: not CPU time
        self.assertEqual(profile_first_step.cpu_by_thread(events), {
            "autograd": {"self_ms": 0.23, "ops": {
                "autograd::engine::evaluate_function: AddBackward0": {"count": 1, "self_ms": 0.03},
                "aten::mm": {"count": 1, "self_ms": 0.2}}},
            "python": {"self_ms": 1.05, "ops": {"aten::add_": {"count": 1, "self_ms": 0.05},
                                                "aten::conv2d": {"count": 2, "self_ms": 1.0}}},
            "thread 11": {"self_ms": 0.005, "ops": {"aten::copy_": {"count": 1, "self_ms": 0.005}}}})
        self.assertEqual(list(profile_first_step.cpu_by_thread(events)), ["autograd", "python", "thread 11"])


if __name__ == "__main__":
    unittest.main()
