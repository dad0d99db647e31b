#!/usr/bin/env python3
"""Explains the weights' excess over bytes × parameters in measure_peaks.py's rows (weights_bytes) by
simulating PyTorch's CUDA caching allocator while the harness builds a model: parameters allocated in module
order in fp32 on the GPU (an untied output head is allocated, then freed when transformers ties it), then,
for bf16 rows, model.to(torch.bfloat16): each parameter gets its 16-bit copy before its fp32 storage is
freed.

Allocator rules simulated (large pool; tensors of 1 MiB or less go to the small pool and are counted at their
512-byte rounding): sizes round up to 512 bytes; a request below 10 MiB is carved from a 20 MiB segment, a
larger one gets a segment of its own rounded up to 2 MiB; the smallest free block that fits is used, and it
is split only if more than 1 MiB would remain (otherwise memory_allocated counts all of it); freed blocks
merge with free neighbours of their segment.

The estimator models the fresh-segment case only (../allocator_rounding.h: every weight of 10 MiB or more,
as in an fp32 build); the conversion's slack in tensors below 10 MiB depends on this history. Plain Python.
Usage: python3 simulate_weight_slack.py  (prints simulated and measured excess per model and dtype)
"""
import json
import os

MIB = 1 << 20
SMALL, MIN_OWN_SEGMENT, SEGMENT_ROUNDING, SHARED_SEGMENT = MIB, 10 * MIB, 2 * MIB, 20 * MIB


def rounded(n):
    return 512 if n < 512 else -(-n // 512) * 512


class LargePool:
    def __init__(self):
        self.segments = []  # each: list of [size, free, id]
        self.allocated = 0
        self.next_id = 0
        self.where = {}

    def allocate(self, n):
        n = rounded(n)
        self.next_id += 1
        if n <= SMALL:
            self.allocated += n
            self.where[self.next_id] = ("small", n)
            return self.next_id
        best = None
        for si, seg in enumerate(self.segments):
            for bi, (size, free, _) in enumerate(seg):
                if free and size >= n and (best is None or size < best[0]):
                    best = (size, si, bi)
        if best is None:
            size = SHARED_SEGMENT if n < MIN_OWN_SEGMENT else -(-n // SEGMENT_ROUNDING) * SEGMENT_ROUNDING
            self.segments.append([[size, True, None]])
            best = (size, len(self.segments) - 1, 0)
        size, si, bi = best
        seg = self.segments[si]
        if size - n > SMALL:
            seg[bi:bi + 1] = [[n, False, self.next_id], [size - n, True, None]]
        else:
            seg[bi] = [size, False, self.next_id]
            n = size
        self.allocated += n
        self.where[self.next_id] = ("large", si)
        return self.next_id

    def free(self, block):
        kind, x = self.where.pop(block)
        if kind == "small":
            self.allocated -= x
            return
        seg = self.segments[x]
        for b in seg:
            if b[2] == block:
                self.allocated -= b[0]
                b[1], b[2] = True, None
        merged = []
        for b in seg:
            if merged and merged[-1][1] and b[1]:
                merged[-1][0] += b[0]
            else:
                merged.append(list(b))
        seg[:] = merged


def parameters(s, head):
    """(parameters in module order, untied head tensors allocated then freed by tying)."""
    h, V, f, L, fam = s["hidden"], s["vocab"], s["ffn"], s["layers"], s["family"]
    kv = h // s["heads"] * s.get("kv_heads", s["heads"])
    if fam == "gpt2":
        p = [V * h, 1024 * h]
        p += [h, h, h * 3 * h, 3 * h, h * h, h, h, h, h * f, f, f * h, h] * L + [h, h]
        return p + ([] if head == "causal-lm" else [2 * h]), ([V * h] if head == "causal-lm" else [])
    if fam == "bert":
        p = [V * h, 512 * h, 2 * h, h, h]
        p += [h * h, h, h * h, h, h * h, h, h * h, h, h, h, h * f, f, f * h, h, h, h] * L
        if head == "masked-lm":
            return p + [h * h, h, h, h, V], [V * h]
        return p + [h * h, h, 2 * h, 2], []
    if fam == "llama":
        p = [V * h] + [h * h, kv * h, kv * h, h * h, f * h, f * h, f * h, h, h] * L
        return p + [h, V * h], []
    return None, None  # mixtral: fused experts, not simulated here


def simulate(s, head, bf16):
    params, tied = parameters(s, head)
    if params is None:
        return None
    pool = LargePool()
    blocks = [pool.allocate(4 * n) for n in params]
    for b in [pool.allocate(4 * n) for n in tied]:
        pool.free(b)
    if bf16:
        for i, n in enumerate(params):
            copy = pool.allocate(2 * n)
            pool.free(blocks[i])
            blocks[i] = copy
    return pool.allocated - (2 if bf16 else 4) * sum(params)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    seen = set()
    for name in ("fit_h200.jsonl", "check_h200.jsonl", "fit2_h200.jsonl", "check2_h200.jsonl"):
        path = os.path.join(here, name)
        if not os.path.exists(path):
            continue
        specs = None
        for line in open(path):
            r = json.loads(line)
            if "meta" in r:
                specs = r["specs"]
                continue
            bf16 = r["precision"] == "bf16"
            key = (r["model"], r["head"], bf16)
            if "error" in r or r["model"] == "resnet50" or key in seen:
                continue
            seen.add(key)
            sim = simulate(specs[r["model"]], r["head"], bf16)
            measured = r["weights_bytes"] - (2 if bf16 else 4) * r["params"]
            print(f"{r['model']:14s} {r['head']:24s} {'bf16' if bf16 else 'fp32'}: measured {measured / MIB:6.2f} MiB, "
                  f"simulated {'-' if sim is None else f'{sim / MIB:6.2f}'} MiB")


if __name__ == "__main__":
    main()
