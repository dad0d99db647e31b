#!/usr/bin/env python3
"""Measures the peak GPU memory of real training steps (and one-forward inference) for the estimator.

Builds the real Hugging Face `transformers` models and torchvision's resnet50 from their configs with random
weights (no downloads), runs a few full training steps (zero_grad, forward with the loss, backward, optimizer
step) and records torch.cuda.max_memory_allocated(). Step 3 is also split into phases (after forward, after
backward, optimizer step) so the estimator's terms can be checked one by one.

Usage (GPU machine): python3 measure_peaks.py OUT.json [--set calibration|validation] [--only NAME_SUBSTRING]
Prints one JSON line per configuration and writes the whole list to OUT.json.
"""
import gc
import json
import sys
import time

import torch

# role: "fit" configurations set the estimator's coefficients; "holdout" ones only check it.
CONFIGS = [
    # model, precision, optimizer, batch, seq, checkpointing, mode, role
    ("gpt2", "fp32", "adamw", 8, 1024, "none", "training", "fit"),
    ("gpt2", "bf16", "adamw", 8, 1024, "none", "training", "fit"),
    ("gpt2", "amp-bf16", "adamw", 8, 1024, "none", "training", "fit"),
    ("gpt2", "amp-bf16", "adamw", 8, 1024, "full", "training", "fit"),
    ("gpt2", "fp32", "adamw", 4, 512, "none", "training", "holdout"),
    ("gpt2", "bf16", "adamw", 16, 512, "full", "training", "holdout"),
    ("gpt2", "amp-bf16", "adamw", 4, 256, "none", "training", "holdout"),
    ("gpt2", "amp-fp16", "adamw", 8, 512, "none", "training", "holdout"),
    ("gpt2", "fp32", "sgd", 8, 512, "none", "training", "holdout"),
    ("gpt2", "amp-bf16", "sgd-momentum", 8, 1024, "none", "training", "holdout"),
    ("gpt2", "bf16", "adamw", 8, 1024, "none", "inference", "holdout"),
    ("gpt2-medium", "amp-bf16", "adamw", 4, 1024, "none", "training", "holdout"),
    ("gpt2-medium", "bf16", "adamw", 8, 1024, "none", "training", "holdout"),
    ("gpt2-medium", "fp32", "adamw", 4, 1024, "full", "training", "holdout"),
    ("bert-base", "fp32", "adamw", 32, 512, "none", "training", "fit"),
    ("bert-base", "amp-bf16", "adamw", 32, 512, "none", "training", "fit"),
    ("bert-base", "bf16", "adamw", 32, 512, "none", "training", "fit"),
    ("bert-base", "amp-bf16", "adamw", 64, 256, "none", "training", "holdout"),
    ("bert-base", "bf16", "adamw", 32, 512, "full", "training", "holdout"),
    ("bert-base", "fp32", "adamw", 16, 128, "none", "training", "holdout"),
    ("llama-small", "bf16", "adamw", 4, 2048, "none", "training", "fit"),
    ("llama-small", "amp-bf16", "adamw", 4, 2048, "none", "training", "fit"),
    ("llama-small", "fp32", "adamw", 2, 1024, "none", "training", "fit"),
    ("llama-small", "bf16", "adamw", 4, 2048, "full", "training", "fit"),
    ("llama-small", "bf16", "adamw", 8, 1024, "none", "training", "holdout"),
    ("llama-small", "amp-bf16", "adamw", 2, 4096, "full", "training", "holdout"),
    ("llama-small", "fp32", "adamw", 4, 512, "full", "training", "holdout"),
    ("llama-small", "bf16", "adamw", 8, 2048, "none", "inference", "holdout"),
    ("llama-gqa", "bf16", "adamw", 4, 2048, "none", "training", "holdout"),
    ("resnet50", "fp32", "adamw", 64, 0, "none", "training", "fit"),
    ("resnet50", "amp-bf16", "adamw", 64, 0, "none", "training", "fit"),
    ("resnet50", "bf16", "adamw", 64, 0, "none", "training", "fit"),
    ("resnet50", "fp32", "adamw", 128, 0, "none", "training", "holdout"),
    ("resnet50", "amp-bf16", "adamw", 256, 0, "none", "training", "holdout"),
    ("resnet50", "bf16", "sgd-momentum", 32, 0, "none", "training", "holdout"),
    ("resnet50", "fp32", "adamw", 256, 0, "none", "inference", "holdout"),
]

