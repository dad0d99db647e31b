"""The pure-Python conversions (no library calls): memcoord's figures under PyTorch's key names, and
memcoord's JSON snapshot in the shape PyTorch's memory_viz opens."""

import json
import os
import pathlib
import pickle
import sys
import tempfile
import unittest

import support  # noqa: F401  (environment)

import memcoord
from memcoord import _snapshot, _stats, _torch

RAW = {
    "device": 0, "pools": 2, "allocated_bytes": 6 << 20, "peak_allocated_bytes": 10 << 20,
    "requested_bytes": 5 << 20, "peak_requested_bytes": 9 << 20, "reserved_bytes": 12 << 20,
    "peak_reserved_bytes": 14 << 20, "active_bytes": 7 << 20, "peak_active_bytes": 11 << 20,
    "largest_free_bytes": 4 << 20, "limit_bytes": 0, "live_blocks": 3, "allocations": 10, "frees": 7,
    "cache_hits": 6, "ooms": 1, "backend_allocations": 5, "backend_frees": 2,
    "backend_allocated_bytes": 20 << 20, "backend_released_bytes": 8 << 20, "trims": 1,
    "trimmed_bytes": 8 << 20, "device_total_bytes": 1 << 30, "peak_live_blocks": 5,
    "allocated_bytes_total": 30 << 20, "freed_bytes_total": 24 << 20,
}


class StatsMappingTest(unittest.TestCase):
    def test_current_peak_and_counts(self):
        flat = _stats.flatten(_stats.torch_stats(0, RAW))
        self.assertEqual(flat["allocated_bytes.all.current"], 6 << 20)
        self.assertEqual(flat["allocated_bytes.all.peak"], 10 << 20)
        self.assertEqual(flat["reserved_bytes.all.current"], 12 << 20)
        self.assertEqual(flat["reserved_bytes.all.peak"], 14 << 20)
        self.assertEqual(flat["reserved_bytes.all.allocated"], 20 << 20)
        self.assertEqual(flat["reserved_bytes.all.freed"], 8 << 20)
        self.assertEqual(flat["requested_bytes.all.current"], 5 << 20)
        self.assertEqual(flat["active_bytes.all.peak"], 11 << 20)
        self.assertEqual(flat["allocation.all.current"], 3)
        self.assertEqual(flat["allocation.all.allocated"], 10)
        self.assertEqual(flat["allocation.all.freed"], 7)
        self.assertEqual(flat["allocated_bytes.all.allocated"], 30 << 20)
        self.assertEqual(flat["allocated_bytes.all.freed"], 24 << 20)
        self.assertEqual(flat["requested_bytes.all.allocated"], 0)  # not kept
        self.assertEqual(flat["segment.all.current"], 3)
        # Count peaks were 0 while blocks were live (memory_summary printed "Allocations | 3 | 0 |").
        self.assertEqual(flat["allocation.all.peak"], 5)
        self.assertEqual(flat["active.all.peak"], 5)
        self.assertEqual(flat["segment.all.peak"], 3)  # no peak of the segment count is kept: the current one
        self.assertEqual(flat["num_ooms"], 1)
        self.assertEqual(flat["num_device_alloc"], 5)
        self.assertEqual(flat["num_device_free"], 2)
        self.assertEqual(flat["memcoord.cache_hits"], 6)
        self.assertEqual(flat["allocated_bytes.small_pool.current"], 0)
        self.assertEqual(list(flat), sorted(flat))

    def test_every_peak_is_at_least_its_current_figure(self):
        # A library before memcoord_device_stats version 4 has no peak_live_blocks (it reads 0).
        old = dict(RAW)
        del old["peak_live_blocks"]
        for raw in (old, dict(RAW, peak_live_blocks=0)):
            flat = _stats.flatten(_stats.torch_stats(0, raw))
            self.assertEqual(flat["allocation.all.peak"], 3)
            self.assertEqual(flat["active.all.peak"], 3)
            for key, value in flat.items():
                if key.endswith(".peak"):
                    self.assertGreaterEqual(value, flat[key[: -len("peak")] + "current"], key)

    def test_accumulated_baseline(self):
        _stats.reset_accumulated(7, RAW)
        later = dict(RAW, allocations=15, frees=11, ooms=1, backend_allocations=6,
                     allocated_bytes_total=33 << 20, freed_bytes_total=26 << 20)
        flat = _stats.flatten(_stats.torch_stats(7, later))
        self.assertEqual(flat["allocation.all.allocated"], 5)
        self.assertEqual(flat["allocation.all.freed"], 4)
        self.assertEqual(flat["allocated_bytes.all.allocated"], 3 << 20)
        self.assertEqual(flat["allocated_bytes.all.freed"], 2 << 20)
        self.assertEqual(flat["num_ooms"], 0)
        self.assertEqual(flat["num_device_alloc"], 1)
        # current and peak values are never baselined
        self.assertEqual(flat["allocated_bytes.all.current"], 6 << 20)


