#!/usr/bin/env python3
"""Fits the calibrated constants of ../estimator_coefficients.h on the "fit" rows only (fit_h200.jsonl).

Mirrors the analytic counts of ../transformer_activations.cc and ../resnet_estimate.cc (plain Python, no
torch), and for each constant prints the value the measurements give:
  - transformer activation scales per family and precision (fp32, bf16, amp): the bytes the forward saved
    (after_forward - before_forward on the last step), minus the embedding/final-norm term, the head's saved
    loss tensors and the autocast weight copies, over the analytic per-block count × blocks × tokens;
  - resnet50: bytes saved per image by precision, the checkpointed share and the recompute factor;
  - generate: the prefill transient in feed-forward units, from the generate rows.
Usage: python3 fit_scales.py [fit_h200.jsonl]
"""
import json
import sys
from collections import defaultdict

RESNET_ALL, RESNET_CKPT, RESNET_LARGEST = 21324800, 7727104, 3211264
RESNET_PARAMS = 25557032


def load(path):
    specs, rows = {}, []
    for line in open(path):
        j = json.loads(line)
        if "meta" in j:
            specs = j["specs"]
        elif "error" not in j:
            rows.append(j)
    return specs, rows


def dtypes(precision):
    """(activation bytes d, weight bytes wb, amp)"""
    return {"fp32": (4, 4, False), "bf16": (2, 2, False)}.get(precision, (2, 4, True))


def geometry(s):
    h, L = s["hidden"], s["layers"]
    kv = h // s["heads"] * s.get("kv_heads", s["heads"])
    k = s.get("experts_per_token", 1)
    return h, L, kv, s["ffn"] * k, s["vocab"], k, s.get("experts", 1)


def block_count(s, precision):
    """transformer_activations.cc Analytic(): bytes one block saves per token, unscaled."""
    d, _, amp = dtypes(precision)
    h, _, kv, f, _, k, experts = geometry(s)
    amp_residual = 4 * h if amp else 0
    if s["family"] in ("gpt2", "bert"):
        mlp = (5 if s["family"] == "gpt2" else 2) * f * d
        return (5 * d + 2) * h + 2 * d * kv + 2 * d * h + amp_residual + mlp
    norms = (24 if d == 4 else 16) * h + amp_residual
    mlp = 4 * d * f + (2 * k * d * h + 4 * experts + 8 * k if s["family"] == "mixtral" else 0)
    return 3 * d * h + 2 * d * kv + norms + mlp


def head_saved(s, head, precision):
    d, _, amp = dtypes(precision)
    h, V = s["hidden"], s["vocab"]
    if head == "causal-lm":
        return 4 * V
    if head == "masked-lm":
        return 4 * d * h + (4 + d if amp else d) * V
    return 0


def matmul_params(s, head):
    """Parameters cast to 16 bits under autocast: block matmuls and the head's."""
    h, L, kv, f, V, k, experts = geometry(s)
    if s["family"] in ("gpt2", "bert"):
        block = 2 * h * h + 2 * h * kv + 2 * h * s["ffn"] + 2 * h + 2 * kv + s["ffn"] + h
    else:
        block = 2 * h * h + 2 * h * kv + experts * 3 * h * s["ffn"] + (h * experts if s["family"] == "mixtral" else 0)
    if head == "sequence-classification":
        out = h * h + 3 * h + 2 if s["family"] == "bert" else 2 * h
    elif head == "masked-lm":
        out = h * h + h + V * h
    else:
        out = V * h
    return L * block + out


def transformer_scales(specs, rows):
    sums = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        if r["model"] == "resnet50" or r["mode"] != "training" or r["checkpointing"] != "none":
            continue
        s = specs[r["model"]]
        d, _, amp = dtypes(r["precision"])
        T = r["batch"] * r["seq"]
        saved = r["after_forward_bytes"] - r["before_forward_bytes"]
        saved -= (2 * d + 1) * s["hidden"] * T
        saved -= head_saved(s, r["head"], r["precision"]) * T
        saved -= 2 * matmul_params(s, r["head"]) if amp else 0
        key = (s["family"], "amp" if amp else r["precision"])
        sums[key][0] += saved
        sums[key][1] += s["layers"] * T * block_count(s, r["precision"])
        print(f"  {r['model']:14s} {r['precision']:9s} {r['head']:24s} b{r['batch']} s{r['seq']}: "
              f"scale {saved / (s['layers'] * T * block_count(s, r['precision'])):.3f}")
    for (fam, prec), (num, den) in sorted(sums.items()):
        print(f"{fam:8s} {prec:5s} scale {num / den:.3f}")


def resnet(rows):
    per_image = {}
    for r in rows:
        if r["model"] != "resnet50" or r["mode"] != "training" or r["checkpointing"] != "none":
            continue
        amp = r["precision"].startswith("amp")
        saved = r["after_forward_bytes"] - r["before_forward_bytes"] - (2 * RESNET_PARAMS if amp else 0)
        per_image[r["precision"]] = saved / r["batch"]
        print(f"resnet50 {r['precision']}: {saved / r['batch']:.0f} bytes saved per image")
    for r in rows:
        if r["model"] == "resnet50" and r["mode"] == "training" and r["checkpointing"] == "full":
            base = per_image[r["precision"]]
            saved = (r["after_forward_bytes"] - r["before_forward_bytes"]) / r["batch"]
            print(f"resnet50 checkpoint scale {saved / (base * RESNET_CKPT / RESNET_ALL):.3f}")
            extra = (r["after_backward_peak_bytes"] - r["before_forward_bytes"]) / r["batch"] - saved
            print(f"resnet50 recompute factor {extra / (base * RESNET_LARGEST / RESNET_ALL):.3f}")
        if r["model"] == "resnet50" and r["mode"] == "inference":
            live = (r["peak_bytes"] - r["workspace_bytes"] - r["weights_bytes"] - r["inputs_bytes"]) / r["batch"]
            print(f"resnet50 inference {r['precision']}: {live:.0f} live bytes per image")


def main():
    specs, rows = load(sys.argv[1] if len(sys.argv) > 1 else "fit_h200.jsonl")
    print("transformer activation scales (per row, then per family and precision):")
    transformer_scales(specs, rows)
    resnet(rows)


if __name__ == "__main__":
    main()
