"""python3 -m memcoord.snapshot_trace: a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot
writes) becomes a trace that `memcoord replay` reads. Snapshots built here in PyTorch's shape, and memcoord's
own (`memcoord replay --snapshot`), converted and replayed by the real CLI; bad files refused with a message."""

import collections
import gzip
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import unittest

import support  # noqa: F401  (environment)
from memcoord import snapshot_trace

MIB = 1 << 20
DATA = os.path.join(os.path.dirname(__file__), "..", "allocator", "data")


def event(action, addr, size, stream=0):
    # PyTorch's entries also carry frames and a time; the converter reads action, addr, size and stream.
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": 1,
            "frames": [{"filename": "train.py", "line": 3, "name": "step"}]}


def pytorch_snapshot(device_traces):
    return {"segments": [], "device_traces": device_traces, "allocator_settings": {"expandable_segments": False},
            "external_annotations": []}


class ConvertTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write_pickle(self, name, value):
        with open(self.path(name), "wb") as f:
            pickle.dump(value, f)
        return self.path(name)

    def run_main(self, *args):
        out, err = [], []
        real_out, real_err = sys.stdout, sys.stderr
        sys.stdout = type("W", (), {"write": lambda _, s: out.append(s), "flush": lambda _: None})()
        sys.stderr = type("W", (), {"write": lambda _, s: err.append(s), "flush": lambda _: None})()
        try:
            code = snapshot_trace.main(list(args))
        finally:
            sys.stdout, sys.stderr = real_out, real_err
        return code, "".join(out), "".join(err)

    def test_a_pytorch_snapshot_replays_through_the_cli(self):
        base = 0x7F0000000000
        trace = [event("segment_alloc", base, 20 * MIB), event("alloc", base, 8 * MIB),
                 event("alloc", base + 8 * MIB, 4 * MIB, stream=7), event("free_requested", base, 8 * MIB),
                 event("free_completed", base, 8 * MIB), event("snapshot", 0, 0), event("oom", 0, 64 * MIB),
                 event("alloc", base, 6 * MIB), event("free_completed", base + 8 * MIB, 4 * MIB, stream=7)]
        other = [event("alloc", base, MIB)]  # device 1: fewer allocations, not picked by default
        snapshot = self.write_pickle("train_step.pickle", pytorch_snapshot([trace, other]))
        code, out, err = self.run_main(snapshot)
        self.assertEqual(code, 0, err)
        written = self.path("train_step.trace.gz")
        self.assertIn(f"wrote {written}: device 0, 3 allocations, 2 frees, 1 blocks live at the end", out)
        with gzip.open(written, "rt") as f:
            lines = f.read().splitlines()
        self.assertTrue(lines[0].startswith("# pytorch snapshot") and "workload=train_step;" in lines[0])
        self.assertEqual(lines[1:], [f"S {base:x} {20 * MIB} 0", f"a {base:x} {8 * MIB} 0",
                                     f"a {base + 8 * MIB:x} {4 * MIB} 7", f"r {base:x} {8 * MIB} 0",
                                     f"f {base:x} {8 * MIB} 0", f"a {base:x} {6 * MIB} 0",
                                     f"f {base + 8 * MIB:x} {4 * MIB} 7"])
        cli = os.environ.get("MEMCOORD_CLI")
        if not cli:
            self.skipTest("no memcoord CLI in this build")
        replay = subprocess.run([cli, "replay", "--json", "--repeat", "1", written], capture_output=True, text=True)
        self.assertEqual(replay.returncode, 0, replay.stderr)
        figures = json.loads(replay.stdout)
        self.assertEqual(figures["allocations"], 3)
        self.assertEqual(figures["workload"], "train_step")
        self.assertEqual(figures["peak_requested_bytes"], 12 * MIB)
        # Device 1 on request.
        code, out, _ = self.run_main(snapshot, "--device", "1", "-o", self.path("d1.trace"))
        self.assertEqual(code, 0)
        self.assertIn("device 1, 1 allocations", out)

    def test_blocks_from_before_the_window_start_the_trace_as_live(self):
        # The window frees two blocks it never saw allocated (0x1000, 0x9000), and the segments at the end hold
        # one it never allocated (0x50000, the model's weights when recording starts after the model is
        # built): all three start the trace as live. 0x20000, allocated in the window, is not added twice;
        # inactive blocks and another device's segments are not blocks.
        trace = [event("free_requested", 0x1000, MIB), event("free_completed", 0x1000, MIB),
                 event("free_completed", 0x9000, 3 * MIB, stream=5), event("alloc", 0x20000, 2 * MIB)]
        segments = [
            {"device": 0, "address": 0x0, "stream": 0, "total_size": 20 * MIB,
             "blocks": [{"address": 0x20000, "size": 2 * MIB, "requested_size": 2 * MIB, "state": "active_allocated"},
                        {"address": 0x50000, "size": 4 * MIB, "requested_size": 4 * MIB - 100,
                         "state": "active_allocated"},
                        {"address": 0x90000, "size": 8 * MIB, "requested_size": 0, "state": "inactive"}]},
            {"device": 1, "address": 0x0, "stream": 0, "total_size": 20 * MIB,
             "blocks": [{"address": 0x70000, "size": MIB, "requested_size": MIB, "state": "active_allocated"}]}]
        snapshot = self.write_pickle("late.pickle", dict(pytorch_snapshot([trace]), segments=segments))
        code, out, _ = self.run_main(snapshot, "-o", self.path("late.trace"))
        self.assertEqual(code, 0)
        self.assertIn("1 allocations, 2 frees, 2 blocks live at the end; 3 blocks (8.0 MiB) were allocated before "
                      "the recorded window", out)
        with open(self.path("late.trace")) as f:
            self.assertEqual(f.read().splitlines()[1:], [
                f"a 1000 {MIB} 0", f"a 9000 {3 * MIB} 5", f"a 50000 {4 * MIB - 100} 0",
                f"f 1000 {MIB} 0", f"f 9000 {3 * MIB} 5", f"a 20000 {2 * MIB} 0"])
        cli = os.environ.get("MEMCOORD_CLI")
        if cli:
            replay = subprocess.run([cli, "replay", "--json", "--repeat", "1", self.path("late.trace")],
                                    capture_output=True, text=True)
            self.assertEqual(replay.returncode, 0, replay.stderr)
            self.assertEqual(json.loads(replay.stdout)["peak_requested_bytes"], 8 * MIB - 100)

    def test_memcoords_own_snapshot_converts_back_to_its_trace(self):
        cli = os.environ.get("MEMCOORD_CLI")
        if not cli:
            self.skipTest("no memcoord CLI in this build")
        source = os.path.join(DATA, "steady_loop.trace.gz")
        snapshot = self.path("steady.pickle")
        made = subprocess.run([cli, "replay", "--json", "--repeat", "1", "--snapshot", snapshot, source],
                              capture_output=True, text=True)
        self.assertEqual(made.returncode, 0, made.stderr)
        code, _, err = self.run_main(snapshot, "-o", self.path("back.trace.gz"))
        self.assertEqual(code, 0, err)
        again = subprocess.run([cli, "replay", "--json", "--repeat", "1", self.path("back.trace.gz")],
                               capture_output=True, text=True)
        self.assertEqual(again.returncode, 0, again.stderr)
        before, after = json.loads(made.stdout), json.loads(again.stdout)
        self.assertEqual(after["allocations"], before["allocations"])
        self.assertEqual(after["peak_requested_bytes"], before["peak_requested_bytes"])

    def test_bad_files_are_refused_with_what_is_wrong(self):
        with open(self.path("text.pickle"), "w") as f:
            f.write("a 7f00 100 0\n")
        cases = [
            (self.path("missing.pickle"), "No such file"),
            (self.path("text.pickle"), "is not a readable pickle"),
            (self.write_pickle("class.pickle", collections.OrderedDict(a=1)),
             "refers to collections.OrderedDict; a memory snapshot holds plain values only"),
            (self.write_pickle("list.pickle", [1, 2]), "not a memory snapshot (no 'segments'"),
            (self.write_pickle("notrace.pickle", {"segments": []}), "has no 'device_traces'"),
            (self.write_pickle("empty.pickle", pytorch_snapshot([[], []])),
             "no allocations: record them with torch.cuda.memory._record_memory_history"),
            (self.write_pickle("negative.pickle", pytorch_snapshot([[event("alloc", -5, MIB)]])),
             "event 0 (alloc) has addr -5; expected a non-negative integer"),
            (self.write_pickle("twice.pickle", pytorch_snapshot([[event("alloc", 0x10, MIB)] * 2])),
             "event 1 allocates 0x10, which is already live"),
        ]
        for path, says in cases:
            with self.subTest(path=os.path.basename(path)):
                code, out, err = self.run_main(path, "-o", self.path("out.trace"))
                self.assertEqual(code, 2)
                self.assertIn(says, err)
                self.assertTrue(err.startswith("memcoord.snapshot_trace: "), err)
        good = self.write_pickle("good.pickle", pytorch_snapshot([[event("alloc", 0x10, MIB)]]))
        code, _, err = self.run_main(good, "--device", "3", "-o", self.path("out.trace"))
        self.assertEqual(code, 2)
        self.assertIn("--device 3 is out of range: the snapshot has traces for devices 0..0", err)
        self.assertIn(f"{good}: --device 3", err)  # a conversion's error names the file too
        nodevice = self.write_pickle("nodevice.pickle", pytorch_snapshot([]))
        code, _, err = self.run_main(nodevice, "--device", "0", "-o", self.path("out.trace"))
        self.assertEqual(code, 2)
        self.assertIn(f"{nodevice}: the snapshot's 'device_traces' is empty", err)
        code, _, err = self.run_main(good, "-o", os.path.join(self.dir.name, "no", "such", "dir.trace"))
        self.assertEqual(code, 2)
        self.assertIn("cannot write", err)


    def test_malformed_pickles_exit_2_with_a_message(self):
        # Each used to end in a traceback (exit 1), breaking the "0, or 2 with a message" promise.
        def raw(name, data):
            with open(self.path(name), "wb") as f:
                f.write(data)
            return self.path(name)

        good_trace = [[event("alloc", 0x10, MIB)]]
        cases = [
            # A string of 2**50 bytes announced (BINUNICODE8): reading it is a MemoryError (a Python that reads
            # such lengths in chunks finds the data truncated instead).
            (raw("huge.pickle", b"\x80\x04\x8d" + struct.pack("<Q", 2**50) + b"abc"),
             "huge.pickle is not a readable pickle: "),
            # A frame longer than any file (FRAME): OverflowError.
            (raw("frame.pickle", b"\x80\x04\x95" + struct.pack("<Q", 2**63)), "is not a readable pickle: Overflow"),
            # BUILD on a dict: AttributeError.
            (raw("build.pickle", b"\x80\x02}q\x00}q\x01b."), "is not a readable pickle: AttributeError"),
            (self.write_pickle("segments5.pickle", {"segments": 5, "device_traces": good_trace}),
             "the snapshot's 'segments' is of type int (5); expected a list"),
            (self.write_pickle("blocks.pickle", {"segments": [{"device": 0, "blocks": 7}],
                                                 "device_traces": good_trace}),
             "segment 0's 'blocks' is of type int (7); expected a list"),
        ]
        for path, says in cases:
            with self.subTest(path=os.path.basename(path)):
                code, out, err = self.run_main(path, "-o", self.path("out.trace"))
                self.assertEqual(code, 2, err)
                self.assertIn(says, err)
                self.assertTrue(err.startswith("memcoord.snapshot_trace: "), err)
        # An event whose action is no string (a list cannot be looked up) is left out like other actions.
        odd = self.write_pickle("odd.pickle", pytorch_snapshot([[{"action": ["alloc"], "addr": 1, "size": 1},
                                                                 event("alloc", 0x10, MIB)]]))
        code, out, err = self.run_main(odd, "-o", self.path("odd.trace"))
        self.assertEqual(code, 0, err)
        self.assertIn("1 allocations", out)


if __name__ == "__main__":
    unittest.main()