# Measured after the estimator was fitted on CONFIGS (run with --set validation): new geometries
# (gpt2-large, bert-large, a GQA llama, a small mixtral), amp-fp16, SGD and more inference.
VALIDATION = [
    ("gpt2-large", "amp-bf16", "adamw", 4, 1024, "none", "training", "validation"),
    ("gpt2", "bf16", "sgd", 32, 256, "full", "training", "validation"),
    ("gpt2-medium", "bf16", "adamw", 16, 1024, "none", "inference", "validation"),
    ("bert-large", "bf16", "adamw", 16, 512, "none", "training", "validation"),
    ("bert-large", "fp32", "adamw", 8, 512, "full", "training", "validation"),
    ("llama-mid", "bf16", "adamw", 8, 2048, "none", "training", "validation"),
    ("llama-mid", "amp-fp16", "adamw", 4, 1024, "none", "training", "validation"),
    ("llama-mid", "fp32", "sgd-momentum", 4, 1024, "full", "training", "validation"),
    ("mixtral-small", "bf16", "adamw", 4, 1024, "none", "training", "validation"),
    ("mixtral-small", "amp-bf16", "adamw", 2, 2048, "none", "training", "validation"),
    ("mixtral-small", "bf16", "adamw", 4, 2048, "full", "training", "validation"),
    ("resnet50", "amp-bf16", "adamw", 128, 0, "none", "inference", "validation"),
    ("resnet50", "fp32", "sgd", 96, 0, "none", "training", "validation"),
]

# Geometries of the llama-like specs (memcoord spec-file fields), so the estimator sees the same numbers.
SPECS = {
    "llama-small": dict(family="llama", hidden=2048, layers=8, heads=16, kv_heads=16, ffn=5504, vocab=32000),
    "llama-gqa": dict(family="llama", hidden=2048, layers=6, heads=16, kv_heads=4, ffn=5504, vocab=32000),
    "llama-mid": dict(family="llama", hidden=1024, layers=16, heads=16, kv_heads=4, ffn=2816, vocab=32000),
    "mixtral-small": dict(family="mixtral", hidden=1024, layers=4, heads=16, kv_heads=4, ffn=3584, vocab=32000,
                          experts=4, experts_per_token=2),
}


def build(name):
    import transformers as tf
    if name in ("gpt2", "gpt2-medium", "gpt2-large"):
        geometry = {"gpt2": (12, 768, 12), "gpt2-medium": (24, 1024, 16), "gpt2-large": (36, 1280, 20)}[name]
        cfg = tf.GPT2Config(n_layer=geometry[0], n_embd=geometry[1], n_head=geometry[2])
        return tf.GPT2LMHeadModel(cfg), "lm"
    if name == "bert-base":
        return tf.BertForSequenceClassification(tf.BertConfig(num_labels=2)), "cls"
    if name == "bert-large":
        cfg = tf.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                            num_labels=2)
        return tf.BertForSequenceClassification(cfg), "cls"
    if name in SPECS and SPECS[name]["family"] == "mixtral":
        s = SPECS[name]
        cfg = tf.MixtralConfig(hidden_size=s["hidden"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
                               num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                               vocab_size=s["vocab"], num_local_experts=s["experts"],
                               num_experts_per_tok=s["experts_per_token"], max_position_embeddings=4096,
                               tie_word_embeddings=False)
        return tf.MixtralForCausalLM(cfg), "lm"
    if name in SPECS:
        s = SPECS[name]
        cfg = tf.LlamaConfig(hidden_size=s["hidden"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
                             num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                             vocab_size=s["vocab"], max_position_embeddings=4096, tie_word_embeddings=False)
        return tf.LlamaForCausalLM(cfg), "lm"
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None), "image"
    raise ValueError(name)


def make_optimizer(kind, params):
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-4)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9)


