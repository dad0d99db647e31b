"""memcoord for Hugging Face's Trainer:

    trainer = Trainer(...)
    memcoord.integrations.huggingface.add_to(trainer)    # or Trainer(..., callbacks=[MemcoordCallback()])

Importing this module imports transformers (memcoord itself never does). The callback:
  - on_step_begin / on_step_end: memcoord's safe points around every optimizer step (gradient-accumulation
    micro-steps are inside one step: the Trainer calls on_step_begin at the first micro-batch and on_step_end
    after the optimizer step, on_substep_end at the others), so coordinator trims run at a step's end on every
    rank. A step whose training step raised never ends (it is no safe point); a retry (auto_find_batch_size)
    goes on with it;
  - on_log: adds memcoord's figures (memcoord/allocated_gb, reserved_gb, peak_*, trims: this rank's GPU, see
    log_stats; the reporters write rank 0's) to the logs dict, which the callbacks after this one receive, and
    to the entry the Trainer has just appended to `state.log_history` (it appends a copy of the logs before any
    callback runs, so updating the dict alone does not reach the history). The reporters of `report_to`
    (TensorBoard, W&B, ...) come BEFORE every callback passed in `callbacks=[...]`: transformers builds the list
    as its defaults and the reporters, then yours. So with `callbacks=[MemcoordCallback()]` only the history and
    the console printer get the figures; add_to(trainer) puts the callback first, for every reporter to see them;
  - the abort watcher runs from the first step on (as memcoord.enable() starts it), so an abort of the job
    ends the process with EXIT_ABORTED naming the dead rank, even while a rank is blocked in a collective. An
    abort seen at a step's end is answered the same way; with your own handler (watch_aborts(on_abort=...))
    that handler is called instead, and AbortedError then ends the Trainer's loop. After
    memcoord.enable(watch_aborts=False) (no watcher started since), no watcher runs and AbortedError alone ends
    it, for you to handle.
"""

try:
    from transformers import TrainerCallback
except ImportError as transformers_error:
    # Named as the Lightning module names its framework: a bare "No module named 'transformers'" says neither
    # what needed it nor how to get it.
    raise ImportError(
        "memcoord.integrations.huggingface needs Hugging Face Transformers, and `transformers` is not importable "
        f"({transformers_error}); install it (pip install transformers)",
        name="transformers",
    ) from None

from .. import init
from . import log_stats
from ._steps import StepTracker


class MemcoordCallback(TrainerCallback):
    def __init__(self, log_prefix="memcoord/"):
        self._steps = StepTracker()
        self._prefix = log_prefix

    def on_step_begin(self, args, state, control, **kwargs):
        self._steps.begin()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        self._steps.end()
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None:
            init()  # trainer.evaluate() before train() logs before any step made the worker (idempotent)
            figures = log_stats(self._prefix)
            logs.update(figures)
            history = getattr(state, "log_history", None)
            if history and history[-1].get("step") == getattr(state, "global_step", None):
                history[-1].update(figures)
        return control


def add_to(trainer, callback=None):
    """Puts `callback` (default: the trainer's MemcoordCallback if it has one, else a new one) first in
    `trainer`'s callbacks and returns it. First, because the Trainer runs its callbacks in order and places
    the `report_to` reporters before those given in `callbacks=[...]`: only from the front do memcoord's
    figures reach every reporter. A MemcoordCallback already in the list is moved, never doubled (two would
    each begin and end every step)."""
    callbacks = getattr(getattr(trainer, "callback_handler", None), "callbacks", None)
    if not isinstance(callbacks, list):
        raise TypeError("add_to(trainer): expected a transformers.Trainer (its callback_handler.callbacks, a list), "
                        f"got {type(trainer).__name__}")
    present = [c for c in callbacks if isinstance(c, MemcoordCallback)]
    if callback is None:
        callback = present[0] if present else MemcoordCallback()
    elif not isinstance(callback, MemcoordCallback):
        raise TypeError(f"add_to(trainer, callback): callback must be a MemcoordCallback or None, got "
                        f"{type(callback).__name__}")
    if any(c is not callback for c in present):
        raise ValueError("add_to(trainer, callback): the trainer already has another MemcoordCallback; pass that "
                         "one (or callback=None) to move it to the front")
    callbacks[:] = [callback] + [c for c in callbacks if c is not callback]
    return callback
