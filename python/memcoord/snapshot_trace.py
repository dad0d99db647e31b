"""A PyTorch memory snapshot as an allocation trace that `memcoord replay` reads: what memcoord's pool would
reserve for your own workload, judged from a snapshot taken under PyTorch's allocator, without running
memcoord in training.

    python3 -m memcoord.snapshot_trace SNAPSHOT.pickle [-o OUT.trace.gz] [--device N]
    memcoord replay OUT.trace.gz

SNAPSHOT is what `torch.cuda.memory._dump_snapshot(path)` writes after
`torch.cuda.memory._record_memory_history(max_entries=N)` (or the pickle memcoord.snapshot() and
`memcoord replay --snapshot` write): its "device_traces" become one event a line (bench/traces/README.md):
alloc -> `a`, free_completed -> `f`, free_requested -> `r`, segment_alloc -> `S`; the other actions are left
out. Sizes and streams are PyTorch's. The trace of one device is written: --device, else the device with the
most allocations.

Blocks allocated before the recorded window (the model's weights, when recording starts after the model is
built; anything older than PyTorch's last max_entries events) start the trace as live, so the replay counts
their memory: those the window frees (its free events give their sizes) and those still allocated in the
snapshot's segments at the end that the window never allocated. Their order at the start is not known; the
summary says how many there were. Blocks still live at the end stay live.

The pickle is read with a loader that refuses every class and function: a memory snapshot holds only plain
values (dicts, lists, strings, numbers), and refusing the rest means reading one cannot run code.
Exit status: 0, or 2 with a message naming the file and what is wrong.
"""

import argparse
import gzip
import os
import pickle
import sys

KEPT = {"alloc": "a", "free_completed": "f", "free_requested": "r", "segment_alloc": "S"}


class SnapshotError(ValueError):
    """A file that is not a memory snapshot with a trace, or one this module cannot convert."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"it refers to {module}.{name}; a memory snapshot holds plain values only, "
                                     "and loading anything else could run code")


def load(path):
    """The snapshot dict in `path` (SnapshotError when it is not one)."""
    try:
        with open(path, "rb") as f:
            snapshot = _PlainUnpickler(f).load()
    except OSError as e:
        raise SnapshotError(f"{path}: {e.strerror}") from None
    except Exception as e:  # noqa: BLE001 - a malformed pickle fails in many ways (MemoryError for a length
        # of 2**60, OverflowError, AttributeError for BUILD on a dict, RecursionError ...): each is "not a
        # readable pickle", and the command's promise is exit 2 with a message, not a traceback.
        raise SnapshotError(f"{path} is not a readable pickle: {type(e).__name__}: {e}") from None
    if not isinstance(snapshot, dict) or "segments" not in snapshot:
        raise SnapshotError(f"{path} is a pickle but not a memory snapshot (no 'segments'; expected what "
                            "torch.cuda.memory._dump_snapshot writes)")
    if not isinstance(snapshot["segments"], list):
        raise SnapshotError(f"{path}: the snapshot's 'segments' is {_kind(snapshot['segments'])}; expected a list "
                            "(what torch.cuda.memory._dump_snapshot writes)")
    return snapshot


def _kind(value):
    """`value` described for a message: its type, and the value when short."""
    text = repr(value)
    return f"of type {type(value).__name__} ({text})" if len(text) <= 40 else f"of type {type(value).__name__}"


def pick_device(traces, device):
    """The device whose trace is converted: `device`, else the one with the most allocations."""
    allocations = [sum(1 for e in t if isinstance(e, dict) and e.get("action") == "alloc") for t in traces]
    if not traces:
        raise SnapshotError("the snapshot's 'device_traces' is empty (no device recorded): record the history with "
                            "torch.cuda.memory._record_memory_history(max_entries=N) before the run")
    if device is not None:
        if not 0 <= device < len(traces):
            raise SnapshotError(f"--device {device} is out of range: the snapshot has traces for devices "
                                f"0..{len(traces) - 1}")
        if allocations[device] == 0:
            raise SnapshotError(f"device {device}'s trace has no allocations (devices with some: "
                                f"{[d for d, n in enumerate(allocations) if n] or 'none'})")
        return device
    if not any(allocations):
        raise SnapshotError("the snapshot's trace has no allocations: record them with "
                            "torch.cuda.memory._record_memory_history(max_entries=N) before the run, then "
                            "torch.cuda.memory._dump_snapshot(path)")
    return max(range(len(traces)), key=lambda d: allocations[d])


def _field(entry, name, index):
    value = entry.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SnapshotError(f"event {index} ({entry.get('action')}) has {name} {value!r}; expected a "
                            "non-negative integer")
    return value


def _live_at_end(snapshot, device):
    """{address: (requested bytes, stream)} of the blocks the snapshot's segments hold allocated on `device`."""
    blocks = {}
    segments = snapshot.get("segments") or []
    if not isinstance(segments, list):
        raise SnapshotError(f"the snapshot's 'segments' is {_kind(segments)}; expected a list")
    for index, segment in enumerate(segments):
        if not isinstance(segment, dict) or segment.get("device", device) != device:
            continue
        stream = segment.get("stream", 0)
        segment_blocks = segment.get("blocks") or []
        if not isinstance(segment_blocks, list):
            raise SnapshotError(f"segment {index}'s 'blocks' is {_kind(segment_blocks)}; expected a list")
        for block in segment_blocks:
            if not isinstance(block, dict) or block.get("state") not in ("active_allocated", "active_pending_free"):
                continue
            address, size = block.get("address"), block.get("requested_size") or block.get("size")
            if isinstance(address, int) and isinstance(size, int) and address >= 0 and size > 0:
                blocks[address] = (size, stream if isinstance(stream, int) and stream >= 0 else 0)
    return blocks


