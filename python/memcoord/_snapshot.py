"""memcoord's pool snapshot (memcoord_snapshot_json) in the shape of torch.cuda.memory._snapshot(): the dict
that pickled is what PyTorch's memory_viz (pytorch.org/memory_viz, torch/cuda/_memory_viz.py) opens.

    {"segments": [{"device", "address", "total_size", "stream", "segment_type", "segment_pool_id",
                   "allocated_size", "active_size", "requested_size", "is_expandable", "frames",
                   "blocks": [{"address", "size", "requested_size", "state", "frames"}]}],
     "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames"}], ...],   # one per device
     "external_annotations": [], "memcoord": {"pools": [...]}}

memcoord keeps no stack frames, so "frames" are empty. A field memcoord's JSON lacks gets PyTorch's neutral
value. Pure Python: no torch needed, so the conversion is tested on machines without it.
"""

import json
import pickle

_BLOCK_STATES = {"active_allocated", "active_pending_free", "active_awaiting_free", "inactive"}
# memcoord trace actions -> PyTorch's TraceEntry actions.
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
_SMALL_SEGMENT_BYTES = 2 << 20


def _first(entry, *names, default=0):
    for name in names:
        if name in entry and entry[name] is not None:
            return entry[name]
    return default


def _pool_id(pool):
    """PyTorch's segment_pool_id: (0, 0) for ordinary memory, the capture pool's id for a graph pool."""
    pool_id = pool.get("pool_id")
    if isinstance(pool_id, (list, tuple)) and len(pool_id) == 2:
        return (int(pool_id[0]), int(pool_id[1]))
    return (0, 0)


def _block(raw):
    state = str(_first(raw, "state", default="inactive"))
    if state not in _BLOCK_STATES:
        state = "active_allocated" if state in ("allocated", "live", "active") else "inactive"
    size = int(_first(raw, "size"))
    return {
        "address": int(_first(raw, "address", "addr")),
        "size": size,
        "requested_size": int(_first(raw, "requested_size", "requested", default=size if state != "inactive" else 0)),
        "state": state,
        "frames": [],
    }


def _segment(device, pool, raw):
    blocks = sorted((_block(b) for b in raw.get("blocks", [])), key=lambda b: b["address"])
    total = int(_first(raw, "total_size", "size", default=sum(b["size"] for b in blocks)))
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {
        "device": device,
        "address": int(_first(raw, "address", "addr")),
        "total_size": total,
        "stream": int(_first(raw, "stream")),
        "segment_type": "small" if total <= _SMALL_SEGMENT_BYTES and pool.get("small", False) else "large",
        "segment_pool_id": _pool_id(pool),
        "allocated_size": allocated,
        "active_size": active,
        "requested_size": sum(b["requested_size"] for b in blocks if b["state"] != "inactive"),
        "is_expandable": bool(raw.get("mapped", False)),
        "frames": [],
        "blocks": blocks,
    }


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
            pools.append({"device": device, "name": pool.get("name", ""), "stats": pool.get("stats", {})})
            for raw in pool.get("segments", []):
                segments.append(_segment(device, pool, raw))
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


def write_pickle(snapshot, path):
    """Writes `snapshot` as torch.cuda.memory._dump_snapshot does (memory_viz opens the file)."""
    with open(path, "wb") as f:
        pickle.dump(snapshot, f)