def measure(cfg):
    name, precision, optimizer, batch, seq, ckpt, mode, role = cfg
    gc.collect()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    with torch.device("cuda"):
        model, kind = build(name)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    attn = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if ckpt == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    in_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    if kind == "image":
        x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=in_dtype)
        y = torch.randint(0, 1000, (batch,), device="cuda")
        loss_fn = torch.nn.CrossEntropyLoss()
        def forward():
            return loss_fn(model(x), y)
    else:
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (batch, seq), device="cuda")
        labels = ids if kind == "lm" else torch.randint(0, 2, (batch,), device="cuda")
        def forward():
            out = model(input_ids=ids, labels=labels)
            return out.loss, out
    amp_dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(precision)
    row = dict(model=name, precision=precision, optimizer=optimizer, batch=batch, seq=seq,
               checkpointing=ckpt, mode=mode, role=role, params=n_params, attn=attn, base_bytes=base)
    t0 = time.time()
    if mode == "inference":
        model.eval()
        torch.cuda.synchronize()
        row["weights_bytes"] = torch.cuda.memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
            if kind == "image":
                out = model(x)
            else:
                out = model(input_ids=ids, **({"use_cache": True} if kind == "lm" else {}))
        torch.cuda.synchronize()
        row["after_forward_bytes"] = torch.cuda.memory_allocated() - base
        row["peak_bytes"] = torch.cuda.max_memory_allocated() - base
        del out
    else:
        model.train()
        opt = make_optimizer(optimizer, model.parameters())
        scaler = torch.amp.GradScaler("cuda") if precision == "amp-fp16" else None
        torch.cuda.synchronize()
        row["weights_bytes"] = torch.cuda.memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        peak = 0
        for step in range(3):
            last = step == 2
            if last:
                peak = max(peak, torch.cuda.max_memory_allocated())
                torch.cuda.reset_peak_memory_stats()
            opt.zero_grad(set_to_none=True)
            if last:
                row["before_forward_bytes"] = torch.cuda.memory_allocated() - base
            with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
                res = forward()
            loss, out = res if isinstance(res, tuple) else (res, None)
            if last:
                torch.cuda.synchronize()
                row["after_forward_bytes"] = torch.cuda.memory_allocated() - base
                row["forward_peak_bytes"] = torch.cuda.max_memory_allocated() - base
                peak = max(peak, torch.cuda.max_memory_allocated())
                torch.cuda.reset_peak_memory_stats()
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            del loss, out, res
            if last:
                torch.cuda.synchronize()
                row["after_backward_bytes"] = torch.cuda.memory_allocated() - base
                row["backward_peak_bytes"] = torch.cuda.max_memory_allocated() - base
                peak = max(peak, torch.cuda.max_memory_allocated())
                torch.cuda.reset_peak_memory_stats()
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            if last:
                torch.cuda.synchronize()
                row["step_peak_bytes"] = torch.cuda.max_memory_allocated() - base
                row["after_step_bytes"] = torch.cuda.memory_allocated() - base
        torch.cuda.synchronize()
        peak = max(peak, torch.cuda.max_memory_allocated())
        row["peak_bytes"] = peak - base
        del opt, scaler
    row["seconds"] = round(time.time() - t0, 3)
    del model
    return row


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "peaks.json"
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    which = sys.argv[sys.argv.index("--set") + 1] if "--set" in sys.argv else "calibration"
    configs = VALIDATION if which == "validation" else CONFIGS
    torch.manual_seed(0)
    # Create the cuBLAS/cuBLASLt workspaces first so every configuration starts from the same base.
    a = torch.randn(256, 256, device="cuda", requires_grad=True)
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        with torch.autocast("cuda", dtype=dt, enabled=dt != torch.float32):
            (a @ a).sum().backward()
    del a
    torch.cuda.synchronize()
    meta = dict(torch=torch.__version__, device=torch.cuda.get_device_name(),
                workspace_bytes=torch.cuda.memory_allocated())
    try:
        import transformers
        meta["transformers"] = transformers.__version__
    except ImportError:
        pass
    print(json.dumps({"meta": meta}), flush=True)
    rows = []
    for cfg in configs:
        if only and only not in cfg[0]:
            continue
        try:
            row = measure(cfg)
        except Exception as e:  # one failing configuration must not lose the others
            row = dict(model=cfg[0], precision=cfg[1], batch=cfg[3], seq=cfg[4], error=repr(e)[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(out_path, "w") as f:
            json.dump({"meta": meta, "specs": SPECS, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
