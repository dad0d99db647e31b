"""Training-framework integrations, each imported only when asked for (neither framework is required):

    from memcoord.integrations import huggingface
    huggingface.add_to(trainer)    # a transformers.Trainer: the callback first, before the report_to reporters

    from memcoord.integrations.lightning import MemcoordCallback        # lightning.Trainer(callbacks=[...])
    from memcoord.integrations.pytorch_lightning import MemcoordCallback  # pytorch_lightning.Trainer(...)

Both give memcoord its safe points (step_begin/step_end around every optimizer step: coordinator trims land
there, the same step on every rank), start the abort watcher so that an abort of the job ends the process
naming the dead rank (or calls your watch_aborts(on_abort=...) handler), and put memcoord's memory figures
into the framework's logs (log_stats below). Call memcoord.enable() first, before the first CUDA allocation: without
it PyTorch's tensors are not in memcoord's pools, and the callbacks warn that their figures and the coordinator's
trims leave them out.
"""

from .. import stats as _stats

GB = 1e9


def log_stats(prefix="memcoord/"):
    """memcoord's figures for a framework's logs, as floats: {prefix}allocated_gb, reserved_gb, peak_allocated_gb,
    peak_reserved_gb (GB of 10^9 bytes, as memcoord writes sizes; peaks since the last reset_peak_stats()) and trims
    (the cache trims so far). They are this process's primary device's, the GPU of its local rank, every pool on it
    summed; other devices the process allocates on are left out. Each rank logs its own: the reporters that write
    only on rank 0 (most of them) show rank 0's GPU."""
    s = _stats(-1)
    return {
        f"{prefix}allocated_gb": s["allocated_bytes"] / GB,
        f"{prefix}reserved_gb": s["reserved_bytes"] / GB,
        f"{prefix}peak_allocated_gb": s["peak_allocated_bytes"] / GB,
        f"{prefix}peak_reserved_gb": s["peak_reserved_bytes"] / GB,
        f"{prefix}trims": float(s["trims"]),
    }
