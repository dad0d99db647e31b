#!/usr/bin/env python3
"""Fits the calibrated constants of ../estimator_coefficients.h on the fit rows of round 2: fit_h200.jsonl,
check_h200.jsonl (round 1's check rows, fit rows since their errors were published) and fit2_h200.jsonl.
Never pass check2_h200.jsonl: it is measured after the refit, to check it.

Mirrors the analytic counts of ../transformer_activations.cc, ../transformer_training.cc,
../transformer_inference.cc and ../resnet_estimate.cc (plain Python, no torch), and for each constant prints
the value the measurements give:
  - transformer activation scales per family and precision (fp32, bf16, amp): the bytes the forward saved
    (after_forward - before_forward on the last step), minus the embedding/final-norm term, the head's saved
    loss tensors, the autocast weight copies and (math attention) the scores and repeated keys/values, over
    the analytic per-block count × blocks × tokens;
  - resnet50: bytes saved per image by precision, the checkpointed share and the recompute factor, and the
    live bytes per image of a no-grad forward (under autocast less the 16-bit weight copies);
  - generate: the prompt's forward transient per token (prefill_peak_bytes of fit2) against the per-family
    count, and the last decoding step's transient against the concatenation copy / expert-weight gather;
  - math attention (fp32 grouped-query attention): the score-sized tensors live in a checkpointed block's
    forward and backward;
  - autocast: what the output object holds at the loss (fp32 final hidden state, fp32 KV cache);
  - the caching allocator's slack on weights of 10 MiB or more (../allocator_rounding.cc) against
    weights_bytes - bytes per parameter × parameters.
Usage: python3 fit_scales.py [FILE.jsonl ...]   (default: the three fit files of round 2)
"""
import json
import os
import sys
from collections import defaultdict

RESNET_ALL, RESNET_CKPT, RESNET_LARGEST = 21324800, 7727104, 3211264
RESNET_PARAMS = 25557032
ROUND2_FIT = ("fit_h200.jsonl", "check_h200.jsonl", "fit2_h200.jsonl")


def load(paths):
    specs, rows = {}, []
    for path in paths:
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


def math_attention(s, precision):
    """transformer_activations.cc MathAttention: fp32 grouped-query attention runs SDPA's math kernel."""
    return precision == "fp32" and s.get("kv_heads", s["heads"]) < s["heads"]


def scores_bytes(s, r):
    """One attention call's fp32 scores (batch × heads × seq × seq × 4) under math attention."""
    return r["batch"] * s["heads"] * r["seq"] ** 2 * 4 if math_attention(s, r["precision"]) else 0


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


def forward_transient_per_token(s):
    """transformer_activations.cc ForwardTransientPerToken, in elements (× activation bytes)."""
    h, f, k = s["hidden"], s["ffn"], s.get("experts_per_token", 1)
    if s["family"] == "mixtral":
        return k * (4 * f + 2 * h) + 2 * h
    if s["family"] == "llama":
        return 3 * f + 4 * h
    return 4 * f + 5 * h


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
        if math_attention(s, r["precision"]):  # not scaled: the scores and the keys/values repeated to every head
            saved -= s["layers"] * (scores_bytes(s, r) + 2 * T * s["hidden"] * d)
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
        per_image.setdefault(r["precision"], []).append(saved / r["batch"])
        print(f"resnet50 {r['precision']} b{r['batch']}: {saved / r['batch']:.0f} bytes saved per image")
    for r in rows:
        if r["model"] == "resnet50" and r["mode"] == "training" and r["checkpointing"] == "full":
            if r["precision"] not in per_image:
                continue
            base = sum(per_image[r["precision"]]) / len(per_image[r["precision"]])
            saved = (r["after_forward_bytes"] - r["before_forward_bytes"]) / r["batch"]
            print(f"resnet50 {r['precision']} b{r['batch']} checkpoint scale "
                  f"{saved / (base * RESNET_CKPT / RESNET_ALL):.3f}")
            extra = (r["after_backward_peak_bytes"] - r["before_forward_bytes"]) / r["batch"] - saved
            print(f"resnet50 {r['precision']} b{r['batch']} recompute factor "
                  f"{extra / (base * RESNET_LARGEST / RESNET_ALL):.3f}")
        if r["model"] == "resnet50" and r["mode"] == "inference":
            copies = 2 * RESNET_PARAMS if r["precision"].startswith("amp") else 0  # autocast's weight cache
            d = 4 if r["precision"] == "fp32" else 2
            live = (r["peak_bytes"] - r["workspace_bytes"] - r["weights_bytes"] - r["inputs_bytes"] - copies)
            print(f"resnet50 inference {r['precision']} b{r['batch']}: {live / r['batch'] * 4 / d:.0f} live bytes "
                  f"per image in fp32 units")


