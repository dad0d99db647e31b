#!/usr/bin/env python3
"""What PyTorch users rely on, checked under memcoord (issue 12, "What must be shown" item 2). Each check runs
in a fresh process (memcoord.enable() must precede CUDA's initialisation):

  refuses_after_init  memcoord.enable() after CUDA's initialisation refuses with a clear error
  stats          torch.cuda.memory_allocated/max_memory_allocated/memory_reserved/max_memory_reserved,
                 memory_stats and memory_summary equal memcoord's own counters; reset_peak_memory_stats
  empty_cache    torch.cuda.empty_cache() returns memcoord's cached memory to the device (cudaMemGetInfo)
  memory_fraction  torch.cuda.set_per_process_memory_fraction caps memcoord's pool: at 5% a tensor of 10% of
                 the device raises torch.OutOfMemoryError, at 1.0 it fits
  record_stream  a block read on a side stream is not reused before that read is done
  snapshot       torch.cuda.memory._dump_snapshot writes a pickle with our blocks; memory_viz's offline
                 renderers (segsum, trace, trace_plot) accept it
  snapshot_trace under PyTorch's own allocator, a real snapshot converts (memcoord.snapshot_trace) and
                 replays through `memcoord replay`
  oom            an impossible allocation raises torch.OutOfMemoryError; allocation works afterwards
  non_memory_error  an allocation refused for another reason (the C library shut down under PyTorch) raises a
                 plain RuntimeError naming it, not torch.OutOfMemoryError
  graph_capture  CUDA graph capture works (replay matches eager), or fails at once with a message saying why
  graph_pool_shared  two graphs share a pool: the first one's release keeps the memory the second replays into
  graph_retry    a capture into a shared pool that fails (a synchronize inside it), then empty_cache() and
                 another capture into that pool: under memcoord (with its shim) the freed memory goes back to the
                 device and the retry works; PyTorch's own allocator is reported as it behaves
  cudnn_benchmark  torch.backends.cudnn.benchmark = True trains a small CNN (cuDNN's workspace query,
                 cacheInfo, answered by memcoord)
  compile        torch.compile trains a small transformer block (losses finite and falling)
  ddp            DistributedDataParallel, one rank over NCCL, trains
  multi_device   two GPUs in one process route to their own pools, and each block's free to its own device's
                 pool whichever device is current (skipped with one GPU)
  hf_trainer     transformers.Trainer with memcoord's TrainerCallback placed by huggingface.add_to: a memcoord
                 step per optimizer step, memcoord's figures in the log history and in what a reporter placed
                 as report_to places them (before the `callbacks` given) receives
  lightning      a Lightning Trainer with memcoord's Callback (skipped when Lightning is not installed)

Prints a table and exits 1 if a check failed, 77 when torch or a GPU is missing (ctest: skipped).
Usage: integration_checks.py [--quick] [--only NAME[,NAME...]] [--native]   (--check NAME runs one check in-process)
--native runs the checks under PyTorch's own allocator, as a baseline: memcoord.enable() is not called, and the
checks that compare with memcoord's own figures fail there.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent.parent / "python"))  # the source tree's package when none is pip-installed

GB = 1 << 30
MB = 1 << 20


def _enable():
    if os.environ.get("MEMCOORD_CHECKS_NATIVE") == "1":  # --native: PyTorch's own allocator, the baseline
        return None, {"hooks": {}}
    import memcoord

    details = memcoord.enable()
    return memcoord, details


class Skip(Exception):
    pass


def check_stats(quick):
    memcoord, _ = _enable()
    import torch

    tensors = [torch.empty(int(n), dtype=torch.uint8, device="cuda") for n in (1 * MB, 3 * MB, 40 * MB, 123457)]
    torch.cuda.synchronize()
    own = memcoord.stats(0)
    pairs = {
        "memory_allocated": (torch.cuda.memory_allocated(), own["allocated_bytes"]),
        "max_memory_allocated": (torch.cuda.max_memory_allocated(), own["peak_allocated_bytes"]),
        "memory_reserved": (torch.cuda.memory_reserved(), own["reserved_bytes"]),
        "max_memory_reserved": (torch.cuda.max_memory_reserved(), own["peak_reserved_bytes"]),
    }
    for name, (theirs, ours) in pairs.items():
        assert theirs == ours, f"torch.cuda.{name}() = {theirs}, memcoord says {ours}"
    assert own["allocated_bytes"] >= 44 * MB, own
    stats = torch.cuda.memory_stats()
    assert stats["allocation.all.current"] == own["live_blocks"], (stats["allocation.all.current"], own)
    # Bytes allocated and freed in all (PyTorch's thread-cache hits and frees into it included): their
    # difference is what is allocated now.
    total, freed = stats["allocated_bytes.all.allocated"], stats["allocated_bytes.all.freed"]
    assert total >= 44 * MB and total - freed == stats["allocated_bytes.all.current"], (total, freed, stats)
    summary = torch.cuda.memory_summary()
    assert "Allocated memory" in summary, summary[:200]
    del tensors[2]
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
    return f"4 figures equal memcoord's ({own['allocated_bytes'] / MB:.1f} MB allocated), summary, reset_peak"


def check_empty_cache(quick):
    memcoord, _ = _enable()
    import torch

    size = (1 if quick else 8) * GB
    x = torch.ones(size // 4, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    del x
    reserved_before = torch.cuda.memory_reserved()
    free_before = torch.cuda.mem_get_info()[0]
    torch.cuda.empty_cache()
    free_after = torch.cuda.mem_get_info()[0]
    reserved_after = torch.cuda.memory_reserved()
    gained = free_after - free_before
    assert reserved_after < reserved_before, (reserved_before, reserved_after)
    assert gained >= 0.9 * size, f"device free memory rose by {gained / GB:.2f} GB after freeing {size / GB:.0f} GB"
    return f"device free +{gained / GB:.2f} GB, reserved {reserved_before / GB:.2f} -> {reserved_after / GB:.2f} GB"


def check_memory_fraction(quick):
    """torch.cuda.set_per_process_memory_fraction caps memcoord's pool (CUDAPluggableAllocator's own raises
    "does not yet support setMemoryFraction"): at 5% of the device a tensor of 10% fails with
    torch.OutOfMemoryError, and at 1.0 it fits."""
    memcoord, _ = _enable()
    import torch

    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(0.05)
    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    seen = getter() if getter is not None else memcoord.memory_fraction()
    assert abs(seen - 0.05) < 1e-6, seen
    try:
        torch.empty(int(total * 0.10), dtype=torch.uint8, device="cuda")
        raise AssertionError("a tensor of 10% of the device fit under a 5% cap")
    except torch.OutOfMemoryError as e:
        refused = str(e).splitlines()[0][:120]
    torch.cuda.set_per_process_memory_fraction(1.0)
    x = torch.empty(int(total * 0.10), dtype=torch.uint8, device="cuda")
    del x
    return (f"cap 5% read back {seen:.3f} ({'torch' if getter else 'memcoord'}), 10% refused: {refused!r}; "
            "at 1.0 it fits")


def check_record_stream(quick):
    memcoord, details = _enable()
    import torch

    n = 64 * MB // 4
    side = torch.cuda.Stream()
    x = torch.ones(n, device="cuda")
    old_ptr = x.data_ptr()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~100 ms of GPU time before the read below
        y = x * 2
    x.record_stream(side)
    del x
    z = torch.full((n,), 7.0, device="cuda")  # on the default stream, now
    reused = z.data_ptr() == old_ptr
    torch.cuda.synchronize()
    bad = int((y != 2).sum().item())
    assert bad == 0, f"{bad} elements read 7: the block was reused before the side stream's read (reused={reused})"
    return f"side-stream read intact (block reused at once: {reused}; record_stream hook: {details['hooks']})"


def check_snapshot(quick):
    memcoord, _ = _enable()
    import pickle
    import tempfile

    import torch

    torch.cuda.memory._record_memory_history()  # memcoord's own history from here (device_traces)
    a = torch.empty(5 * MB, dtype=torch.uint8, device="cuda")
    gone = torch.empty(3 * MB, dtype=torch.uint8, device="cuda")
    gone_ptr = gone.data_ptr()
    del gone
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "snapshot.pickle")
        torch.cuda.memory._dump_snapshot(path)
        with open(path, "rb") as f:
            snap = pickle.load(f)
        memcoord.snapshot(os.path.join(tmp, "memcoord.pickle"))
    listed = all(p.get("segments_available", True) for p in snap.get("memcoord", {}).get("pools", []))
    assert listed, "memcoord_snapshot_json lists no segments yet (segments_available: false): pools only"
    blocks = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    assert any(b["address"] == a.data_ptr() for b in blocks), "our tensor's block is not in the snapshot"
    from torch.cuda import _memory_viz

    # memory_viz's offline views (its flame graphs download a script: no network here). segsum asserts that
    # every segment's blocks add up to its size; trace_plot is the HTML page of pytorch.org/memory_viz.
    summary = _memory_viz.segsum(snap)
    assert "total_reserved" in summary, summary[:300]
    _memory_viz.trace(snap)
    html = _memory_viz.trace_plot(snap)
    assert "snapshot.pickle" in html
    traces = sum(len(t) for t in snap["device_traces"])
    actions = [(e["action"], e["addr"]) for t in snap["device_traces"] for e in t]
    assert ("alloc", a.data_ptr()) in actions, "the tensor's allocation is not in the snapshot's trace"
    assert ("free_completed", gone_ptr) in actions, "the freed tensor's free is not in the snapshot's trace"
    torch.cuda.memory._record_memory_history(enabled=None)
    reserved = next(l for l in summary.splitlines() if l.startswith("total_reserved"))
    return f"{len(snap['segments'])} segments, {len(blocks)} live blocks, {traces} trace entries; segsum {reserved}"


def check_snapshot_trace(quick):
    """Under PyTorch's own allocator (memcoord off): a real snapshot converts with memcoord.snapshot_trace
    (its loader refuses any class a pickle names: a real one must hold none) and replays through the CLI."""
    import shutil
    import tempfile

    import torch
    from memcoord import snapshot_trace

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # Recording starts after the model is built, as it usually does: its weights come from the segments.
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    for _ in range(3):
        loss = model(torch.randn(64, 1024, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    peak_allocated = torch.cuda.max_memory_allocated()
    with tempfile.TemporaryDirectory() as tmp:
        pickle_path, trace_path = os.path.join(tmp, "native.pickle"), os.path.join(tmp, "native.trace.gz")
        torch.cuda.memory._dump_snapshot(pickle_path)
        torch.cuda.memory._record_memory_history(enabled=None)
        lines, summary = snapshot_trace.convert(snapshot_trace.load(pickle_path), workload="native")
        assert summary["allocations"] > 0 and summary["from_before"] >= 4, summary  # 2 weights, 2 biases
        code = snapshot_trace.main([pickle_path, "-o", trace_path])
        assert code == 0, f"snapshot_trace exited {code}"
        cli = os.environ.get("MEMCOORD_CLI") or shutil.which("memcoord")
        bundled = os.path.join(os.path.dirname(__file__), "..", "..", ".device-bundle", "bin", "memcoord")
        cli = cli or (bundled if os.path.exists(bundled) else None)
        if cli is None:
            return f"converted {summary['allocations']} allocations; no memcoord CLI here to replay them"
        replay = subprocess.run([cli, "replay", "--json", "--repeat", "1", trace_path], capture_output=True,
                                text=True, timeout=120)
        assert replay.returncode == 0, replay.stderr[-400:]
        figures = json.loads(replay.stdout)
    requested = figures["peak_requested_bytes"]
    assert 0.9 * peak_allocated <= requested <= peak_allocated, (requested, peak_allocated)
    return (f"{summary['allocations']} allocations and {summary['from_before']} blocks from before the recording "
            f"converted and replayed: peak requested {requested / MB:.1f} MB "
            f"(PyTorch's peak allocated {peak_allocated / MB:.1f} MB), memcoord would reserve "
            f"{figures['peak_reserved_bytes'] / MB:.1f} MB (PyTorch reserved {torch.cuda.max_memory_reserved() / MB:.1f})")


def check_oom(quick):
    memcoord, details = _enable()
    import torch

    if not details["shim"]:
        raise Skip("needs the C++ shim (without it PyTorch's pluggable path cannot raise OutOfMemoryError)")
    try:
        torch.empty(4 << 40, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as error:
        message = str(error).splitlines()[0][:120]
    else:
        raise AssertionError("allocating 4 TiB did not raise torch.OutOfMemoryError")
    y = torch.ones(MB, device="cuda")
    assert float(y.sum()) == MB
    return f"torch.OutOfMemoryError: {message}"


def check_non_memory_error(quick):
    """The shim's other side: an allocation memcoord refuses for a reason other than memory raises a plain
    RuntimeError naming that reason, not torch.OutOfMemoryError (which out-of-memory handlers, cuDNN's
    workspace retry and batch-size finders, would take for a want of memory and retry). Provoked by shutting
    the C library down under PyTorch (memcoord_shutdown through the C ABI, which memcoord.shutdown() refuses
    while enabled): the next allocation fails with FAILED_PRECONDITION."""
    memcoord, details = _enable()
    import torch

    if not details["shim"]:
        raise Skip("needs the C++ shim (without it PyTorch's pluggable path raises its own error)")
    assert float(torch.ones(MB, device="cuda").sum()) == MB
    torch.cuda.synchronize()
    memcoord._lib().call("memcoord_shutdown")
    try:
        torch.empty(MB, device="cuda")
    except torch.OutOfMemoryError as error:
        raise AssertionError(f"a refusal for want of initialisation raised torch.OutOfMemoryError: {error}")
    except RuntimeError as error:
        message = str(error).splitlines()[0]
        assert "FAILED_PRECONDITION" in message and "not initialized" in message, message
        return f"RuntimeError (not OutOfMemoryError): {message[:110]}..."
    raise AssertionError("an allocation after memcoord_shutdown() did not raise")


def _warmed_mlp(torch, hidden):
    """A small MLP on the GPU and its static input, warmed up on a side stream as CUDA graph capture requires."""
    model = torch.nn.Sequential(torch.nn.Linear(512, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, 512)).cuda()
    static_x = torch.randn(64, 512, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    return model, static_x


def _replay_diff(torch, graph, model, static_x, static_y, new_x, scale=1):
    """Replays `graph` (captured as static_y = model(static_x * scale)) on new_x; the largest difference from
    the eager model(new_x * scale)."""
    static_x.copy_(new_x)
    graph.replay()
    with torch.no_grad():
        expected = model(new_x if scale == 1 else new_x * scale)
    torch.cuda.synchronize()
    return float((static_y - expected).abs().max())


def _capture_refused(error, started):
    """A capture that failed passes only if it failed at once saying why (memcoord's message)."""
    elapsed = time.monotonic() - started
    message = str(error).splitlines()[0][:160]
    assert elapsed < 5 and "memcoord" in str(error), f"capture failed after {elapsed:.1f} s without saying why: {error}"
    return f"fails at once ({elapsed * 1000:.0f} ms) saying why: {message}"


def check_graph_capture(quick):
    memcoord, details = _enable()
    import torch

    model, static_x = _warmed_mlp(torch, hidden=512)
    graph = torch.cuda.CUDAGraph()
    started = time.monotonic()
    try:
        with torch.no_grad(), torch.cuda.graph(graph):
            static_y = model(static_x)
    except Exception as error:
        return _capture_refused(error, started)
    diff = _replay_diff(torch, graph, model, static_x, static_y, torch.randn(64, 512, device="cuda"))
    assert diff < 1e-3, f"graph replay differs from eager by {diff}"
    del graph
    return f"works: replay matches eager (max diff {diff:.2e}); graph pools hook: {details['hooks'].get('graph_pools')}"


def check_graph_pool_shared(quick):
    """Two graphs in one private pool (torch.cuda.graph(g2, pool=g1.pool()), as make_graphed_callables and
    reduce-overhead share theirs): releasing the first must keep the pool's memory, free blocks included, so the
    second still replays right after an empty_cache(); releasing the last lets empty_cache() give it back."""
    memcoord, details = _enable()
    import torch

    model, static_x = _warmed_mlp(torch, hidden=2048)
    first, second = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    started = time.monotonic()
    try:
        with torch.no_grad(), torch.cuda.graph(first):
            first_y = model(static_x)
        with torch.no_grad(), torch.cuda.graph(second, pool=first.pool()):
            second_y = model(static_x * 2)
    except Exception as error:
        return _capture_refused(error, started)
    torch.cuda.synchronize()
    del first, first_y  # one of the pool's two users released
    torch.cuda.empty_cache()  # must not take the memory the second graph replays into
    diff = _replay_diff(torch, second, model, static_x, second_y, torch.randn(64, 512, device="cuda"), scale=2)
    assert diff < 1e-3, f"the second graph's replay differs from eager by {diff} after the first was released"
    torch.cuda.empty_cache()  # the eager pass's cache goes: what stays reserved is live memory and the pool
    held = torch.cuda.memory_reserved()
    del second, second_y  # the last user: the pool may go
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    after = torch.cuda.memory_reserved()
    assert after < held, f"releasing the pool's last graph returned nothing: reserved {held} -> {after} bytes"
    return f"works: the shared pool outlived its first graph (max diff {diff:.2e}); reserved {held} -> {after} bytes"


def check_graph_retry(quick):
    """A capture into a shared pool (graph_pool_handle, as torch.compile's CUDA graph trees use one) that fails
    part-way, then another capture into that pool. Eager allocations after the failure must be served. Under
    memcoord with its shim, empty_cache() must then return the 256 MB freed outside the capture and the retry
    must work (the shim abandons the route the failed capture left open); otherwise the retry must work or
    fail at once saying why. PyTorch 2.11's own allocator returned nothing to empty_cache() and refused the
    retry on the H100 and the H200 (2026-12-06)."""
    memcoord, details = _enable()
    import torch

    model, static_x = _warmed_mlp(torch, hidden=512)
    pool = torch.cuda.graph_pool_handle()
    failed = torch.cuda.CUDAGraph()
    try:
        with torch.no_grad(), torch.cuda.graph(failed, pool=pool):
            model(static_x)
            torch.cuda.synchronize()  # not permitted while capturing: invalidates the capture
    except Exception as error:
        first = str(error).splitlines()[0][:90]
    else:
        raise AssertionError("a synchronize inside a capture did not fail it")
    del failed
    # No random numbers from here: PyTorch leaves its CUDA generator in capture mode after a failed capture
    # ("Offset increment outside graph capture encountered unexpectedly", under its own allocator too).
    eager = torch.ones(1024, 1024, device="cuda") @ torch.ones(1024, 1024, device="cuda")  # outside a capture
    big = torch.empty(256 * MB, dtype=torch.uint8, device="cuda")
    del big
    torch.cuda.synchronize()
    held = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    returned = held - torch.cuda.memory_reserved()
    assert float(eager[0, 0]) == 1024.0, float(eager[0, 0])
    after = f"after the first capture failed ('{first}') empty_cache() returned {returned / MB:.0f} of {held / MB:.0f} MB"
    # memcoord's shim ends the route the failed capture left open (memcoord/_torch.py, failed_capture_recovery):
    # the 256 MB freed outside any capture go back to the device (at least three quarters of them: their ends
    # may share a mapped unit with live blocks; 240 MB on the H100, 2026-12-06, and none before the shim ended
    # the route), and the retry is taken.
    recovers = memcoord is not None and details["hooks"].get("failed_capture_recovery")
    if recovers:
        assert returned >= 192 * MB, f"{after}: the failed capture's route still blocks trims"
    retry = torch.cuda.CUDAGraph()
    started = time.monotonic()
    try:
        with torch.no_grad(), torch.cuda.graph(retry, pool=pool):
            static_y = model(static_x)
    except Exception as error:
        assert not recovers, f"{after}; the retry failed although the failed capture was abandoned: {error}"
        if memcoord is not None:  # the refusal must say what to do: PyTorch's own names no remedy
            assert "graph_pool_handle" in str(error), f"the retry's refusal names no remedy: {error}"
        return f"{after}; the retry {_capture_refused(error, started)}"
    new_x = torch.linspace(-1, 1, 64 * 512, device="cuda").reshape(64, 512)
    diff = _replay_diff(torch, retry, model, static_x, static_y, new_x)
    assert diff < 1e-3, f"the retried graph's replay differs from eager by {diff}"
    return f"{after}; the retry works: its replay matches eager (max diff {diff:.2e})"


def check_cudnn_benchmark(quick):
    """torch.backends.cudnn.benchmark = True: cuDNN asks the allocator (cacheInfo) how large a workspace its
    algorithm search may use, which CUDAPluggableAllocator alone refuses with an error."""
    memcoord, details = _enable()
    import torch

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    losses = []
    for _ in range(3):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert all(l == l for l in losses), f"losses {losses}"
    return (f"3 steps with cudnn.benchmark on: loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
            f"cacheInfo hook: {details['hooks'].get('cache_info')} "
            f"(counts cached blocks: {details['hooks'].get('cache_info_cached_blocks')})")


def check_compile(quick):
    memcoord, _ = _enable()
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True).cuda()
    head = torch.nn.Linear(256, 1).cuda()
    model = torch.nn.Sequential(layer, head)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(16, 64, 256, device="cuda")
    target = torch.randn(16, 64, 1, device="cuda")
    losses = []
    for _ in range(8 if quick else 30):
        loss = torch.nn.functional.mse_loss(compiled(x), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
    assert all(l == l for l in losses) and losses[-1] < losses[0], losses
    return f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} compiled steps"


