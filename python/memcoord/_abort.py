"""Aborts reach the training loop: when the coordinator aborts this process's group (a peer rank died), the
process ends within a bounded time with a message naming the dead rank and the reason, and exit code
EXIT_ABORTED (75), even while its training thread is blocked inside a collective.

How: a daemon thread sits in memcoord_wait_abort() (a C call; ctypes releases the GIL while it waits). On an
abort it (1) prints the message to stderr, (2) aborts the torch.distributed process groups when
torch.distributed is initialized (NCCL: the communicators are aborted, which frees a rank stuck in a
collective), bounded to `pg_abort_budget_s`, and (3) calls os._exit(EXIT_ABORTED): the blocked main thread
cannot run Python, so no exception could reach it in time. A custom `on_abort(facts)` replaces all three: no
message, no process-group abort, no exit (the handler does what it chooses). The framework callbacks
(memcoord.integrations) call that handler too when they see the abort first, at a step's end (answer_abort).
"""

import os
import sys
import threading
import time

from . import _capi

_watcher = None
_watcher_lock = threading.Lock()
_handled = threading.Event()  # set by the first exit_aborted()
_handled_lock = threading.Lock()  # makes exit_aborted's check of _handled and its set one step
_excepthook = {"installed": False, "grace_ms": 0}  # _install_excepthook's, guarded by _watcher_lock


class AbortFacts:
    """What the coordinator said: `dead_rank` (-1 if it named none), `reason`, `time_unix_ms`."""

    def __init__(self, dead_rank, reason, time_unix_ms):
        self.dead_rank = dead_rank
        self.reason = reason
        self.time_unix_ms = time_unix_ms

    def describe(self):
        """"rank 1 (host h, pid p) is dead: ..." as the coordinator words it, else "rank 1 died (reason)"."""
        if self.dead_rank >= 0 and self.reason.startswith(f"rank {self.dead_rank} "):
            return self.reason
        who = f"rank {self.dead_rank}" if self.dead_rank >= 0 else "a rank the coordinator did not name"
        return f"{who} died ({self.reason or 'no reason given'})"

    def __repr__(self):
        return f"AbortFacts(dead_rank={self.dead_rank}, reason={self.reason!r})"


def abort_facts(lib=None):
    """The AbortFacts when this process's group was aborted, else None."""
    lib = lib or _capi.library()
    info = lib.abort_info()
    if info is None or not info.aborted:
        return None
    return AbortFacts(int(info.dead_rank), info.reason.decode("utf-8", "replace"), int(info.time_unix_ms))


def _own_rank():
    for name in ("RANK", "MEMCOORD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if os.environ.get(name, "").isdigit():
            return os.environ[name]
    return "?"


def abort_process_groups(budget_s=1.0):
    """Aborts every torch.distributed process group when torch.distributed is initialized; returns a line
    saying what was done. Never raises; gives up after `budget_s` (the abort runs on its own thread)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported: no process group to abort"
    try:
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            return "torch.distributed is not initialized: no process group to abort"
    except Exception as error:  # a broken torch install must not stop the exit
        return f"could not query torch.distributed: {error}"
    outcome = ["did not finish"]

    def run():
        try:
            c10d = dist.distributed_c10d
            if hasattr(c10d, "_abort_process_group"):
                c10d._abort_process_group()  # None: every group, the default one included
                outcome[0] = "aborted every process group (_abort_process_group)"
                return
            aborted = 0
            for pg in list(getattr(c10d, "_world").pg_map):
                for device in ("cuda", "cpu"):
                    try:
                        pg._get_backend(torch.device(device)).abort()
                        aborted += 1
                    except Exception:
                        pass
            outcome[0] = f"aborted {aborted} process-group backends"
        except Exception as error:
            outcome[0] = f"process-group abort failed: {error}"

    thread = threading.Thread(target=run, name="memcoord-pg-abort", daemon=True)
    thread.start()
    thread.join(budget_s)
    return outcome[0]


def _bounded(call, wait_s):
    """Runs `call` on a daemon thread and waits for it at most `wait_s`; never raises. The exit path writes only
    through this: a main thread blocked writing to a full pipe holds that stream's buffer lock (sys.stdout's or
    sys.stderr's), and even a raw write to a full stderr pipe blocks, so waiting on either would keep the
    process from ever reaching os._exit. A write still blocked when the process exits is lost."""
    def run():
        try:
            call()
        except Exception:
            pass

    helper = threading.Thread(target=run, name="memcoord-abort-output", daemon=True)
    helper.start()
    helper.join(wait_s)


def _write_stderr(text, wait_s=0.5):
    """`text` to file descriptor 2 with os.write, past sys.stderr's buffer and its lock (see _bounded)."""
    def write():
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(2, data):]

    _bounded(write, wait_s)


