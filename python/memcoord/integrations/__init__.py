"""Training-framework integrations, each imported only when asked for (neither framework is required):

    from memcoord.integrations import huggingface
    huggingface.add_to(trainer)    # a transformers.Trainer: the callback first, before the report_to reporters

    from memcoord.integrations.lightning import MemcoordCallback        # lightning.Trainer(callbacks=[...])

Both give memcoord its safe points (step_begin/step_end around every optimizer step: coordinator trims land
there, the same step on every rank), start the abort watcher so that an abort of the job ends the process
naming the dead rank (or calls your watch_aborts(on_abort=...) handler), and put memcoord's memory figures
into the framework's logs (log_stats below).
"""

from .. import stats as _stats

GB = 1e9


def log_stats(prefix="memcoord/"):
    """memcoord's figures for the primary device, for a framework's logs (GB, floats)."""
    s = _stats(-1)
    return {
        f"{prefix}allocated_gb": s["allocated_bytes"] / GB,
        f"{prefix}reserved_gb": s["reserved_bytes"] / GB,
        f"{prefix}peak_allocated_gb": s["peak_allocated_bytes"] / GB,
        f"{prefix}peak_reserved_gb": s["peak_reserved_bytes"] / GB,
        f"{prefix}trims": float(s["trims"]),
    }
