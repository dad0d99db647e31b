"""The Lightning hooks of memcoord's callback, shared by memcoord.integrations.lightning (on `lightning`'s Callback)
and memcoord.integrations.pytorch_lightning (on `pytorch_lightning`'s). Imports no Lightning: each of those modules
puts this mixin before its package's Callback."""

from . import log_stats
from ._steps import StepTracker


class LightningStepHooks:
    """on_train_batch_start / on_train_batch_end as Lightning 2.x calls them: memcoord's safe points around every
    optimizer step, and memcoord's figures logged at the steps Lightning writes to its loggers."""

    def __init__(self, log_prefix="memcoord/"):
        super().__init__()
        self._steps = StepTracker()
        self._prefix = log_prefix
        self._step_at_begin = None  # trainer.global_step at the latest batch start of the open step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._steps.begin()  # begins nothing while a step is open: a later micro-batch of the same optimizer step
        # Re-read at every batch start, where within one optimizer step it is the same for every micro-batch. Kept
        # from the step's first batch only, it went stale when that batch raised (or the fit stopped mid-step):
        # with a new Trainer, or after Lightning's batch-size finder reset the count, global_step differed from it
        # at the first batch end, which then ended the step in the middle of an accumulation.
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
        # Lightning writes step metrics to its loggers when (_batches_that_stepped + 1) % log_every_n_steps == 0,
        # checked after this hook: _batches_that_stepped + 1 is global_step here, with one optimizer. It writes none
        # with log_every_n_steps=0 (the figures would only be computed for nothing).
        every = getattr(trainer, "log_every_n_steps", 50)
        if every and trainer.global_step % int(every) == 0:
            pl_module.log_dict(log_stats(self._prefix), on_step=True, on_epoch=False, sync_dist=False)
