#!/usr/bin/env python3
"""A model of PyTorch's caching allocator under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, replaying
allocation traces (memcoord's format, bench/traces/README.md) on the host: what `expandable_segments` would
reserve for the same events, to set beside `memcoord replay` without a GPU.

    expandable_model.py TRACE... [--json]

Prints, per trace, the peak reserved bytes (pages mapped) and how they split between the small pool (requests
up to 1 MiB) and the large one at that peak, and the driver calls it made: pages mapped (a cuMemCreate and a
cuMemMap each) and ranges (a cuMemSetAccess each), to set beside `memcoord replay`'s units and misses. The rules are those of c10/cuda/CUDACachingAllocator.cpp
(PyTorch 2.x) with default settings:
  - a request is rounded up to a multiple of 512 bytes; up to 1 MiB it goes to the small pool, else the large;
  - each (stream, pool) has one segment: a large address range into which pages are mapped on demand, 2 MiB
    (small) or 20 MiB (large), and never unmapped (no empty_cache, no out-of-memory in the model);
  - a request takes the smallest free mapped block of its stream that fits, walking on to larger ones while
    their size plus the unmapped range after them is smaller (get_free_block); with none, the lowest-address
    run of free and unmapped blocks that holds it is mapped as far as needed (try_allocate_expandable_block);
  - the block is split when the rest is at least 512 bytes (small) or over 1 MiB (large), the request at the
    front; a freed block merges with its free mapped neighbours.
Not modelled: events and record_stream (a free is reusable at once), max_split_size and the other options,
garbage collection, private pools. On bench/traces/alternating the model reserves 16,059,990,016 bytes, what
expandable_segments reserved on the H200 to the byte (bench_allocators.py, 2026-12-04), with the same split
(small pool 56 MiB, large 15,260); on resnet50_amp it reads the README table's 5,834 MiB; it reads 20-21 MiB
above that table on gpt2_fp32 and gpt2_bf16_varlen, and 60 MiB above on gpt2_generate.
"""

import argparse
import bisect
import gzip
import json
import sys

MIB = 1 << 20
MIN_BLOCK = 512
SMALL_LIMIT = 1 * MIB
PAGE = {True: 2 * MIB, False: 20 * MIB}  # by "small pool?"
SEGMENT_SPAN = 20 * MIB << 24  # address space per segment (320 TiB, never exhausted), a whole number of pages


class Block:
    __slots__ = ("address", "size", "small", "stream", "mapped", "allocated", "prev", "next")

    def __init__(self, address, size, small, stream, mapped):
        self.address, self.size, self.small, self.stream, self.mapped = address, size, small, stream, mapped
        self.allocated = False
        self.prev = self.next = None

    def splice_after(self, other):
        """Puts `other` right after this block in its segment."""
        other.prev, other.next = self, self.next
        if self.next is not None:
            self.next.prev = other
        self.next = other


class Pool:
    """One pool's free mapped blocks, ordered by (stream, size, address), and its unmapped ones, ordered by
    (stream, address)."""

    def __init__(self, small):
        self.small = small
        self.free_keys, self.unmapped_keys, self.blocks = [], [], {}

    def add_free(self, b):
        key = (b.stream, b.size, b.address)
        bisect.insort(self.free_keys, key)
        self.blocks[key] = b

    def remove_free(self, b):
        key = (b.stream, b.size, b.address)
        self.free_keys.pop(bisect.bisect_left(self.free_keys, key))
        del self.blocks[key]

    def add_unmapped(self, b):
        key = (b.stream, b.address)
        bisect.insort(self.unmapped_keys, key)
        self.blocks[("unmapped",) + key] = b

    def remove_unmapped(self, b):
        key = (b.stream, b.address)
        self.unmapped_keys.pop(bisect.bisect_left(self.unmapped_keys, key))
        del self.blocks[("unmapped",) + key]


