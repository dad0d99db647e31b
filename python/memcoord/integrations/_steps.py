"""The safe-point bookkeeping both integrations share: a step is begun once and ended once, the abort watcher
runs, and an abort seen at a step's end is answered as the watcher answers it (unless enable(watch_aborts=False)
left aborts to the user: then AbortedError alone goes on)."""

import sys
import warnings

from .. import AbortedError, _abort, _capi, init, is_enabled, step_begin, step_end

_warned = {"not_torchs_allocator": False}  # each warning once a process


class StepTracker:
    """begin()/end() pairs around each optimizer step. begin() while a step is open does nothing (a later
    micro-batch, or the next attempt after a step that raised: that step never ended, so it was no safe point, and
    it ends at the next end()); end() without begin() does nothing."""

    def __init__(self):
        self._open = False
        self._watching = False

    def begin(self):
        if self._open:
            return
        init()
        _warn_unless_torchs_allocator()
        self._watch()
        self._guard(step_begin)
        self._open = True

    def end(self):
        if not self._open:
            return
        self._open = False
        self._guard(step_end)

    def _watch(self):
        """Starts the abort watcher once, as enable() does: without it an abort while the training thread is
        blocked in a collective would never end the process, though the integrations promise that it does.
        keep_running: a watcher already running (enable()'s, or the user's watch_aborts(on_abort=...)) stays as
        it is, its handler included."""
        if self._watching:
            return
        self._watching = True
        torch_side = sys.modules.get("memcoord._torch")
        if torch_side is not None and torch_side.watcher_declined():
            return  # enable(watch_aborts=False): the user handles aborts at step ends
        if _capi.library().has("memcoord_wait_abort"):  # an older library: aborts are seen at step ends only
            _abort.start_watcher(keep_running=True)

    @staticmethod
    def _guard(call):
        try:
            call()
        except AbortedError as error:
            # As the watcher answers: the user's on_abort handler when one is set (watch_aborts(on_abort=...)),
            # else exit_aborted (EXIT_ABORTED, naming the dead rank), which does not return. Not when
            # enable(watch_aborts=False) left aborts to the user and no watcher was started since: exiting here
            # would take from them the AbortedError they handle.
            torch_side = sys.modules.get("memcoord._torch")
            if torch_side is None or not torch_side.aborts_left_to_caller():
                _abort.answer_abort(_abort.AbortFacts(error.dead_rank, error.reason, 0))
            # The handler returned (or had already answered this abort): the step did not complete and the group
            # cannot go on, so the framework's loop stops here; the user may catch AbortedError around it.
            raise


def _warn_unless_torchs_allocator():
    """Warns (once) when PyTorch is imported but memcoord is not its allocator: the callbacks then run on a worker of
    their own (init()), whose pools hold none of PyTorch's tensors, so the memcoord/* figures they log stay near 0
    and a coordinator trim releases nothing PyTorch holds, with nothing to say why."""
    if _warned["not_torchs_allocator"] or "torch" not in sys.modules or is_enabled():
        return
    _warned["not_torchs_allocator"] = True
    warnings.warn(
        "memcoord.integrations: memcoord is not PyTorch's allocator in this process (memcoord.enable() was not "
        "called before the first CUDA allocation): PyTorch's tensors are not in memcoord's pools, so the memcoord/* "
        "figures logged leave them out and coordinator trims cannot release their memory",
        RuntimeWarning,
        stacklevel=4,
    )