def check_ddp(quick):
    memcoord, _ = _enable()
    import socket

    import torch
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1024, 1024).cuda(), device_ids=[0])
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(32, 1024, device="cuda")
        losses = []
        for _ in range(5):
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(loss))
        assert losses[-1] < losses[0], losses
    finally:
        dist.destroy_process_group()
    return f"one NCCL rank: loss {losses[0]:.4f} -> {losses[-1]:.4f}"


def check_multi_device(quick):
    import torch

    if torch.cuda.device_count() < 2:
        raise Skip(f"{torch.cuda.device_count()} GPU visible; needs 2")
    memcoord, _ = _enable()
    a = torch.nn.Linear(2048, 2048).cuda(0)
    b = torch.nn.Linear(2048, 2048).cuda(1)
    ya, yb = a(torch.randn(8, 2048, device="cuda:0")), b(torch.randn(8, 2048, device="cuda:1"))
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    s0, s1 = memcoord.stats(0), memcoord.stats(1)
    assert s0["allocated_bytes"] > 0 and s1["allocated_bytes"] > 0, (s0, s1)
    assert ya.device.index == 0 and yb.device.index == 1
    # Frees go to the block's own device whichever is current (the shim records the device of every device but
    # the first a process allocates on): device 1's blocks freed with device 0 current, and the other way round.
    with torch.cuda.device(1):
        extra0 = torch.empty(64 * MB, dtype=torch.uint8, device="cuda:0")
    extra1 = torch.empty(64 * MB, dtype=torch.uint8, device="cuda:1")
    before = memcoord.stats(0)["allocated_bytes"], memcoord.stats(1)["allocated_bytes"]
    torch.cuda.set_device(0)
    del extra1, yb
    torch.cuda.synchronize(1)
    torch.cuda.set_device(1)
    del extra0, ya
    torch.cuda.set_device(0)
    after = memcoord.stats(0)["allocated_bytes"], memcoord.stats(1)["allocated_bytes"]
    freed = before[0] - after[0], before[1] - after[1]
    assert freed[0] >= 64 * MB and freed[1] >= 64 * MB, (before, after)
    return (f"device 0 {s0['allocated_bytes'] / MB:.1f} MB, device 1 {s1['allocated_bytes'] / MB:.1f} MB; frees "
            f"under the other device returned {freed[0] / MB:.1f} and {freed[1] / MB:.1f} MB to their own pools")


