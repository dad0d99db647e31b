"""memcoord for a `pytorch_lightning.Trainer` (PyTorch Lightning under its name before 2.0, still published):
`pytorch_lightning.Trainer(..., callbacks=[MemcoordCallback()])`.

The callback of memcoord.integrations.lightning (see its docstring for what it does) on `pytorch_lightning`'s
Callback. Where `lightning` is installed too, that module's callback is a `lightning` Callback, which a
`pytorch_lightning.Trainer` refuses (ValueError "Expected a parent"): take this one. Importing this module imports
pytorch_lightning; memcoord itself never does.
"""

try:
    from pytorch_lightning.callbacks import Callback
except ImportError as pytorch_lightning_error:
    raise ImportError(
        "memcoord.integrations.pytorch_lightning needs `pytorch_lightning`, which is not importable "
        f"({pytorch_lightning_error}); install it (pip install pytorch-lightning), or, for a lightning.Trainer, "
        "use memcoord.integrations.lightning",
        name="pytorch_lightning",
    ) from None

from ._lightning_hooks import LightningStepHooks


class MemcoordCallback(LightningStepHooks, Callback):
    """memcoord's safe points and figures for a pytorch_lightning Trainer (see memcoord.integrations.lightning).
    log_prefix: the start of the logged names (memcoord/allocated_gb, ...)."""