def exit_aborted(facts, pg_abort_budget_s=1.0):
    """The default response to an abort: message, process-group abort, os._exit(EXIT_ABORTED). Runs once
    per process (a second caller waits for the first to exit). Each output waits a bounded time (_bounded), so
    a blocked stdout or stderr delays the exit by at most 1.2 s."""
    with _handled_lock:  # two callers (the watcher and the exception hook) may come at once: one goes on
        first = not _handled.is_set()
        _handled.set()
    if not first:
        time.sleep(60)  # the first caller is exiting the process
        os._exit(_capi.EXIT_ABORTED)
    rank = _own_rank()
    _write_stderr(f"memcoord: rank {rank}: the job was aborted by the coordinator: {facts.describe()}.\n")
    pg = abort_process_groups(pg_abort_budget_s)
    _write_stderr(f"memcoord: rank {rank}: {pg}; exiting with code {_capi.EXIT_ABORTED} (MEMCOORD_EXIT_ABORTED) so "
                  "the launcher can restart the job\n")
    # Best effort: lines the training script printed to a pipe would otherwise be lost at os._exit.
    _bounded(sys.stdout.flush, 0.2)
    os._exit(_capi.EXIT_ABORTED)


class AbortWatcher:
    """The watcher thread. start() once; stop() ends it (it also ends when the worker shuts down).
    configure() changes the handler and the poll interval of a running watcher."""

    def __init__(self, on_abort=None, poll_ms=500, pg_abort_budget_s=1.0):
        self._lib = _capi.library()
        self._lib.function("memcoord_wait_abort")  # MissingSymbolError now, not in the thread
        self._on_abort = on_abort
        self._poll_ms = int(poll_ms)
        self._budget = pg_abort_budget_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memcoord-abort-watcher", daemon=True)
        self._answer_lock = threading.Lock()
        self.facts = None  # the abort answered (answer()), else None

    def start(self):
        self._thread.start()
        return self

    def configure(self, on_abort=None, poll_ms=500):
        """Replaces the handler and the poll interval. The thread reads each when it uses it: the interval at its
        next wait, the handler when an abort comes."""
        self._on_abort = on_abort
        self._poll_ms = int(poll_ms)

    @property
    def on_abort(self):
        return self._on_abort

    @property
    def poll_ms(self):
        return self._poll_ms

    def stop(self, timeout=2.0):
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self):
        return self._thread.is_alive()

    def answer(self, facts):
        """Answers the abort `facts` with the handler set last (the default response when none), once: this
        thread and a framework callback's step end (answer_abort) may both see the abort. False when it was
        already answered (the handler is not called again)."""
        with self._answer_lock:
            if self.facts is not None:
                return False
            self.facts = facts
            on_abort = self._on_abort  # the handler set last, read once
        if on_abort is not None:
            on_abort(facts)
        else:
            exit_aborted(facts, self._budget)
        return True

    def _run(self):
        wait = self._lib.function("memcoord_wait_abort")
        while not self._stop.is_set():
            code = wait(self._poll_ms)
            if code == _capi.DEADLINE_EXCEEDED:
                continue
            if code == _capi.ABORTED:
                self.answer(abort_facts(self._lib) or AbortFacts(-1, self._lib.last_error(), 0))
                return
            # FAILED_PRECONDITION: the worker is shutting down (or was never made): nothing left to watch.
            return


