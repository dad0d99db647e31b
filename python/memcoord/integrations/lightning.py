"""memcoord for PyTorch Lightning: `Trainer(..., callbacks=[MemcoordCallback()])`.

Importing this module imports `lightning` (or the older `pytorch_lightning`); memcoord itself never does.
  - memcoord's safe points around every optimizer step: a step begins at the first training batch after the
    last optimizer step (on_train_batch_start) and ends at the batch end where the optimizer has stepped
    (on_train_batch_end, seen as trainer.global_step moving). With accumulate_grad_batches=N Lightning calls
    the batch hooks for each of the N micro-batches, and the N of them are one memcoord step; coordinator
    trims run at an optimizer step's end on every rank;
  - memcoord's figures (memcoord/allocated_gb, reserved_gb, peak_*, trims) are logged through
    pl_module.log_dict at every `log_every_n_steps`-th optimizer step (the Trainer's setting), once per step;
  - the abort watcher runs from the first batch on (as memcoord.enable() starts it), so an abort of the job
    ends the process with EXIT_ABORTED naming the dead rank, even while a rank is blocked in a collective. An
    abort seen at a step's end is answered the same way; with your own handler (watch_aborts(on_abort=...))
    that handler is called instead, and AbortedError then ends trainer.fit(). After
    memcoord.enable(watch_aborts=False) (no watcher started since), no watcher runs and AbortedError alone ends
    it, for you to handle.
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
        self._step_at_begin = None  # trainer.global_step when the open step began

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._step_at_begin is None:  # a later micro-batch of the same optimizer step begins nothing
            self._steps.begin()
            self._step_at_begin = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        # global_step counts optimizer steps: it has moved only at the batch that ended one (the N-th micro-batch
        # with accumulate_grad_batches=N, or an epoch's last batch). Reading it, rather than recomputing
        # Lightning's accumulation rule from batch_idx, also covers manual optimization and strategies that
        # accumulate on their own.
        if self._step_at_begin is None or trainer.global_step == self._step_at_begin:
            return
        self._step_at_begin = None
        self._steps.end()
        every = max(int(getattr(trainer, "log_every_n_steps", 50) or 50), 1)
        if trainer.global_step % every == 0:
            pl_module.log_dict(log_stats(self._prefix), on_step=True, on_epoch=False, sync_dist=False)