def _empty_tensors(shim):
    """Empty tensors take no block and leave no error: through the shim (which answers 0 bytes itself) and
    through PyTorch's own pluggable layer (shim "off"), which asks memcoord_torch_malloc for 0 bytes (and,
    in versions whose DataPtr holds a deleter context, frees the NULL it got)."""
    if os.environ.get("MEMCOORD_CHECKS_NATIVE") == "1":
        raise Skip("a check of memcoord's C ABI")
    os.environ["MEMCOORD_TORCH_SHIM"] = shim
    memcoord, details = _enable()
    import torch

    assert details["shim"] == (shim != "off"), details
    x = torch.ones(4, device="cuda")
    torch.cuda.synchronize()
    library = memcoord._lib()
    error_before, blocks_before = library.last_error(), memcoord.stats(0)["live_blocks"]
    empties = [torch.empty(0, device="cuda"), torch.zeros((0, 7), device="cuda"), x[:0].clone(),
               torch.cat([x[:0], x[:0]]), torch.empty(0, dtype=torch.bfloat16, device="cuda")]
    torch.cuda.synchronize()
    assert all(t.numel() == 0 and t.data_ptr() == 0 for t in empties), [t.data_ptr() for t in empties]
    blocks_with = memcoord.stats(0)["live_blocks"]
    del empties
    assert blocks_with == blocks_before == memcoord.stats(0)["live_blocks"], (blocks_before, blocks_with)
    assert library.last_error() == error_before, (error_before, library.last_error())
    assert float(x.sum()) == 4.0
    return f"5 empty tensors: no block, no error ({'shim' if details['shim'] else 'PyTorch pluggable layer'})"


