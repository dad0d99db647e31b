"""bench/allocator/perturbed_side_by_side.py: the perturbed copies keep a trace's structure (every distinct size
scaled by one factor within the spread, the same copy for the same seed), and a run over a small trace sets
memcoord's replay beside expandable_segments' model copy by copy (with the memcoord CLI built here)."""

import gzip
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "allocator"))
import perturbed_side_by_side as pss  # noqa: E402

TRACE = os.path.join(os.path.dirname(__file__), "..", "allocator", "data", "steady_loop.trace.gz")
LINES = ["# memcoord workload=t\n", "a 10 1000 0\n", "a 20 5000000 0\n", "f 10 1000 0\n", "a 30 1000 0\n",
         "f 20 5000000 0\n", "f 30 1000 0\n"]


class PerturbTest(unittest.TestCase):
    def test_each_distinct_size_gets_one_factor_within_the_spread(self):
        out = pss.perturbed_lines(LINES, seed=3, spread=0.1)
        self.assertEqual(out[0], LINES[0])
        sizes = [int(l.split()[2]) for l in out[1:]]
        small, large = sizes[0], sizes[1]
        self.assertEqual(sizes, [small, large, small, small, large, small])  # repeated sizes stay repeated
        self.assertTrue(900 <= small <= 1100 and 4_500_000 <= large <= 5_500_000, sizes)
        self.assertEqual([l.split()[:2] for l in out[1:]], [l.split()[:2] for l in LINES[1:]])
        self.assertEqual(pss.perturbed_lines(LINES, 3, 0.1), out)  # seeded: the same copy again
        self.assertNotEqual(pss.perturbed_lines(LINES, 4, 0.1), out)
        self.assertEqual(pss.perturbed_lines(LINES, 5, 0.0), [l if l.startswith("#") else l for l in LINES])

    def test_powers_of_two_keep_their_size_when_asked_and_the_rest_their_factors(self):
        lines = ["a 1 1048576 0\n", "a 2 3000 0\n", "f 1 1048576 0\n", "a 3 4096 0\n", "f 2 3000 0\n"]
        kept = pss.perturbed_lines(lines, seed=7, spread=0.1, keep_powers_of_two=True)
        scaled = pss.perturbed_lines(lines, seed=7, spread=0.1)
        sizes = [int(l.split()[2]) for l in kept]
        self.assertEqual([sizes[0], sizes[2], sizes[3]], [1048576, 1048576, 4096])
        self.assertEqual(sizes[1], int(scaled[1].split()[2]))  # the same draw as without the option
        self.assertNotEqual(sizes[1], 3000)
        self.assertNotEqual(int(scaled[0].split()[2]), 1048576)  # without it, 1 MiB is scaled like the rest
        self.assertEqual([pss.is_power_of_two(n) for n in (0, 1, 3, 512, 1048576, 3 << 20)],
                         [False, True, False, True, True, False])

    def test_sizes_never_fall_to_zero(self):
        out = pss.perturbed_lines(["a 1 1 0\n", "f 1 1 0\n"], seed=0, spread=0.9)
        self.assertEqual([int(l.split()[2]) for l in out], [1, 1])


class RunTest(unittest.TestCase):
    def test_copies_are_replayed_beside_the_model(self):
        memcoord = pss.default_memcoord()
        if not os.access(memcoord, os.X_OK):
            self.skipTest(f"no memcoord CLI at {memcoord}")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            self.assertEqual(pss.main([TRACE, "--copies", "3", "--alloc-conf", "", "--alloc-conf", "thread_cache:0",
                                       "--json", out]), 0)
            with open(out) as f:
                report = json.load(f)
        self.assertEqual([r["alloc_conf"] for r in report["results"]], ["", "thread_cache:0"])
        for r in report["results"]:
            self.assertEqual(r["copies"], 3)
            diffs = [(c["memcoord_peak"] - c["model_peak"]) / pss.MIB for c in r["per_copy"]]
            self.assertAlmostEqual(r["mean_diff_mib"], sum(diffs) / 3)
            self.assertEqual(r["no_more"], sum(1 for d in diffs if d <= 0))
            for c in r["per_copy"]:
                self.assertGreater(c["memcoord_peak"], 0)
                self.assertGreater(c["memcoord_maps"], 0)
                self.assertGreater(c["model_pages"], 0)
                self.assertEqual(c["memcoord_waits"], 0)  # --gpu-lag 0: idle streams, nothing to wait for
            self.assertEqual(r["memcoord_waits"], 0)
        self.assertEqual(report["gpu_lag"], 0)

    def test_a_gpu_lag_reaches_the_replay(self):
        # The Llama's trace recorded on an H100: at --gpu-lag 200 mark_waits:on waits for markers when it packs at
        # its high-water mark (6 waits on the whole trace with the default 40 MiB units; 24 with 20 MiB units);
        # the default (mark_waits off) keeps only its drains (3; 4 with 20 MiB units).
        memcoord = pss.default_memcoord()
        if not os.access(memcoord, os.X_OK):
            self.skipTest(f"no memcoord CLI at {memcoord}")
        llama = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "traces", "llama_1b.trace.gz")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            self.assertEqual(pss.main([llama, "--copies", "1", "--spread", "0", "--gpu-lag", "200",
                                       "--alloc-conf", "mark_waits:on", "--alloc-conf", "", "--json", out]), 0)
            with open(out) as f:
                report = json.load(f)
        self.assertEqual(report["gpu_lag"], 200)
        waits = {r["alloc_conf"]: r["per_copy"][0]["memcoord_waits"] for r in report["results"]}
        self.assertEqual(waits, {"mark_waits:on": 6, "": 3})

    def test_bad_input_is_refused_with_a_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "none.trace.gz")
            memcoord = pss.default_memcoord()
            if os.access(memcoord, os.X_OK):
                self.assertEqual(pss.main([missing, "--copies", "1"]), 2)
                bad = os.path.join(tmp, "bad.trace.gz")
                with gzip.open(bad, "wt") as f:
                    f.write("a 1 100 0\nf 2 100 0\n")  # frees an address that is not live
                self.assertEqual(pss.main([bad, "--copies", "1"]), 2)
        with self.assertRaises(SystemExit):
            pss.main([TRACE, "--copies", "0"])
        with self.assertRaises(SystemExit):
            pss.main([TRACE, "--memcoord", "/nonexistent/memcoord"])
        with self.assertRaises(SystemExit):
            pss.main([TRACE, "--gpu-lag", "-1"])


if __name__ == "__main__":
    unittest.main()