def _handler_watcher():
    """The watcher when it has a handler of the user's (on_abort), else None. A watcher that already answered an
    abort through that handler has ended its thread, but the abort stays the handler's."""
    watcher = _watcher  # read once: stop_watcher() may clear it meanwhile
    if watcher is not None and watcher.on_abort is not None and (watcher.alive or watcher.facts is not None):
        return watcher
    return None


def _custom_handler_set():
    """Whether the user's on_abort handler answers aborts: the exception hook then stays out."""
    return _handler_watcher() is not None


def answer_abort(facts):
    """An abort seen outside the watcher (AbortedError at a step's end in memcoord.integrations), answered as
    the watcher answers it: by the user's on_abort handler when one is set (watch_aborts(on_abort=...); called
    once, by whichever sees the abort first), which returns; else by exit_aborted, which does not."""
    watcher = _handler_watcher()
    if watcher is not None:
        watcher.answer(facts)
        return
    exit_aborted(facts)


def _attached_to_a_coordinator():
    """Whether the live worker was made with a coordinator: a standalone worker is never aborted, so an exception
    that ends it has no abort to wait for."""
    import memcoord  # the package imports this module

    settings = memcoord.initialized_settings()
    if settings is not None:
        return bool(settings.get("MEMCOORD_COORDINATOR"))
    return bool(os.environ.get("MEMCOORD_COORDINATOR"))  # a C call made the worker, from the environment


def _install_excepthook(grace_ms):
    """A collective that fails because a peer died (gloo: "connection closed by peer") raises in the training
    thread, often a few milliseconds before the coordinator's abort arrives. An exception that ends the
    process therefore first waits up to `grace_ms` for an abort; when one comes, the process ends as an
    abort (message naming the dead rank, EXIT_ABORTED) instead of with the collective's traceback and 1.

    Installed once per process (caller holds _watcher_lock): the watcher restarts after every shutdown(),
    and each install wrapped the previous hook, so an uncaught exception waited `grace_ms` once per install.
    While the user's on_abort handler is set (watch_aborts(on_abort=...)), the hook only passes the
    exception on: the abort is the handler's to answer; and a worker with no coordinator waits for nothing."""
    _excepthook["grace_ms"] = int(grace_ms)
    if _excepthook["installed"]:
        return
    _excepthook["installed"] = True
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        note_uncaught(exc_type, exc)
        try:
            lib = _capi.library()
            if (not issubclass(exc_type, KeyboardInterrupt) and not _custom_handler_set()
                    and _attached_to_a_coordinator() and lib.has("memcoord_wait_abort")):
                code = lib.function("memcoord_wait_abort")(int(_excepthook["grace_ms"]))
                if code == _capi.ABORTED:
                    facts = abort_facts(lib) or AbortFacts(-1, lib.last_error(), 0)
                    sys.stderr.write(f"memcoord: the training thread stopped on {exc_type.__name__}: {exc}\n")
                    exit_aborted(facts)
        except Exception:
            pass
        previous(exc_type, exc, tb)

    sys.excepthook = hook


# ---------------------------------------------------------------------------------------------------------
# How this process is ending, for the detach at exit (memcoord._shutdown_at_exit): a rank that dies of an
# uncaught exception or a non-zero exit must make the coordinator abort its peers (memcoord_fail), or they wait
# in their collective for NCCL's timeout; a rank that ends well detaches cleanly and aborts nobody.
#
# What can be seen from an atexit handler (CPython 3.11 checked; 3.12 adds sys.last_exc):
#   uncaught exception in the main thread  sys.last_value (set before any sys.excepthook, the user's included)
#                                           and this module's hook (note_uncaught), when it is installed.
#   sys.exit(n) / exit(n) in the main thread  only through sys.exit itself: the interpreter discards the
#                                           SystemExit before atexit runs. record_exit_status() wraps sys.exit
#                                           to note the code (and passes everything on unchanged).
# What cannot: `raise SystemExit(n)` written out (no call to sys.exit; seen as a clean exit), and a sys.exit(n)
# that the program caught and then ended normally without another sys.exit (seen as exiting with n). An
# uncaught exception in another thread does not end the process and is not a failure. os._exit(), a signal or
# a crash runs no atexit handler at all: the session then breaks, which the coordinator treats as a death too.
_exit_status = {"exception": None, "code": None, "wrapped": False}