def check_empty_tensors(quick):
    return _empty_tensors("auto")


def check_empty_tensors_pluggable(quick):
    return _empty_tensors("off")


def check_refuses_after_init(quick):
    import torch

    import memcoord

    torch.zeros(1, device="cuda")  # PyTorch's own allocator is now initialised
    try:
        memcoord.enable()
    except RuntimeError as error:
        assert "before CUDA is initialised" in str(error), error
        return f"RuntimeError: {str(error)[:110]}..."
    raise AssertionError("memcoord.enable() after CUDA's initialisation did not refuse")


def check_hf_trainer(quick):
    memcoord, _ = _enable()
    import tempfile

    import torch

    try:
        from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    except ImportError as error:
        raise Skip(f"transformers is not installed ({error})")
    from memcoord.integrations import huggingface

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            ids = torch.randint(0, 1000, (64,), generator=torch.Generator().manual_seed(i % 4))
            return {"input_ids": ids, "labels": ids}

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64))
    start = memcoord.step_count()
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, max_steps=12, per_device_train_batch_size=8, logging_steps=4,
                                 report_to=[], save_strategy="no", learning_rate=1e-3)
        from transformers import TrainerCallback

        class Reporter(TrainerCallback):  # stands for wandb/tensorboard
            seen = []

            def on_log(self, args, state, control, logs=None, **kwargs):
                Reporter.seen.append(dict(logs or {}))

        given = huggingface.MemcoordCallback()
        trainer = Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[given])
        # Where report_to puts its reporters: after the Trainer's defaults, before the callbacks given to it.
        callbacks = trainer.callback_handler.callbacks
        callbacks.insert(callbacks.index(given), Reporter())
        assert huggingface.add_to(trainer) is given and callbacks[0] is given, callbacks
        trainer.train()
    logged = [h for h in trainer.state.log_history if "memcoord/reserved_gb" in h]
    reported = [h for h in Reporter.seen if "memcoord/reserved_gb" in h]
    steps = memcoord.step_count() - start
    assert steps == 12, f"memcoord saw {steps} steps for 12 optimizer steps"
    assert logged and logged[-1]["memcoord/reserved_gb"] > 0, trainer.state.log_history
    assert len(reported) == len(Reporter.seen) > 0, Reporter.seen
    return f"12 Trainer steps = 12 memcoord steps; logs carry memcoord/* ({logged[-1]['memcoord/reserved_gb']:.3f} GB reserved)"


