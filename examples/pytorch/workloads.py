"""The training workloads of the PyTorch examples and the side-by-side bench (issue 12): real transformers and
torchvision models built from configs with random weights (nothing is downloaded), fed seeded random data
so every allocator configuration sees identical inputs and should produce identical losses.

    make(name, device) -> Workload; workload.step(i) runs training step i and returns its loss (float).

Workloads: gpt2_fp32 (b8 x 1024, AdamW), gpt2_bf16_varlen (bf16 autocast, seq 64-1024, b16), resnet50_amp
(fp16 autocast + GradScaler, b128, SGD momentum), llama_1b (hidden 2048, 16 layers, ffn 5504, bf16,
gradient checkpointing, b4 x 2048), alternating (gpt2_fp32 and resnet50_amp stepped in turn), tiny_gpt2
(a few MB: smoke runs and CI-sized examples).

Every model is built on the device (its random initialisation runs there, where it trains); the 1B Llama in
bf16 from the start.
"""

import random

import torch

# alternating: 48 steps, 24 of each model. Its per-model medians (bench_allocators.step_medians) were over 7 steps
# at 16, and ResNet-50's steps there spread 29.8-59.1 ms within one native process (693c4d5's run): too few to
# tell a 2% difference. 32 more steps cost ~7 s a process.
STEPS = {"gpt2_fp32": 16, "gpt2_bf16_varlen": 24, "resnet50_amp": 16, "llama_1b": 8, "alternating": 48, "tiny_gpt2": 20}


def _seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


class Workload:
    """parts: the names of the models a workload steps in turn (step i runs parts[i % len(parts)]); one name for
    a workload of one model. The bench times each part's steps apart (bench_allocators.step_medians): the steps
    of two models of different sizes have no common median."""

    def __init__(self, name, step_fn, modules, parts=None):
        self.name = name
        self._step = step_fn
        self.modules = modules
        self.parts = list(parts) if parts else [name]

    def step(self, i):
        return self._step(i)


def _gpt2(device, n_layer=12, n_embd=768, n_head=12, n_positions=1024):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=n_positions)
    with torch.device(device):  # parameters created where they train
        return GPT2LMHeadModel(config), config


def _lm_step(model, opt, batch, seq, vocab, device, seed, autocast_dtype=None, scaler=None):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
    with torch.autocast("cuda", dtype=autocast_dtype, enabled=autocast_dtype is not None):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


def gpt2_fp32(device, batch=8, seq=1024):
    _seed(0)
    model, config = _gpt2(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Workload("gpt2_fp32", lambda i: _lm_step(model, opt, batch, seq, config.vocab_size, device, 1000 + i), [model])


def gpt2_bf16_varlen(device, batch=16):
    _seed(0)
    model, config = _gpt2(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = random.Random(7).choices(range(64, 1025), k=1000)

    def step(i):
        return _lm_step(model, opt, batch, lengths[i], config.vocab_size, device, 2000 + i, torch.bfloat16)

    return Workload("gpt2_bf16_varlen", step, [model])


def resnet50_amp(device, batch=128):
    import torchvision

    _seed(0)
    with torch.device(device):  # parameters created where they train
        model = torchvision.models.resnet50(weights=None).to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i):
        # The batch is drawn on the device: drawn on the host, 19 M normal samples took longer than the step's
        # GPU work and the bench timed the host's random number generator (real loaders prepare batches in
        # worker processes, off the training loop).
        gen = torch.Generator(device=device).manual_seed(3000 + i)
        images = torch.randn(batch, 3, 224, 224, generator=gen, device=device).to(memory_format=torch.channels_last)
        labels = torch.randint(0, 1000, (batch,), generator=gen, device=device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return float(loss)

    return Workload("resnet50_amp", step, [model])


def llama_1b(device, batch=4, seq=2048):
    from transformers import LlamaConfig, LlamaForCausalLM

    _seed(0)
    config = LlamaConfig(hidden_size=2048, num_hidden_layers=16, intermediate_size=5504, num_attention_heads=16,
                         num_key_value_heads=16, vocab_size=32000, max_position_embeddings=seq)
    # Built where it trains, in bf16 from the start: built on the host and moved, its random initialisation
    # took ~28 s of each bench process (bench2 runs nine: 4 of a 10-minute device call). Only the
    # weights' values change (losses of runs before 2026-12-05 are not comparable with later ones); the
    # parameters reach the device in the same order, with whatever temporaries the initialisation makes there.
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.to(dtype=torch.bfloat16)  # a no-op unless a module made fp32 parameters of its own
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Workload("llama_1b", lambda i: _lm_step(model, opt, batch, seq, config.vocab_size, device, 4000 + i),
                    [model])


def alternating(device):
    gpt = gpt2_fp32(device)
    resnet = resnet50_amp(device)
    return Workload("alternating", lambda i: (gpt if i % 2 == 0 else resnet).step(i // 2), gpt.modules + resnet.modules,
                    parts=[gpt.name, resnet.name])


def tiny_gpt2(device, batch=8, seq=128):
    _seed(0)
    model, config = _gpt2(device, n_layer=2, n_embd=128, n_head=4, n_positions=seq)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return Workload("tiny_gpt2", lambda i: _lm_step(model, opt, batch, seq, config.vocab_size, device, 5000 + i % 4),
                    [model])


BUILDERS = {
    "gpt2_fp32": gpt2_fp32,
    "gpt2_bf16_varlen": gpt2_bf16_varlen,
    "resnet50_amp": resnet50_amp,
    "llama_1b": llama_1b,
    "alternating": alternating,
    "tiny_gpt2": tiny_gpt2,
}
BENCH_WORKLOADS = ["gpt2_fp32", "gpt2_bf16_varlen", "resnet50_amp", "llama_1b", "alternating"]


def make(name, device="cuda"):
    if name not in BUILDERS:
        raise ValueError(f"unknown workload {name!r}; accepted: {', '.join(BUILDERS)}")
    return BUILDERS[name](device)