def note_uncaught(exc_type, exc):
    """Records an exception about to end the main thread (this module's excepthook; callable by others)."""
    if threading.current_thread() is threading.main_thread():
        _exit_status["exception"] = (exc_type, exc)


def record_exit_status():
    """Wraps sys.exit once so the code of a main-thread sys.exit(n) is known at exit (see above). Idempotent;
    leaves a sys.exit that someone else replaced meanwhile alone."""
    if _exit_status["wrapped"]:
        return
    _exit_status["wrapped"] = True
    original = sys.exit

    def exit(status=None):  # noqa: A001  (the name sys.exit has)
        if threading.current_thread() is threading.main_thread():
            _exit_status["code"] = status
        original(status)

    exit.__doc__ = original.__doc__
    exit.__wrapped__ = original
    sys.exit = exit


def _describe(exc_type, exc):
    text = str(exc).strip().replace("\n", " ")
    if len(text) > 500:
        text = text[:500] + "..."
    return f"exited on {exc_type.__name__}: {text}" if text else f"exited on {exc_type.__name__}"


def failure_at_exit():
    """Why this process is ending as a failure, or None when it ends well (as far as can be seen: above)."""
    interactive = bool(sys.flags.interactive) or hasattr(sys, "ps1")
    recorded = _exit_status["exception"]
    if recorded is not None:
        return _describe(*recorded)
    if not interactive:  # a REPL sets sys.last_value for every error it printed, and went on
        last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if isinstance(last, BaseException) and not isinstance(last, SystemExit):
            return _describe(type(last), last)
    code = _exit_status["code"]
    if code is None or code == 0:
        return None
    if isinstance(code, int):  # bool included: sys.exit(True) exits with 1
        return f"exited with code {int(code)}"
    text = str(code).strip().replace("\n", " ")[:500]
    return f"exited with code 1: {text}"  # sys.exit("message") prints it and exits with 1


# How long after an abort memcoord's own thread ends the process when nothing in Python has
# (memcoord_set_abort_exit): the watcher thread needs the interpreter lock, which a main thread blocked in a C
# call that does not release it may hold for minutes. 1.5 s leaves the watcher its own exit (message, process
# groups aborted within 1 s) and still ends the process within 2 s of the abort.
BACKSTOP_MS = 1500


def _arm_backstop(default_response):
    """With the default response the process must end: memcoord ends it BACKSTOP_MS after an abort if Python did
    not. With the user's own handler, which may keep the process alive, the backstop is off."""
    lib = _capi.library()
    if not lib.has("memcoord_set_abort_exit"):  # an older library: the watcher alone
        return
    try:
        lib.call("memcoord_set_abort_exit", _capi.EXIT_ABORTED if default_response else 0, BACKSTOP_MS)
    except _capi.MemcoordError:
        pass  # no worker (shut down meanwhile): nothing to end


def start_watcher(on_abort=None, poll_ms=500, excepthook_grace_ms=1500, keep_running=False):
    """Starts the process's abort watcher (and the exception hook above, unless `on_abort` is given); returns
    it. When one already runs, it takes `on_abort` and `poll_ms` in place of its own, so that
    watch_aborts(on_abort=...) after enable() is not silently ignored; keep_running=True (enable()'s and the
    framework callbacks') leaves a running one as it is instead, and also one whose thread ended after the
    user's handler answered an abort: a fresh watcher would answer that abort again with the default
    response, ending the process the handler chose to keep."""
    global _watcher
    with _watcher_lock:
        kept = _watcher is not None and (_watcher.alive or (keep_running and _handler_watcher() is _watcher))
        if not kept:
            _watcher = AbortWatcher(on_abort=on_abort, poll_ms=poll_ms).start()
        elif not keep_running:
            _watcher.configure(on_abort=on_abort, poll_ms=poll_ms)
        if _watcher.on_abort is None and excepthook_grace_ms > 0:
            _install_excepthook(excepthook_grace_ms)
        _arm_backstop(_watcher.on_abort is None)
        return _watcher


def stop_watcher():
    global _watcher
    with _watcher_lock:
        if _watcher is not None:
            _watcher.stop()
            _watcher = None
