"""examples/pytorch/kernels_diff.py on made-up profile_first_step.py --kernels files: the medians per allocator,
the kernels one allocator alone launched, counts apart in every pair, "same kernels", and the errors for files it
cannot read."""

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


class KernelsDiffTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.count = 0

    def tearDown(self):
        self.dir.cleanup()

    def write(self, allocator, first_ms, kernels):
        """kernels: {name: (count, ms)}; returns the file's path."""
        self.count += 1
        path = os.path.join(self.dir.name, f"{allocator}-{self.count}.kernels.json")
        with open(path, "w") as f:
            json.dump({"workload": "w", "allocator": allocator, "first_step_ms": first_ms,
                       "kernels": {n: {"count": c, "ms": ms} for n, (c, ms) in kernels.items()}}, f)
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


if __name__ == "__main__":
    unittest.main()