SNAPSHOT = {
    "device": 1,
    "pools": [
        {
            "name": "default",
            "stats": {"allocated_bytes": 3 << 20},
            "segments": [
                {
                    "address": 0x7000_0000,
                    "size": 4 << 20,
                    "blocks": [
                        {"address": 0x7010_0000, "size": 1 << 20, "requested": 1000, "state": "inactive", "stream": 0},
                        {"address": 0x7000_0000, "size": 1 << 20, "requested": 1 << 20,
                         "state": "active_allocated", "stream": 7},
                        {"address": 0x7020_0000, "size": 2 << 20, "requested": 2_000_000,
                         "state": "active_allocated", "stream": 7},
                    ],
                }
            ],
        },
        {"name": "graph", "pool_id": [1, 2], "segments": [{"address": 0x9000_0000, "size": 2 << 20, "blocks": []}]},
        {
            "name": "mapped",
            "segments": [
                {
                    # a cuda-vmm arena: 8 MiB of address space, memory behind 2 MiB at each end only
                    "address": 0xA000_0000, "size": 8 << 20, "mapped_bytes": 4 << 20, "small": True,
                    "blocks": [
                        {"address": 0xA000_0000, "size": 2 << 20, "requested": 100, "state": "allocated"},
                        {"address": 0xA020_0000, "size": 4 << 20, "state": "unmapped"},
                        {"address": 0xA060_0000, "size": 2 << 20, "state": "free"},
                    ],
                }
            ],
        },
    ],
    "trace": [
        {"action": "alloc", "address": 0x7000_0000, "size": 1 << 20, "stream": 7, "time_us": 5},
        {"action": "free", "address": 0x7010_0000, "size": 1 << 20, "stream": 0, "time_us": 6},
        {"action": "map", "address": 0x7000_0000, "size": 2 << 20, "stream": 0, "time_us": 1},
        {"action": "oom", "size": 1 << 40, "free_bytes": 123, "time_us": 9},
        {"action": "something_new", "size": 1},
    ],
}