class ExpandableModel:
    def __init__(self):
        self.pools = {True: Pool(True), False: Pool(False)}
        self.segments = set()
        self.next_segment = SEGMENT_SPAN  # segments start on page boundaries, as pages count from a segment's start
        self.mapped = {True: 0, False: 0}
        self.peak = 0
        self.peak_split = {True: 0, False: 0}
        self.live = {}
        # Driver calls, as PyTorch's ExpandableSegment::map makes them: one cuMemCreate + cuMemMap per page,
        # one cuMemSetAccess per mapped range.
        self.pages_mapped = 0
        self.map_calls = 0

    def malloc(self, key, nbytes, stream=0):
        size = MIN_BLOCK if nbytes < MIN_BLOCK else -(-nbytes // MIN_BLOCK) * MIN_BLOCK
        small = size <= SMALL_LIMIT
        pool = self.pools[small]
        b = self._best_fit(pool, size, stream) or self._expand(pool, size, stream)
        rest = b.size - size
        if (small and rest >= MIN_BLOCK) or (not small and rest > SMALL_LIMIT):
            remainder = Block(b.address + size, rest, small, stream, True)
            b.splice_after(remainder)
            b.size = size
            pool.add_free(remainder)
        b.allocated = True
        self.live[key] = b
        total = self.mapped[True] + self.mapped[False]
        if total > self.peak:
            self.peak, self.peak_split = total, dict(self.mapped)

    def free(self, key):
        b = self.live.pop(key)
        b.allocated = False
        pool = self.pools[b.small]
        pool.add_free(self._merge(pool, b))

    @staticmethod
    def _growable_size(b):
        return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)

    def _best_fit(self, pool, size, stream):
        i = bisect.bisect_left(pool.free_keys, (stream, size, -1))
        if i == len(pool.free_keys) or pool.free_keys[i][0] != stream:
            return None
        best = i
        for j in range(i + 1, len(pool.free_keys)):
            if pool.free_keys[j][0] != stream or self._growable_size(pool.blocks[pool.free_keys[j]]) >= \
                    self._growable_size(pool.blocks[pool.free_keys[best]]):
                break
            best = j
        b = pool.blocks[pool.free_keys[best]]
        pool.remove_free(b)
        return b

    def _expand(self, pool, size, stream):
        if (stream, pool.small) not in self.segments:
            self.segments.add((stream, pool.small))
            pool.add_unmapped(Block(self.next_segment, SEGMENT_SPAN, pool.small, stream, False))
            self.next_segment += SEGMENT_SPAN
        start = self._lowest_run(pool, size, stream)
        if not start.mapped:
            start = self._map(pool, start, min(start.size, size))
        while start.size < size:
            start = self._map(pool, start.next, min(size - start.size, start.next.size))
        pool.remove_free(start)
        return start

    def _lowest_run(self, pool, size, stream):
        """The lowest-address unmapped block (or the free block before it) that starts a run of free and
        unmapped blocks holding `size` (find_expandable_block)."""
        i = bisect.bisect_left(pool.unmapped_keys, (stream, -1))
        while i < len(pool.unmapped_keys) and pool.unmapped_keys[i][0] == stream:
            start = pool.blocks[("unmapped",) + pool.unmapped_keys[i]]
            if start.prev is not None and not start.prev.allocated:
                start = start.prev
            room, b = 0, start
            while room < size and b is not None and not b.allocated:
                room, b = room + b.size, b.next
            if room >= size:
                return start
            i += 1
        raise AssertionError("a segment's unmapped tail always has room")

    def _map(self, pool, b, size):
        """Maps the pages under [b.address, b.address + size) of unmapped block `b`; returns the free mapped
        block they join."""
        page = PAGE[pool.small]
        mapped = min(-(-(b.address + size) // page) * page - b.address, b.size)
        pool.remove_unmapped(b)
        self.mapped[pool.small] += mapped
        self.pages_mapped += -(-mapped // page)
        self.map_calls += 1
        if mapped < b.size:
            tail = Block(b.address + mapped, b.size - mapped, b.small, b.stream, False)
            b.splice_after(tail)
            b.size = mapped
            pool.add_unmapped(tail)
        b.mapped = True
        b = self._merge(pool, b)
        pool.add_free(b)
        return b

    @staticmethod
    def _merge(pool, b):
        """Merges free block `b` with its free mapped neighbours (taken out of the pool); returns the result."""
        for neighbour in (b.prev, b.next):
            if neighbour is None or neighbour.allocated or not neighbour.mapped or not b.mapped:
                continue
            pool.remove_free(neighbour)
            first, second = (neighbour, b) if neighbour is b.prev else (b, neighbour)
            first.size += second.size
            first.next = second.next
            if second.next is not None:
                second.next.prev = first
            b = first
        return b


def replay(path):
    """Runs a trace's a/f events through a fresh model ('r' and 'S' lines are ignored); returns the model."""
    model = ExpandableModel()
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#") or fields[0] not in ("a", "f"):
                continue
            if len(fields) < 3:
                raise ValueError(f"{path}:{n}: expected 'a|f ADDRESS BYTES [STREAM]', got {line.strip()!r}")
            stream = int(fields[3]) if len(fields) > 3 else 0
            if fields[0] == "a":
                model.malloc(fields[1], int(fields[2]), stream)
            elif fields[1] in model.live:
                model.free(fields[1])
            else:
                raise ValueError(f"{path}:{n}: free of {fields[1]}, which is not allocated")
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--json", action="store_true", help="one JSON object per trace")
    args = parser.parse_args()
    for path in args.traces:
        try:
            model = replay(path)
        except (OSError, ValueError) as e:
            print(f"expandable_model: {e}", file=sys.stderr)
            return 2
        figures = {"trace": path, "peak_reserved_bytes": model.peak,
                   "small_pool_bytes_at_peak": model.peak_split[True],
                   "large_pool_bytes_at_peak": model.peak_split[False], "pages_mapped": model.pages_mapped,
                   "map_calls": model.map_calls}
        if args.json:
            print(json.dumps(figures))
        else:
            print(f"{path}: peak reserved {model.peak / MIB:,.0f} MiB (small pool {model.peak_split[True] / MIB:,.0f}, "
                  f"large {model.peak_split[False] / MIB:,.0f}); {model.pages_mapped} pages mapped in "
                  f"{model.map_calls} ranges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
