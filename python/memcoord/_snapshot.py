"""memcoord's pool snapshot (memcoord_snapshot_json) in the shape of torch.cuda.memory._snapshot(): the dict
that pickled is what PyTorch's memory_viz (pytorch.org/memory_viz, torch/cuda/_memory_viz.py) opens.

    {"segments": [{"device", "address", "total_size", "stream", "segment_type", "segment_pool_id",
                   "allocated_size", "active_size", "requested_size", "is_expandable", "frames",
                   "blocks": [{"address", "size", "requested_size", "state", "frames"}]}],
     "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames"}], ...],   # one per device
     "external_annotations": [], "memcoord": {"pools": [...]}}

memcoord keeps no stack frames, so "frames" are empty. A field memcoord's JSON lacks gets PyTorch's neutral
value. memcoord's JSON gives streams per block only: a segment's stream is its blocks' (_segment_stream); and
no pool id: a CUDA graph pool's segment_pool_id is read from the pool's name (_pool_id). Pure Python: no torch
needed, so the conversion is tested on machines without it.
"""

import json
import os
import pickle
import re

# memcoord trace actions -> PyTorch's TraceEntry actions (others are left out).
_ACTIONS = {
    "alloc": "alloc",
    "allocate": "alloc",
    "free": "free_completed",
    "free_requested": "free_requested",
    "free_completed": "free_completed",
    "deallocate": "free_completed",
    "map": "segment_map",
    "unmap": "segment_unmap",
    "segment_alloc": "segment_alloc",
    "segment_free": "segment_free",
    "segment_map": "segment_map",
    "segment_unmap": "segment_unmap",
    "oom": "oom",
    "snapshot": "snapshot",
}


def _first(entry, *names, default=0):
    for name in names:
        if name in entry and entry[name] is not None:
            return entry[name]
    return default


# memcoord block states -> PyTorch's. "unmapped" (address space with no memory behind it, on mapping pools) is
# not memory: it splits its segment (see _segments).
_STATES = {
    "active_allocated": "active_allocated",
    "allocated": "active_allocated",
    "live": "active_allocated",
    "active_pending_free": "active_pending_free",
    "active_awaiting_free": "active_pending_free",
    "inactive": "inactive",
    "free": "inactive",
    "cached": "inactive",
    "unmapped": None,
}


# The name memcoord gives a CUDA graph capture pool (worker/capi/capture.cc): "capture(hi, lo)@device", with
# PyTorch's MempoolId_t (hi, lo).
_CAPTURE_POOL_NAME = re.compile(r"capture\((\d+), (\d+)\)@\d+")


def _pool_id(pool):
    """PyTorch's segment_pool_id: (0, 0) for ordinary memory, the capture pool's id for a graph pool: its
    "pool_id" when the JSON gives one, else read from its name (the JSON has no id field today)."""
    pool_id = pool.get("pool_id")
    if isinstance(pool_id, (list, tuple)) and len(pool_id) == 2:
        return (int(pool_id[0]), int(pool_id[1]))
    match = _CAPTURE_POOL_NAME.fullmatch(str(pool.get("name", "")))
    if match:
        return (int(match.group(1)), int(match.group(2)))
    return (0, 0)


def _segment_stream(raw, streams, blocks):
    """A PyTorch segment belongs to one stream; memcoord's JSON gives each block's ("stream") and no segment's.
    The segment's own "stream" when given, else the stream holding the most bytes of `blocks` (live blocks
    first, as PyTorch's stream is the one that allocated the segment), else 0. `streams`: address -> stream."""
    if "stream" in raw and raw["stream"] is not None:
        return int(raw["stream"])
    for states in (("active_allocated", "active_pending_free"), None):
        held = {}
        for b in blocks:
            stream = streams.get(b["address"])
            if stream is not None and (states is None or b["state"] in states):
                held[stream] = held.get(stream, 0) + b["size"]
        if held:
            return max(held, key=lambda stream: held[stream])  # ties: the stream of the lowest address
    return 0


def _block(raw):
    """PyTorch's block dict, or None for address space without memory."""
    state = _STATES.get(str(_first(raw, "state", default="inactive")), "inactive")
    if state is None:
        return None
    size = int(_first(raw, "size"))
    return {
        "address": int(_first(raw, "address", "addr")),
        "size": size,
        "requested_size": int(_first(raw, "requested_size", "requested", default=0)) if state != "inactive" else 0,
        "state": state,
        "frames": [],
    }