def convert(snapshot, device=None, workload="snapshot"):
    """(lines, summary): the trace's text lines and what they hold."""
    traces = snapshot.get("device_traces")
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError("the snapshot has no 'device_traces': record the history with "
                            "torch.cuda.memory._record_memory_history(max_entries=N) before the run")
    device = pick_device(traces, device)
    live, events, before = set(), [], {}  # before: blocks allocated before the window, in first-seen order
    summary = {"device": device, "allocations": 0, "frees": 0, "live_at_end": 0, "from_before": 0,
               "from_before_bytes": 0}
    for index, entry in enumerate(traces[device]):
        action = entry.get("action") if isinstance(entry, dict) else None
        code = KEPT.get(action) if isinstance(action, str) else None  # a list as action is no key
        if code is None:
            continue
        address = _field(entry, "addr", index)
        size = _field(entry, "size", index)
        stream = _field(entry, "stream", index) if "stream" in entry else 0
        if code == "a":
            if address in live:
                raise SnapshotError(f"event {index} allocates {address:#x}, which is already live")
            live.add(address)
            summary["allocations"] += 1
        elif code in ("f", "r") and address not in live:
            if code == "r" or address in before or size == 0:
                continue
            before[address] = (size, stream)  # freed here, allocated before the window: live from the start
            live.add(address)
        if code == "f":
            live.discard(address)
            summary["frees"] += 1
        events.append(f"{code} {address:x} {size} {stream}\n")
    for address, block in _live_at_end(snapshot, device).items():
        if address not in live and address not in before:  # never allocated in the window, live throughout
            before[address] = block
            live.add(address)
    summary["live_at_end"] = len(live)
    summary["from_before"] = len(before)
    summary["from_before_bytes"] = sum(size for size, _ in before.values())
    lines = [f"# pytorch snapshot (memcoord.snapshot_trace) workload={workload}; code addr size stream\n"]
    lines += [f"a {address:x} {size} {stream}\n" for address, (size, stream) in before.items()]
    return lines + events, summary


def describe(summary, out):
    text = (f"wrote {out}: device {summary['device']}, {summary['allocations']} allocations, "
            f"{summary['frees']} frees, {summary['live_at_end']} blocks live at the end")
    if summary["from_before"]:
        text += (f"; {summary['from_before']} blocks ({summary['from_before_bytes'] / (1 << 20):,.1f} MiB) were "
                 "allocated before the recorded window (freed in it, or live at its end) and start the trace "
                 "as live, in an order the snapshot does not give")
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m memcoord.snapshot_trace",
                                     description="Converts a PyTorch memory snapshot (the pickle "
                                                 "torch.cuda.memory._dump_snapshot writes) into a trace for "
                                                 "`memcoord replay`.")
    parser.add_argument("snapshot", help="the pickle torch.cuda.memory._dump_snapshot wrote")
    parser.add_argument("-o", "--output", help="the trace to write (.gz: compressed; default: SNAPSHOT's name "
                                               "with .trace.gz)")
    parser.add_argument("--device", type=int, help="the device whose trace is written (default: the one with "
                                                   "the most allocations)")
    args = parser.parse_args(argv)
    out = args.output or os.path.splitext(args.snapshot)[0] + ".trace.gz"
    workload = os.path.basename(args.snapshot).split(".")[0] or "snapshot"
    try:
        lines, summary = convert(load(args.snapshot), args.device, workload)
        with (gzip.open if out.endswith(".gz") else open)(out, "wt") as f:
            f.writelines(lines)
    except SnapshotError as e:
        text = str(e)  # load()'s name the file; convert()'s are named here
        print(f"memcoord.snapshot_trace: {text if text.startswith(args.snapshot) else f'{args.snapshot}: {text}'}",
              file=sys.stderr)
        return 2
    except OSError as e:
        print(f"memcoord.snapshot_trace: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 2
    print(describe(summary, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
