#!/usr/bin/env python3
"""Validates memcoord's exports of a trace's history (memcoord replay --snapshot/--chrome-trace).

The pickle must load with Python's own pickle module (no classes, so no torch needed) into the structure
torch.cuda.memory._snapshot() returns, with every key torch/cuda/_memory_viz.py reads: segments with
address, total_size, stream and blocks (size, state, address, requested_size, frames) that tile each
segment; device_traces as a list of per-device lists of events with action, addr, size, stream, frames.
Then the events are replayed the way _memory_viz's trace_plot walks them: every free must match a live
alloc and every block must lie inside a live segment. The Chrome trace must be JSON with counter events.
Usage: check_snapshot.py SNAPSHOT.pickle CHROME.json
"""
import json
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free"}
STATES = {"active_allocated", "active_awaiting_free", "inactive"}


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def check_segments(snapshot):
    for seg in snapshot["segments"]:
        for key in ("address", "total_size", "stream", "allocated_size", "active_size", "segment_type", "blocks", "device"):
            if key not in seg:
                fail(f"segment without '{key}': {sorted(seg)}")
        at = seg["address"]
        for block in seg["blocks"]:
            for key in ("address", "size", "requested_size", "state", "frames"):
                if key not in block:
                    fail(f"block without '{key}'")
            if block["state"] not in STATES:
                fail(f"block state {block['state']!r} is not one of {sorted(STATES)}")
            if block["address"] != at:
                fail(f"blocks do not tile segment {seg['address']:#x}: block at {block['address']:#x}, expected {at:#x}")
            at += block["size"]
        if at != seg["address"] + seg["total_size"]:
            fail(f"blocks of segment {seg['address']:#x} cover {at - seg['address']} of {seg['total_size']} bytes")
        allocated = sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
        if allocated != seg["allocated_size"]:
            fail("allocated_size disagrees with the blocks")


def check_trace(trace):
    segments = {}
    live = {}
    counts = {a: 0 for a in ACTIONS}
    for e in trace:
        for key in ("action", "addr", "size", "stream", "frames"):
            if key not in e:
                fail(f"trace entry without '{key}': {e}")
        action = e["action"]
        if action not in ACTIONS:
            fail(f"unknown action {action!r}")
        counts[action] += 1
        if action == "segment_alloc":
            segments[e["addr"]] = e["size"]
        elif action == "segment_free":
            if segments.pop(e["addr"], None) != e["size"]:
                fail(f"segment_free of {e['addr']:#x} that is not a live segment of that size")
        elif action == "alloc":
            if not any(a <= e["addr"] and e["addr"] + e["size"] <= a + s for a, s in segments.items()):
                fail(f"alloc at {e['addr']:#x} outside every live segment")
            live[e["addr"]] = e["size"]
        elif action == "free_completed":
            if live.pop(e["addr"], None) != e["size"]:
                fail(f"free_completed of {e['addr']:#x} that is not a live block of that size")
    return counts


def main():
    with open(sys.argv[1], "rb") as f:
        snapshot = pickle.load(f)
    if not isinstance(snapshot, dict) or "segments" not in snapshot or "device_traces" not in snapshot:
        fail("the snapshot must be a dict with 'segments' and 'device_traces'")
    if not isinstance(snapshot["device_traces"], list) or not isinstance(snapshot["device_traces"][0], list):
        fail("device_traces must be a list (one per device) of lists of events")
    check_segments(snapshot)
    counts = check_trace(snapshot["device_traces"][0])
    if counts["alloc"] == 0 or counts["segment_alloc"] == 0 or counts["free_completed"] == 0:
        fail(f"the trace lacks events: {counts}")
    with open(sys.argv[2]) as f:
        chrome = json.load(f)
    counters = [e for e in chrome["traceEvents"] if e.get("ph") == "C"]
    if not counters or "reserved" not in counters[-1]["args"] or "allocated" not in counters[-1]["args"]:
        fail("the Chrome trace has no allocated/reserved counter events")
    print(f"ok: {len(snapshot['segments'])} segments, events {counts}, {len(counters)} counter samples")


if __name__ == "__main__":
    main()