def _segment(device, pool, raw, blocks, mapped, streams):
    total = sum(b["size"] for b in blocks)
    return {
        "device": device,
        "address": blocks[0]["address"],
        "total_size": total,
        "stream": _segment_stream(raw, streams, blocks),
        "segment_type": "small" if raw.get("small", False) else "large",
        "segment_pool_id": _pool_id(pool),
        "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
        "requested_size": sum(b["requested_size"] for b in blocks),
        "is_expandable": mapped,
        "frames": [],
        "blocks": blocks,
    }


def _segments(device, pool, raw):
    """PyTorch segments for one memcoord segment: on a mapping pool (cuda-vmm) a segment is a reserved address
    range in which only some chunks have memory; each run of blocks with memory becomes one PyTorch segment
    (as expandable segments show only their mapped part), so the segments' sizes add up to reserved memory."""
    raw_blocks = sorted(raw.get("blocks", []), key=lambda b: int(_first(b, "address", "addr")))
    mapped = "mapped_bytes" in raw or any(str(b.get("state")) == "unmapped" for b in raw_blocks)
    streams = {int(_first(b, "address", "addr")): int(b["stream"]) for b in raw_blocks if b.get("stream") is not None}
    out, run = [], []
    for raw_block in raw_blocks:
        block = _block(raw_block)
        contiguous = run and run[-1]["address"] + run[-1]["size"] == (block or {}).get("address")
        if block is None or (run and not contiguous):
            if run:
                out.append(_segment(device, pool, raw, run, mapped, streams))
            run = [block] if block is not None else []
        else:
            run.append(block)
    if run:
        out.append(_segment(device, pool, raw, run, mapped, streams))
    if not raw_blocks and int(_first(raw, "size")) > 0:  # a segment listed without its blocks: all free
        address, size = int(_first(raw, "address", "addr")), int(_first(raw, "size"))
        free = {"address": address, "size": size, "requested_size": 0, "state": "inactive", "frames": []}
        out.append(_segment(device, pool, raw, [free], mapped, streams))
    return out


def _trace_entry(raw):
    action = _ACTIONS.get(str(_first(raw, "action", "op", default="alloc")), None)
    if action is None:
        return None
    entry = {
        "action": action,
        "addr": int(_first(raw, "addr", "address")),
        "size": int(_first(raw, "size", "bytes")),
        "stream": int(_first(raw, "stream")),
        "time_us": int(_first(raw, "time_us", default=int(_first(raw, "time_ns")) // 1000)),
        "frames": [],
    }
    if action == "oom":
        entry["device_free"] = int(_first(raw, "device_free", "free_bytes"))
    return entry


def from_memcoord(documents):
    """The memory_viz dict for memcoord snapshots `documents` (one parsed memcoord_snapshot_json per device,
    in device order)."""
    segments = []
    traces = []
    pools = []
    for index, doc in enumerate(documents):
        device = int(doc.get("device", index))
        for pool in doc.get("pools", []):
            pools.append({"device": device, "name": pool.get("name", ""), "stats": pool.get("stats", {}),
                          "segments_available": bool(pool.get("segments_available", True))})
            for raw in pool.get("segments", []):
                segments.extend(_segments(device, pool, raw))
        while len(traces) <= device:
            traces.append([])
        for raw in doc.get("trace", []):
            entry = _trace_entry(raw)
            if entry is not None:
                traces[device].append(entry)
    segments.sort(key=lambda s: (s["device"], s["address"]))
    return {"segments": segments, "device_traces": traces, "external_annotations": [], "memcoord": {"pools": pools}}


def parse_json(text):
    """Parses one memcoord_snapshot_json document, naming the problem when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise ValueError(f"memcoord_snapshot_json returned text that is not JSON ({error}): {text[:200]!r}") from None


def check_path(function, path):
    """TypeError naming `function` unless `path` is a file name (str, bytes or os.PathLike): open() would take an
    int as a file descriptor, write to it and close it."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{function}: path must be a file name (str, bytes or os.PathLike), got {path!r} "
                        f"({type(path).__name__}); file descriptors and file objects are not accepted")


def write_pickle(snapshot, path):
    """Writes `snapshot` as torch.cuda.memory._dump_snapshot does (memory_viz opens the file) to the file named
    `path` (str, bytes or os.PathLike; anything else is TypeError)."""
    check_path("write_pickle", path)
    with open(path, "wb") as f:
        pickle.dump(snapshot, f)
