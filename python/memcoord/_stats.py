"""memcoord's device statistics in PyTorch's shape: the nested dict torch._C._cuda_memoryStats returns, so
torch.cuda.memory_stats, memory_allocated, max_memory_reserved and memory_summary read memcoord's numbers.

PyTorch's key names are used for what memcoord has; the rest are present and 0 (memory_summary needs every
key): memcoord keeps no small/large pool split (its arenas are one pool to PyTorch), cumulative byte counts
of allocated blocks only ("allocated_bytes.all.allocated"/"freed", from a library of memcoord_device_stats
version 5; "requested_bytes" and "active_bytes" keep theirs 0), no count of blocks freed but awaiting other
streams ("active" counts live blocks), and no peak of the segment count ("segment.all.peak" is the current
count). memcoord's own figures sit under
"memcoord" (flattened: "memcoord.cache_hits").
Accumulated counts ("allocated"/"freed", num_ooms) can be reset only here: reset_accumulated() keeps a
baseline per device (until memcoord.shutdown()) and later dicts subtract it. Not thread-safe for concurrent
resets of one device.
"""

_POOL_KINDS = ("all", "large_pool", "small_pool")
_ARRAY_STATS = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)
_ACCUMULATED = (
    "allocations",
    "frees",
    "allocated_bytes_total",
    "freed_bytes_total",
    "ooms",
    "backend_allocations",
    "backend_frees",
    "backend_allocated_bytes",
    "backend_released_bytes",
    "cache_hits",
    "trims",
    "trimmed_bytes",
    "pack_waits",
    "pack_stream_syncs",
    "misses",
    "miss_ns",
    "pack_wait_ns",
    "peak_sums",
    "other_thread_frees",
)

_baselines = {}


def _stat(current=0, peak=0, allocated=0, freed=0):
    # A peak below its current figure is one memcoord could not give (an older library's 0): the current one.
    return {"current": int(current), "peak": int(max(current, peak)), "allocated": int(allocated), "freed": int(freed)}


def reset_accumulated(device, raw):
    """Later torch_stats(device, ...) count accumulated figures from `raw` (a DeviceStats.as_dict())."""
    _baselines[device] = {key: raw.get(key, 0) for key in _ACCUMULATED}


def clear_baselines():
    """Forgets every reset_accumulated() baseline: shutdown() calls it, since the next worker counts from 0 and
    an old baseline would hide its counts."""
    _baselines.clear()


def torch_stats(device, raw):
    """PyTorch's nested memory-stats dict for `device` from memcoord's `raw` figures (DeviceStats.as_dict()).

    The figures are every memcoord pool on the device summed. With CUDA graph pools (or named pools) beside the
    default pool, the peaks are the sum of each pool's peak, an upper bound of the device's: pools peak at
    different times, and no device-wide peak is kept. Every peak is at least its current figure."""
    base = _baselines.get(device, {})
    acc = {key: max(0, raw.get(key, 0) - base.get(key, 0)) for key in _ACCUMULATED}
    live_blocks = raw.get("live_blocks", 0)
    peak_blocks = raw.get("peak_live_blocks", 0)  # 0 from a library before memcoord_device_stats version 4
    segments_now = max(0, raw.get("backend_allocations", 0) - raw.get("backend_frees", 0))
    # memcoord keeps no peak of the segment count (driver allocations live): the only figure it can vouch for
    # is the current count, a lower bound. peak_reserved_bytes says nothing of a count (segments differ in
    # size), and backend_allocations, an upper bound, counts the released ones too.
    segments_peak = segments_now
    all_stats = {
        "allocation": _stat(live_blocks, peak_blocks, acc["allocations"], acc["frees"]),
        "active": _stat(live_blocks, peak_blocks, acc["allocations"], acc["frees"]),
        "segment": _stat(segments_now, segments_peak, acc["backend_allocations"], acc["backend_frees"]),
        "inactive_split": _stat(),
        "allocated_bytes": _stat(raw.get("allocated_bytes", 0), raw.get("peak_allocated_bytes", 0),
                                 acc["allocated_bytes_total"], acc["freed_bytes_total"]),
        "requested_bytes": _stat(raw.get("requested_bytes", 0), raw.get("peak_requested_bytes", 0)),
        "active_bytes": _stat(raw.get("active_bytes", 0), raw.get("peak_active_bytes", 0)),
        "reserved_bytes": _stat(
            raw.get("reserved_bytes", 0),
            raw.get("peak_reserved_bytes", 0),
            acc["backend_allocated_bytes"],
            acc["backend_released_bytes"],
        ),
        "inactive_split_bytes": _stat(),
    }
    stats = {}
    for name in _ARRAY_STATS:
        stats[name] = {"all": all_stats[name], "large_pool": _stat(), "small_pool": _stat()}
    stats.update(
        {
            "num_alloc_retries": 0,
            "num_ooms": acc["ooms"],
            "num_sync_all_streams": 0,
            "num_device_alloc": acc["backend_allocations"],
            "num_device_free": acc["backend_frees"],
            "oversize_allocations": _stat(),
            "oversize_segments": _stat(),
            "max_split_size": -1,
            "memcoord": {
                "largest_free_bytes": int(raw.get("largest_free_bytes", 0)),
                "limit_bytes": int(raw.get("limit_bytes", 0)),
                "pools": int(raw.get("pools", 0)),
                "cache_hits": acc["cache_hits"],
                "trims": acc["trims"],
                "trimmed_bytes": acc["trimmed_bytes"],
                "pack_waits": acc["pack_waits"],
                "pack_stream_syncs": acc["pack_stream_syncs"],
                "misses": acc["misses"],
                "miss_ns": acc["miss_ns"],
                "pack_wait_ns": acc["pack_wait_ns"],
                "peak_sums": acc["peak_sums"],
                "other_thread_frees": acc["other_thread_frees"],
                "device_total_bytes": int(raw.get("device_total_bytes", 0)),
            },
        }
    )
    return stats


def flatten(nested, prefix=""):
    """torch.cuda.memory_stats's flattening ("allocated_bytes.all.current"), sorted, without torch."""
    out = []
    for key, value in nested.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.extend(flatten(value, name).items())
        else:
            out.append((name, value))
    return dict(sorted(out))