def check_lightning(quick):
    memcoord, _ = _enable()
    import torch

    try:
        import lightning as L
    except ImportError:
        try:
            import pytorch_lightning as L
        except ImportError as error:
            raise Skip(f"Lightning is not installed ({error})")
    from memcoord.integrations.lightning import MemcoordCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(64, 1)

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(256, 64), torch.randn(256, 1))
    start = memcoord.step_count()
    trainer = L.Trainer(max_steps=10, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, log_every_n_steps=2, callbacks=[MemcoordCallback()])
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=16))
    steps = memcoord.step_count() - start
    assert steps == 10, f"memcoord saw {steps} steps for 10 batches"
    assert "memcoord/reserved_gb" in trainer.callback_metrics, list(trainer.callback_metrics)
    return f"10 batches = 10 memcoord steps; callback_metrics carry memcoord/*"


CHECKS = {
    "refuses_after_init": check_refuses_after_init,
    "stats": check_stats,
    "empty_cache": check_empty_cache,
    "memory_fraction": check_memory_fraction,
    "record_stream": check_record_stream,
    "snapshot": check_snapshot,
    "snapshot_trace": check_snapshot_trace,
    "oom": check_oom,
    "non_memory_error": check_non_memory_error,
    "graph_capture": check_graph_capture,
    "graph_pool_shared": check_graph_pool_shared,
    "graph_retry": check_graph_retry,
    "cudnn_benchmark": check_cudnn_benchmark,
    "compile": check_compile,
    "ddp": check_ddp,
    "multi_device": check_multi_device,
    "empty_tensors": check_empty_tensors,
    "empty_tensors_pluggable": check_empty_tensors_pluggable,
    "hf_trainer": check_hf_trainer,
    "lightning": check_lightning,
}