def generate(specs, rows):
    """Prefill: the prompt's forward transient per token against ForwardTransientPerToken. Decode: what the
    last step adds to the full cache against max(one layer's K copy, the experts' weight gather) + logits."""
    for r in rows:
        if r["mode"] != "generate":
            continue
        s = specs[r["model"]]
        h, L, kv, _, V, k, _ = geometry(s)
        d = dtypes(r["precision"])[0]
        b, p, n = r["batch"], r["seq"], r["new_tokens"]
        per_token_cache = 2 * L * kv * d
        if "prefill_peak_bytes" in r:
            transient = r["prefill_peak_bytes"] - r["before_prefill_bytes"] - per_token_cache * b * p - b * V * d
            print(f"  {r['model']:14s} b{b} {p}+{n} prefill transient per token {transient / (b * p * d):8.0f} "
                  f"elements, count {forward_transient_per_token(s)}")
        base = r["workspace_bytes"] + r["weights_bytes"] + r["inputs_bytes"]
        decode = r["peak_bytes"] - base - per_token_cache * b * (p + n)
        gather = b * k * 3 * s["ffn"] * h * d if s["family"] == "mixtral" else 0
        model = max(kv * d * b * (p + n), gather) + b * V * (d + 8)
        print(f"  {r['model']:14s} b{b} {p}+{n} peak above the full cache {decode / 1e6:8.1f} MB, decode step "
              f"{model / 1e6:8.1f} MB (a larger measured value means the prefill peaked)")


def math_scores(specs, rows):
    """Checkpointed fp32 GQA rows: forward = at the last block, checkpoints + 2.25 scores + q, k, v repeats;
    backward = at the first block's attention, gradients (but the embedding) + its attention tensors +
    the saved scores + 3 more."""
    for r in rows:
        if r["model"] == "resnet50" or r["mode"] != "training" or r["checkpointing"] != "full":
            continue
        s = specs[r["model"]]
        if not math_attention(s, r["precision"]):
            continue
        h, L, kv, _, V, _, _ = geometry(s)
        T, sc = r["batch"] * r["seq"], scores_bytes(s, r)
        before_head = r["after_forward_bytes"] - r["before_forward_bytes"] - 4 * V * T
        forward = r["after_forward_peak_bytes"] - r["before_forward_bytes"] - before_head - 3 * T * h * 4
        params = r["params"] - V * h  # all but the embedding
        attention = 0.971 * (3 * 4 * h + 2 * 4 * kv) * T + sc + 2 * T * h * 4
        backward = (r["after_backward_peak_bytes"] - r["before_forward_bytes"] - 4 * params - T * h * 4
                    - attention)
        print(f"  {r['model']:14s} fp32 b{r['batch']} s{r['seq']}: forward {forward / sc:.2f} scores, backward "
              f"{backward / sc:.2f} scores beyond the saved one")


