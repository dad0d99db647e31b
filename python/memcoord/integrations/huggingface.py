"""memcoord for Hugging Face's Trainer: `Trainer(..., callbacks=[MemcoordCallback()])`.

Importing this module imports transformers (memcoord itself never does). The callback:
  - on_step_begin / on_step_end: memcoord's safe points around every optimizer step (gradient-accumulation
    micro-steps are inside one step), so coordinator trims run at a step's end on every rank;
  - on_log: adds memcoord's figures (memcoord/allocated_gb, reserved_gb, peak_*, trims) to the logs dict,
    which the reporting callbacks after this one receive (pass it first in `callbacks` for every reporter to
    see them), and to the entry the Trainer has just appended to `state.log_history` (it appends a copy of
    the logs before any callback runs, so updating the dict alone does not reach the history);
  - an abort of the job ends the process with EXIT_ABORTED naming the dead rank (at the step's end, or
    earlier through the watcher that memcoord.enable() starts).
"""

from transformers import TrainerCallback

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
            figures = log_stats(self._prefix)
            logs.update(figures)
            history = getattr(state, "log_history", None)
            if history and history[-1].get("step") == getattr(state, "global_step", None):
                history[-1].update(figures)
        return control
