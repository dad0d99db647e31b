"""bench/allocator/peak_free_blocks against `memcoord replay`: the same peak on the shared traces, its arena's
mapped bytes split into live and free blocks, smaller units leaving less free memory at the peak, and clear
errors for a missing trace or a bad MEMCOORD_ALLOC_CONF entry."""

import gzip
import json
import os
import subprocess
import tempfile
import unittest

TRACES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "traces"))
PROBE = os.environ.get("MEMCOORD_PEAK_FREE_BLOCKS", "")
CLI = os.environ.get("MEMCOORD_CLI", "")


def probe(*args):
    return subprocess.run([PROBE, *args], capture_output=True, text=True, timeout=100)


def figures(trace, conf=""):
    run = probe(trace, conf)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


class PeakFreeBlocksTest(unittest.TestCase):
    def setUp(self):
        # ctest sets both (bench/allocator/CMakeLists.txt registers this test only where both are built).
        self.assertTrue(PROBE and CLI, "MEMCOORD_PEAK_FREE_BLOCKS and MEMCOORD_CLI must name the built binaries")

    def test_the_peak_is_the_replays_and_the_arena_adds_up(self):
        for name in ("resnet50_amp", "gpt2_fp32"):
            trace = os.path.join(TRACES, name + ".trace.gz")
            with self.subTest(trace=name):
                mine = figures(trace)
                replay = subprocess.run([CLI, "replay", "--repeat", "1", "--json", "--one-thread", trace],
                                        capture_output=True, text=True, timeout=100)
                self.assertEqual(replay.returncode, 0, replay.stderr)
                self.assertEqual(mine["peak_reserved_bytes"], json.loads(replay.stdout)["peak_reserved_bytes"])
                self.assertEqual(mine["large_mapped_bytes"],
                                 mine["large_live_block_bytes"] + mine["large_free_bytes"])
                self.assertEqual(sum(mine["free_blocks_by_mib"].values()), mine["large_free_blocks"])
                self.assertLessEqual(mine["free_bytes_in_blocks_under_a_unit"], mine["large_free_bytes"])
                self.assertEqual(mine["unit_bytes"], 40 << 20)  # the default unit

    def test_smaller_units_leave_less_free_memory_at_the_peak(self):
        trace = os.path.join(TRACES, "resnet50_amp.trace.gz")
        wide, narrow = figures(trace), figures(trace, "large_map_unit:2MiB")
        self.assertEqual(narrow["unit_bytes"], 2 << 20)
        self.assertLess(narrow["large_free_bytes"], wide["large_free_bytes"])
        self.assertLess(narrow["peak_reserved_bytes"], wide["peak_reserved_bytes"])

    def test_bad_input_is_named(self):
        run = probe(os.path.join(TRACES, "resnet50_amp.trace.gz"), "large_map_unit:lots")
        self.assertEqual(run.returncode, 2)
        self.assertIn("large_map_unit", run.stderr)
        run = probe("/nonexistent/trace.gz")
        self.assertEqual(run.returncode, 2)
        self.assertIn("/nonexistent/trace.gz", run.stderr)
        with tempfile.TemporaryDirectory() as folder:
            garbage = os.path.join(folder, "garbage.trace.gz")
            with gzip.open(garbage, "wt") as f:
                f.write("a zz notanumber 0\n")
            run = probe(garbage)
            self.assertEqual(run.returncode, 2)
            self.assertIn("peak_free_blocks:", run.stderr)
        run = probe()
        self.assertEqual(run.returncode, 2)
        self.assertIn("usage", run.stderr)


if __name__ == "__main__":
    unittest.main()