def amp_output(specs, rows):
    """Autocast rows: (forward peak - saved) beyond the loss's 6 bytes per logit, against the fp32 final hidden
    state (4 h per token) and, llama/mixtral without checkpointing, the fp32 K and V cache (8 kv per token
    and layer); with checkpointing, autocast's weight cache (2 bytes per block matmul parameter)."""
    for r in rows:
        if r["mode"] != "training" or not r["precision"].startswith("amp") or r["head"] != "causal-lm":
            continue
        s = specs[r["model"]]
        h, L, kv, _, V, _, _ = geometry(s)
        T = r["batch"] * r["seq"]
        held = r["after_forward_peak_bytes"] - r["after_forward_bytes"] - 6 * T * V
        cache = s["family"] in ("llama", "mixtral") and r["checkpointing"] == "none"
        model = 4 * T * h + (8 * T * kv * L if cache else 0)
        if r["checkpointing"] == "full":  # autocast's cache of the blocks' 16-bit weights, held through the forward
            model += 2 * (matmul_params(s, r["head"]) - matmul_params({**s, "layers": 0}, r["head"]))
        print(f"  {r['model']:14s} {r['precision']} b{r['batch']} s{r['seq']} {r['checkpointing']}: held "
              f"{held / 1e6:7.1f} MB, model {model / 1e6:7.1f} MB (a smaller measured value: the backward peaked)")


MIB = 1 << 20


def segment_slack(tensor_bytes):
    """allocator_rounding.cc SegmentSlackBytes: own segment rounded to 2 MiB, unsplit if <= 1 MiB remains."""
    size = -(-tensor_bytes // 512) * 512
    if size < 10 * MIB:
        return 0
    segment = -(-size // (2 * MIB)) * (2 * MIB)
    return segment - size if segment - size <= MIB else 0


def weight_tensors(s, head):
    """allocator_rounding.cc UnitTensors, all units: element counts of the weight matrices."""
    h, L, kv, _, V, _, experts = geometry(s)
    f, fam = s["ffn"], s["family"]
    out = [V * h, (1024 if fam == "gpt2" else 512 if fam == "bert" else 0) * h]
    block = {"gpt2": [h * (h + 2 * kv), h * h, h * f, f * h],
             "bert": [h * h, h * kv, h * kv, h * h, h * f, f * h],
             "llama": [h * h, kv * h, kv * h, h * h, f * h, f * h, f * h],
             "mixtral": [h * h, kv * h, kv * h, h * h, experts * 2 * f * h, experts * h * f]}[fam]
    out += block * L
    if head == "causal-lm":
        out += [] if fam == "gpt2" else [V * h]  # gpt2 ties its head to the embedding
    elif fam == "bert":
        out += [h * h]
    return out


def weights_slack(specs, rows):
    seen = set()
    for r in rows:
        wb = 2 if r["precision"] == "bf16" else 4
        if r["model"] == "resnet50" or (r["model"], r["head"], wb) in seen:
            continue
        seen.add((r["model"], r["head"], wb))
        rule = sum(segment_slack(n * wb) for n in weight_tensors(specs[r["model"]], r["head"]))
        measured = r["weights_bytes"] - wb * r["params"]
        print(f"  {r['model']:14s} {r['head']:24s} {wb} bytes: measured {measured / MIB:6.2f} MiB, "
              f"rule {rule / MIB:6.2f} MiB")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sys.argv[1:] or [os.path.join(here, f) for f in ROUND2_FIT]
    specs, rows = load(paths)
    print("transformer activation scales (per row, then per family and precision):")
    transformer_scales(specs, rows)
    resnet(rows)
    print("generate:")
    generate(specs, rows)
    print("math attention (fp32 grouped-query attention, checkpointed):")
    math_scores(specs, rows)
    print("autocast, what the output holds at the loss:")
    amp_output(specs, rows)
    print("weights: the caching allocator's slack (16-bit weights are converted from fp32: tensors below 10 MiB "
          "leave slack the rule does not model):")
    weights_slack(specs, rows)


if __name__ == "__main__":
    main()
