"""The runs kept in bench/pytorch_runs/2026-12-06d (mark_waits:off beside the default pool on an H100) against what
README.md and that folder's README say of them: the same device bytes in every process, the alternating pair's pack
waits gone, and first steps that no pooled comparison resolves."""

import json
import os
import sys
import tempfile
import unittest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
sys.path.insert(0, EXAMPLES)
import first_steps_pooled as pooled  # noqa: E402
from pytorch_runs import RunFolder, bench_files  # noqa: E402

RUNS = RunFolder("2026-12-06d")
OFF = "memcoord[mark_waits:off]"


def firststep_names(letters="abcdef"):
    return [f"d2e5571-firststep-{c}.json.gz" for c in sorted(letters)]


def firststep_files(letters="abcdef"):
    return [RUNS.file(name) for name in firststep_names(letters)]


def processes(letters="abcdef"):
    """(workload, allocator) -> the processes' records of the firststep runs `letters`."""
    return RUNS.processes(*firststep_names(letters))


def waits(proc):
    return [(i, s["pack_wait_ms"]) for i, s in enumerate(proc["memcoord_steps"]) if s["pack_waits"]]


class MarkWaitsRunsTest(unittest.TestCase):
    def test_the_folder_holds_what_its_readme_lists(self):
        self.assertEqual(RUNS.names(), ["README.md", "d2e5571-capi_bench.json", "d2e5571-capi_bench_pinned.json"] +
                         firststep_names())

    def test_off_used_the_defaults_bytes_in_every_process(self):
        procs = processes()
        expected = {  # workload -> device bytes of every process (expandable segments' where measured)
            "alternating": (16313745408, 16313745408),
            "resnet50_amp": (6350176256, 6350176256),
            "llama_1b": (10007609344, 11100225536),
            "gpt2_bf16_varlen": (25262292992, None),
            "gpt2_fp32": (16078864384, None),
        }
        for workload, (mine, expandable) in expected.items():
            with self.subTest(workload=workload):
                for allocator in ("memcoord", OFF):
                    self.assertEqual({p["device_bytes"] for p in procs[(workload, allocator)]}, {mine})
                if expandable is not None:
                    self.assertEqual({p["device_bytes"] for p in procs[(workload, "expandable")]}, {expandable})
        self.assertEqual(len(procs[("alternating", OFF)]), 12)
        self.assertEqual(len(procs[("resnet50_amp", OFF)]), 15)
        self.assertEqual(len(procs[("llama_1b", OFF)]), 9)

    def test_off_removed_the_pairs_pack_waits(self):
        procs = processes()
        default = procs[("alternating", "memcoord")]
        first = [dict(waits(p)).get(0) for p in default]
        self.assertEqual(sum(w is not None for w in first), 11)
        present = [w for w in first if w is not None]
        self.assertEqual((round(min(present), 1), round(max(present), 1)), (1.4, 16.0))
        step2 = [dict(waits(p))[2] for p in default]
        self.assertEqual((round(min(step2), 1), round(max(step2), 1)), (32.7, 55.3))
        self.assertTrue(all(waits(p) == [] for p in procs[("alternating", OFF)]))
        miss = {a: sorted(p["memcoord_first_step"]["miss_ms"] for p in procs[("alternating", a)])
                for a in ("memcoord", OFF)}
        self.assertEqual((round(miss["memcoord"][0], 1), round(miss["memcoord"][-1], 1)), (36.2, 42.8))
        self.assertEqual((round(miss[OFF][0], 1), round(miss[OFF][-1], 1)), (24.4, 36.7))
        # What off leaves alone: the Llama's and GPT-2 bf16's waits (drains, pressure) in the same steps.
        for workload, steps in (("llama_1b", {1, 2}), ("gpt2_bf16_varlen", {2, 13, 17, 20})):
            for allocator in ("memcoord", OFF):
                with self.subTest(workload=workload, allocator=allocator):
                    seen = {i for p in procs[(workload, allocator)] for i, _ in waits(p)}
                    self.assertEqual(seen, steps)
        self.assertTrue(all(waits(p) == [] for a in ("memcoord", OFF) for p in procs[("gpt2_fp32", a)]))
        resnet_default = [waits(p) for p in procs[("resnet50_amp", "memcoord")]]
        self.assertEqual(sum(bool(w) for w in resnet_default), 1)
        self.assertTrue(all(waits(p) == [] for p in procs[("resnet50_amp", OFF)]))

    def quoted(self, summary, figures, every=True):
        if every:  # no workload beyond the quoted ones
            self.assertEqual(set(summary), set(figures))
        for workload, (shift, pairs, p) in figures.items():
            s = summary[workload]
            with self.subTest(workload=workload):
                self.assertEqual(round(s["shift_ms"]), shift)
                self.assertEqual((s["memcoord_shorter"], s["pairs"]), pairs)
                self.assertEqual(round(s["permutation_p"], 2), p)
                self.assertTrue(s["verdict"].startswith("not resolved"), s["verdict"])

    def test_no_first_step_resolved_under_either_setting(self):
        paths = firststep_files("abcd")
        default, _ = pooled.pooled([(p, pooled.load(p, keep_first=True)) for p in paths])
        self.quoted(default, {"alternating": (6, (33, 72), 0.60), "resnet50_amp": (21, (34, 81), 0.58),
                              "llama_1b": (-1, (23, 45), 0.96)})
        off, _ = pooled.pooled([(p, pooled.load(p, OFF, keep_first=True)) for p in paths])
        self.quoted(off, {"alternating": (6, (31, 72), 0.61), "resnet50_amp": (-8, (41, 81), 0.91),
                          "llama_1b": (-3, (24, 45), 0.79)})

    def test_off_against_the_default(self):
        # The default's processes in expandable segments' place, so the pooled comparison is off against it.
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name in firststep_names("abcd"):
                doc = RUNS.json(name)
                doc["runs"] = [dict(r, allocator="expandable" if r["allocator"] == "memcoord" else r["allocator"])
                               for r in doc["runs"] if r["allocator"] != "expandable"]
                paths.append(os.path.join(tmp, name[:-3]))
                with open(paths[-1], "w") as f:
                    json.dump(doc, f)
            summary, _ = pooled.pooled([(p, pooled.load(p, OFF, keep_first=True)) for p in paths])
        self.quoted(summary, {"alternating": (-4, (42, 72), 0.65), "resnet50_amp": (4, (39, 81), 0.92),
                              "llama_1b": (0, (23, 45), 1.0)})
        medians = summary["alternating"]["median_first_ms"]  # PAIR's keys: "memcoord" is off, "expandable" on
        self.assertEqual((round(medians["memcoord"]), round(medians["expandable"])), (445, 457))

    def test_pooled_with_the_runs_before_it(self):
        paths = bench_files([("2026-12-06c", ("bench", "firststep")), ("2026-12-06d", firststep_names("abcd"))])
        summary, _ = pooled.pooled([(p, pooled.load(p, keep_first=True)) for p in paths])
        self.quoted(summary, {"alternating": (4, (52, 133), 0.34), "resnet50_amp": (8, (66, 142), 0.70),
                              "llama_1b": (-1, (46, 90), 0.92)}, every=False)
        self.assertEqual(tuple(round(x) for x in summary["alternating"]["interval_ms"]), (-3, 14))

    def test_gpt2_bf16s_median_steps(self):
        procs = processes("e")
        medians = {a: sorted(round(p["median_step_ms"], 1) for p in procs[("gpt2_bf16_varlen", a)])
                   for a in ("memcoord", OFF)}
        self.assertEqual(medians, {"memcoord": [159.4, 166.0], OFF: [185.7, 192.5]})
        step1 = {a: sorted(round(p["step_ms"][1]) for p in procs[("gpt2_bf16_varlen", a)]) for a in ("memcoord", OFF)}
        self.assertEqual(step1, {"memcoord": [146, 161], OFF: [192, 196]})
        # Up to step 1's end the two settings' pools counted the same; in step 2 the default waited twice, off once.
        def counted(p, step):
            s = p["memcoord_steps"][step]
            return (s["misses"], s["units_mapped"], s["units_unmapped"], s["pack_waits"], s["pack_stream_syncs"])
        for a, step2_waits in (("memcoord", 2), (OFF, 1)):
            for p in procs[("gpt2_bf16_varlen", a)]:
                self.assertEqual([counted(p, 0), counted(p, 1)], [(109, 380, 17, 0, 0), (0, 0, 0, 0, 0)])
                self.assertEqual(counted(p, 2), (27, 207, 19, step2_waits, 0))

    def test_capi_bench_per_cpu(self):
        unpinned = {(r["lib"].startswith("control"), r["threads"]): r
                    for r in RUNS.json("d2e5571-capi_bench.json")["results"]}
        one = unpinned[(False, 1)]
        by_cpu = {}
        for ns, cpus in zip(one["runs"], one["run_cpus"]):
            by_cpu.setdefault(cpus[0], []).append(ns)
        self.assertEqual(sorted(by_cpu), [5, 8])
        self.assertEqual((round(min(by_cpu[8]), 1), round(max(by_cpu[8]), 1)), (70.2, 72.0))
        self.assertEqual((round(min(by_cpu[5]), 1), round(max(by_cpu[5]), 1)), (40.8, 42.3))
        self.assertEqual((round(one["median_ns_per_pair"], 1), round(unpinned[(False, 4)]["median_ns_per_pair"], 1)),
                         (70.4, 69.3))
        pinned = {(r["lib"].startswith("control"), r["threads"]): round(r["median_ns_per_pair"], 1)
                  for r in RUNS.json("d2e5571-capi_bench_pinned.json")["results"]}
        self.assertEqual(pinned, {(False, 1): 43.1, (False, 4): 46.3, (True, 1): 53.2, (True, 4): 49.3})


if __name__ == "__main__":
    unittest.main()
