"""memcoord for PyTorch Lightning: `Trainer(..., callbacks=[MemcoordCallback()])`.

Importing this module imports `lightning` (lightning.pytorch), or, where `lightning` is not installed, its name
before 2.0, `pytorch_lightning`; memcoord itself never imports either. The hooks are expected as Lightning 2.x calls
them (on_train_batch_start(trainer, pl_module, batch, batch_idx), on_train_batch_end(trainer, pl_module, outputs,
batch, batch_idx), trainer.global_step counting optimizer steps as they happen).

With both packages installed, this module's MemcoordCallback is a `lightning` Callback, for a `lightning.Trainer`.
For a `pytorch_lightning.Trainer` use memcoord.integrations.pytorch_lightning.MemcoordCallback: a Trainer of one
package refuses a callback of the other (ValueError "Expected a parent").

The callback:
  - gives memcoord its safe points around every optimizer step: a step begins at the first training batch after
    the last optimizer step (on_train_batch_start) and ends at the batch end where the optimizer has stepped
    (on_train_batch_end, seen as trainer.global_step moving). With accumulate_grad_batches=N Lightning calls
    the batch hooks for each of the N micro-batches, and the N of them are one memcoord step; coordinator
    trims run at an optimizer step's end on every rank. A batch that raises ends no step (it did not complete);
    the step it began goes on into the next training batch, of this Trainer or another;
  - logs memcoord's figures (memcoord/allocated_gb, reserved_gb, peak_*, trims: see log_stats) through
    pl_module.log_dict at every `log_every_n_steps`-th optimizer step (the Trainer's setting), once per step:
    the steps whose metrics Lightning writes to its loggers (with one optimizer); none with log_every_n_steps=0.
    Each rank logs its own device's figures (sync_dist=False); Lightning's loggers write rank 0's;
  - runs the abort watcher from the first batch on (as memcoord.enable() starts it), so an abort of the job
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

from ._lightning_hooks import LightningStepHooks


class MemcoordCallback(LightningStepHooks, Callback):
    """memcoord's safe points and figures for a Lightning Trainer (see the module's docstring).
    log_prefix: the start of the logged names (memcoord/allocated_gb, ...)."""
