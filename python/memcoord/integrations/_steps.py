"""The safe-point bookkeeping both integrations share: a step is begun once and ended once, and an abort seen
at a step's end ends the process as the abort watcher does."""

from .. import AbortedError, _abort, init, step_begin, step_end


class StepTracker:
    """begin()/end() pairs around each optimizer step; end() without begin() does nothing."""

    def __init__(self):
        self._open = False

    def begin(self):
        if self._open:
            return
        init()
        self._guard(step_begin)
        self._open = True

    def end(self):
        if not self._open:
            return
        self._open = False
        self._guard(step_end)

    @staticmethod
    def _guard(call):
        try:
            call()
        except AbortedError as error:
            _abort.exit_aborted(_abort.AbortFacts(error.dead_rank, error.reason, 0))
