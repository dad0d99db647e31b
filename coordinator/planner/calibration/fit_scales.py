#!/usr/bin/env python3
"""Recomputes the activation scales of ../estimator_coefficients.h from the "fit" rows of measured_h200.json.

For each family and precision: (bytes the forward saved, measured as after_forward - before_forward, minus the
embedding/final-norm term, the logits and the autocast weight copies) / (the analytic per-block count of
memory_estimator.cc × blocks × tokens). Also prints resnet50's per-image bytes. Runs anywhere (no torch).
Usage: python3 fit_scales.py [measured_h200.json]
"""
import json
import sys

# family, blocks, hidden, ffn, kv width, vocab (the same geometries the script measured)
GEOMETRY = {
    "gpt2": ("gpt2", 12, 768, 3072, 768, 50257),
    "gpt2-medium": ("gpt2", 24, 1024, 4096, 1024, 50257),
    "bert-base": ("bert", 12, 768, 3072, 768, 30522),
    "llama-small": ("llama", 8, 2048, 5504, 2048, 32000),
    "llama-gqa": ("llama", 6, 2048, 5504, 512, 32000),
}


def matmul_params(fam, L, h, f, kv, V):
    """Parameters cast to 16 bits under autocast: inside blocks, and outside them (head or pooler)."""
    if fam in ("gpt2", "bert"):
        inside = L * (2 * h * h + 2 * h * kv + 2 * h * f + 2 * h + 2 * kv + f)
        return inside, (V * h if fam == "gpt2" else h * h + h)
    return L * (2 * h * h + 2 * h * kv + 3 * h * f), V * h


def block_coefficient(fam, precision, h, f, kv):
    """memory_estimator.cc BlockCoefficient: analytic bytes saved per token by one block."""
    d = 4 if precision == "fp32" else 2
    amp = precision.startswith("amp")
    amp_residual = 4 * h if amp else 0
    if fam == "gpt2":
        return (7 * d + 2) * h + 2 * d * kv + 5 * f * d + amp_residual
    if fam == "bert":
        return (7 * d + 2) * h + 2 * d * kv + 2 * f * d + amp_residual
    norms = (24 if d == 4 else 16) * h + amp_residual
    return norms + 3 * d * h + 2 * d * kv + 4 * d * f


def main():
    data = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "measured_h200.json"))
    sums = {}
    for r in data["rows"]:
        if r.get("role") != "fit" or r["mode"] != "training" or r["checkpointing"] != "none":
            continue
        saved = r["after_forward_bytes"] - r["before_forward_bytes"]
        if r["model"] == "resnet50":
            print(f"resnet50 {r['precision']}: {saved / r['batch']:.0f} bytes saved per image")
            continue
        fam, L, h, f, kv, V = GEOMETRY[r["model"]]
        precision = r["precision"]
        d = 4 if precision == "fp32" else 2
        T = r["batch"] * r["seq"]
        inside, outside = matmul_params(fam, L, h, f, kv, V)
        saved -= (2 * d + 1) * h * T  # embedding dropout mask and output, final norm in/out
        saved -= T * V * (d + 4) if fam != "bert" else 0  # logits and fp32 log-softmax
        saved -= 2 * (inside + outside) if precision.startswith("amp") else 0
        key = (fam, "amp" if precision.startswith("amp") else precision)
        num, den = sums.get(key, (0, 0))
        sums[key] = (num + saved, den + L * T * block_coefficient(fam, precision, h, f, kv))
    for (fam, precision), (num, den) in sorted(sums.items()):
        print(f"{fam:6s} {precision:5s} scale {num / den:.3f}")


if __name__ == "__main__":
    main()
