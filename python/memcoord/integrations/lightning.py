"""memcoord for PyTorch Lightning: `Trainer(..., callbacks=[MemcoordCallback()])`.

Importing this module imports `lightning` (or the older `pytorch_lightning`); memcoord itself never does.
  - on_train_batch_start / on_train_batch_end: memcoord's safe points around every training batch, so
    coordinator trims run at a batch's end on every rank;
  - memcoord's figures (memcoord/allocated_gb, reserved_gb, peak_*, trims) are logged through
    pl_module.log_dict every `log_every_n_steps` batches (the Trainer's setting);
  - an abort of the job ends the process with EXIT_ABORTED naming the dead rank.
"""

try:
    from lightning.pytorch.callbacks import Callback
except ImportError as lightning_error:  # the package's name before Lightning 2.0
    try:
        from pytorch_lightning.callbacks import Callback
    except ImportError as old_name_error:
        # One error naming both: the second alone ("No module named 'pytorch_lightning'") hides that the
        # current package, lightning, was looked for first.
        raise ImportError(
            "memcoord.integrations.lightning needs PyTorch Lightning, and neither `lightning` "
            f"({lightning_error}) nor its name before 2.0, `pytorch_lightning` ({old_name_error}), is "
            "importable; install one (pip install lightning)",
            name="lightning",
        ) from None

from . import log_stats
from ._steps import StepTracker


class MemcoordCallback(Callback):
    def __init__(self, log_prefix="memcoord/"):
        super().__init__()
        self._steps = StepTracker()
        self._prefix = log_prefix

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._steps.begin()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._steps.end()
        every = max(int(getattr(trainer, "log_every_n_steps", 50) or 50), 1)
        if trainer.global_step % every == 0:
            pl_module.log_dict(log_stats(self._prefix), on_step=True, on_epoch=False, sync_dist=False)