class SnapshotConversionTest(unittest.TestCase):
    def test_segments_blocks_and_traces(self):
        snap = _snapshot.from_memcoord([{"device": 0, "pools": [], "trace": []}, SNAPSHOT])
        self.assertEqual(len(snap["segments"]), 4)
        first = snap["segments"][0]
        self.assertEqual(first["device"], 1)
        self.assertEqual(first["total_size"], 4 << 20)
        self.assertEqual(first["allocated_size"], 3 << 20)
        self.assertEqual(first["requested_size"], (1 << 20) + 2_000_000)
        self.assertEqual([b["address"] for b in first["blocks"]], sorted(b["address"] for b in first["blocks"]))
        self.assertEqual(first["segment_pool_id"], (0, 0))
        self.assertEqual(snap["segments"][1]["segment_pool_id"], (1, 2))
        self.assertEqual(snap["segments"][1]["blocks"][0]["state"], "inactive")
        # The mapped arena became two segments, one per run of memory; the unmapped range is in neither.
        mapped = [s for s in snap["segments"] if s["address"] >= 0xA000_0000]
        self.assertEqual([(s["address"], s["total_size"]) for s in mapped],
                         [(0xA000_0000, 2 << 20), (0xA060_0000, 2 << 20)])
        self.assertTrue(all(s["is_expandable"] and s["segment_type"] == "small" for s in mapped))
        self.assertEqual(mapped[0]["blocks"][0]["state"], "active_allocated")
        self.assertEqual(mapped[0]["requested_size"], 100)
        self.assertEqual(mapped[1]["allocated_size"], 0)
        self.assertEqual(len(snap["device_traces"]), 2)
        actions = [e["action"] for e in snap["device_traces"][1]]
        self.assertEqual(actions, ["alloc", "free_completed", "segment_map", "oom"])
        self.assertEqual(snap["device_traces"][1][3]["device_free"], 123)
        for entry in snap["device_traces"][1]:
            self.assertEqual(entry["frames"], [])
        # memory_viz's segsum asserts that each segment's blocks tile it exactly.
        for segment in snap["segments"]:
            self.assertEqual(sum(b["size"] for b in segment["blocks"]), segment["total_size"])
            end = segment["address"]
            for block in segment["blocks"]:
                self.assertEqual(block["address"], end)
                end += block["size"]

    def test_segment_streams_and_capture_pool_ids(self):
        # Every segment had stream 0 and segment_pool_id (0, 0). The JSON gives streams per block and a capture
        # pool's id in its name only (worker/capi/capture.cc: "capture(hi, lo)@device").
        doc = {"device": 0, "pools": [
            {"name": "default", "segments": [
                {"address": 0x1000, "size": 0x3000, "blocks": [
                    {"address": 0x1000, "size": 0x1000, "state": "inactive", "stream": 3},
                    {"address": 0x2000, "size": 0x2000, "state": "active_allocated", "stream": 9},
                ]},
                {"address": 0x8000, "size": 0x1000, "blocks": [
                    {"address": 0x8000, "size": 0x1000, "state": "inactive", "stream": 4}]},
            ]},
            {"name": "capture(7, 12)@0", "segments": [
                {"address": 0x5000, "size": 0x1000, "blocks": [
                    {"address": 0x5000, "size": 0x1000, "state": "active_allocated", "stream": 11}]}]},
            {"name": "capture-ish", "segments": [{"address": 0x9000, "size": 0x1000, "blocks": []}]},
        ]}
        by_address = {s["address"]: s for s in _snapshot.from_memcoord([doc])["segments"]}
        self.assertEqual(by_address[0x1000]["stream"], 9)  # the live blocks' stream, not the first block's
        self.assertEqual(by_address[0x8000]["stream"], 4)  # all free: the blocks' stream
        self.assertEqual(by_address[0x9000]["stream"], 0)  # no block says
        self.assertEqual(by_address[0x1000]["segment_pool_id"], (0, 0))
        self.assertEqual(by_address[0x5000]["segment_pool_id"], (7, 12))
        self.assertEqual(by_address[0x5000]["stream"], 11)
        self.assertEqual(by_address[0x9000]["segment_pool_id"], (0, 0))

    def test_a_path_must_be_a_file_name(self):
        # An int went to open() as a file descriptor: the pickle was written to it and the descriptor closed.
        snap = _snapshot.from_memcoord([SNAPSHOT])
        for bad in (5, True, 2.5, None, object()):
            with self.assertRaises(TypeError) as caught:
                _snapshot.write_pickle(snap, bad)
            self.assertIn("str, bytes or os.PathLike", str(caught.exception))
        with tempfile.TemporaryDirectory() as tmp:
            for path in (os.path.join(tmp, "a.pickle"), pathlib.Path(tmp) / "b.pickle",
                         os.fsencode(os.path.join(tmp, "c.pickle"))):
                _snapshot.write_pickle(snap, path)
                with open(path, "rb") as f:
                    self.assertEqual(pickle.load(f), snap)

    def test_pickle_round_trip(self):
        snap = _snapshot.from_memcoord([SNAPSHOT])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.pickle")
            _snapshot.write_pickle(snap, path)
            with open(path, "rb") as f:
                self.assertEqual(pickle.load(f), snap)

    def test_bad_json_names_the_problem(self):
        with self.assertRaises(ValueError) as caught:
            _snapshot.parse_json("{not json")
        self.assertIn("not JSON", str(caught.exception))
        self.assertEqual(_snapshot.parse_json(json.dumps(SNAPSHOT))["device"], 1)


class HistoryEntriesTest(unittest.TestCase):
    """PyTorch's max_entries (torch.cuda.memory._record_memory_history) for memcoord.record_history."""

    def test_only_the_unbounded_default_and_too_many_are_capped(self):
        # Every number above 1,000,000 was cut to it, an explicit 5,000,000 included.
        self.assertEqual(_torch._history_entries(sys.maxsize), _torch.HISTORY_TORCH_MAX_ENTRIES)
        self.assertEqual(_torch._history_entries(5_000_000), 5_000_000)
        self.assertEqual(_torch._history_entries(memcoord.HISTORY_MAX_ENTRIES), memcoord.HISTORY_MAX_ENTRIES)
        self.assertEqual(_torch._history_entries(memcoord.HISTORY_MAX_ENTRIES + 1), memcoord.HISTORY_MAX_ENTRIES)
        self.assertEqual(_torch._history_entries(2**62), memcoord.HISTORY_MAX_ENTRIES)
        self.assertEqual(_torch._history_entries(1_000), 1_000)
        self.assertEqual(_torch._history_entries(0), 1)


if __name__ == "__main__":
    unittest.main()