def run_one(name, quick):
    """Child mode: one check in this process; prints one RESULT line."""
    started = time.monotonic()
    try:
        detail = CHECKS[name](quick)
        status = "pass"
    except Skip as why:
        status, detail = "skip", str(why)
    except Exception as error:  # report every failure as a table row
        import traceback

        traceback.print_exc()
        status, detail = "FAIL", f"{type(error).__name__}: {error}"
    result = {"check": name, "status": status, "detail": detail, "seconds": round(time.monotonic() - started, 2)}
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if status != "FAIL" else 1


def torch_and_gpu_present():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no GPU"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer steps")
    parser.add_argument("--only", default="", help="comma-separated checks: " + ",".join(CHECKS))
    parser.add_argument("--check", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per check")
    parser.add_argument("--native", action="store_true", help="PyTorch's own allocator (a baseline): no memcoord")
    args = parser.parse_args()
    missing = torch_and_gpu_present()
    if missing:
        print(f"integration_checks: skipped: {missing}")
        return 77
    if args.check:
        return run_one(args.check, args.quick)
    names = [n for n in args.only.split(",") if n] or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        parser.error(f"unknown check(s) {unknown}; accepted: {', '.join(CHECKS)}")
    rows = []
    for name in names:
        command = [sys.executable, __file__, "--check", name] + (["--quick"] if args.quick else [])
        env = dict(os.environ, MEMCOORD_CHECKS_NATIVE="1") if args.native else None
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env)
            out = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as error:
            out = f"timed out after {args.timeout:.0f} s"
            proc = None
        line = next((l for l in out.splitlines() if l.startswith("RESULT ")), None)
        if line is None:
            code = proc.returncode if proc else "timeout"
            row = {"check": name, "status": "FAIL", "detail": f"no result (exit {code}): {out.strip()[-300:]}",
                   "seconds": 0}
        else:
            row = json.loads(line[len("RESULT "):])
            if row["status"] == "FAIL":
                sys.stderr.write(out[-3000:])
        rows.append(row)
        print(f"{row['check']:<14} {row['status']:<5} {row['detail']}", flush=True)
    print(f"\n== integration checks under {'PyTorch native (--native)' if args.native else 'memcoord'} ==")
    print(f"{'check':<14} {'result':<6} {'s':>6}  detail")
    for row in rows:
        print(f"{row['check']:<14} {row['status']:<6} {row['seconds']:>6.1f}  {row['detail']}")
    failed = [r["check"] for r in rows if r["status"] == "FAIL"]
    print(f"failed: {', '.join(failed) if failed else 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
