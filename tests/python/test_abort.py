"""Aborts reach a Python training process: a real coordinator on loopback, two ranks of one job; rank 1 is
SIGKILLed. Rank 0 ends within 2 s with EXIT_ABORTED and a message naming rank 1 while its main thread is
blocked in C (the watcher), or sees AbortedError at its next step's end (memcoord.step)."""

import os
import subprocess
import sys
import textwrap
import time
import unittest
from pathlib import Path

import support  # noqa: F401  (environment)

import memcoord
from memcoord import _abort, _capi

HERE = Path(__file__).resolve().parent
RANK_SCRIPT = HERE / "abort_rank.py"


def _coordinator_binary():
    path = os.environ.get("MEMCOORD_CLI")
    if not path or not os.access(path, os.X_OK):
        raise unittest.SkipTest("MEMCOORD_CLI does not name the memcoord binary (built without gRPC?)")
    return path


class Job:
    """A coordinator on a free loopback port plus rank processes; everything is killed at the end."""

    def __init__(self):
        self.coordinator = subprocess.Popen(
            [_coordinator_binary(), "coordinator", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.coordinator.stdout.readline()
        if "listening on" not in line:
            self.close()
            raise AssertionError(f"the coordinator did not start: {line!r}")
        self.address = line.split("listening on", 1)[1].split()[0]
        self.ranks = []

    def start_rank(self, rank, role):
        env = dict(os.environ, MEMCOORD_COORDINATOR=self.address, MEMCOORD_RANK=str(rank),
                   MEMCOORD_WORLD_SIZE="2", MEMCOORD_BACKEND="host", PYTHONUNBUFFERED="1")
        proc = subprocess.Popen([sys.executable, str(RANK_SCRIPT), role], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        ready = proc.stdout.readline()
        if ready.strip() != "ready":
            proc.kill()
            raise AssertionError(f"rank {rank} ({role}) did not start: {ready!r} {proc.stderr.read()}")
        self.ranks.append(proc)
        return proc

    def close(self):
        for proc in self.ranks + [self.coordinator]:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


class AbortTest(unittest.TestCase):
    def setUp(self):
        support.require(self, "memcoord_wait_abort", "memcoord_abort_info_get")
        self.job = Job()
        self.addCleanup(self.job.close)

    def kill_rank_1_and_wait(self, survivor):
        """SIGKILLs rank 1 once both ranks report, and waits for rank 0: (stdout, stderr, seconds it took)."""
        victim = self.job.start_rank(1, "victim")
        time.sleep(0.5)  # both registered and reporting
        victim.kill()
        killed_at = time.monotonic()
        try:
            out, err = survivor.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            survivor.kill()
            self.fail("rank 0 was still running 10 s after rank 1 died")
        return out, err, time.monotonic() - killed_at

    def test_watcher_ends_a_rank_blocked_in_c_within_2_s(self):
        survivor = self.job.start_rank(0, "blocked")
        out, err, elapsed = self.kill_rank_1_and_wait(survivor)
        print(f"\nrank 0 ended {elapsed:.3f} s after rank 1 was SIGKILLed; its message: {err.strip()}")
        self.assertEqual(survivor.returncode, _capi.EXIT_ABORTED, f"stdout={out!r} stderr={err!r}")
        self.assertIn("aborted by the coordinator: rank 1 ", err)
        self.assertLess(elapsed, 2.0)

    def test_a_rank_whose_main_thread_holds_the_interpreter_lock_still_ends_within_2_s(self):
        # The watcher thread cannot run while the main thread holds the GIL in a C call (an audit measured
        # 7.45 s, the length of that call): memcoord's own thread ends the process (memcoord_set_abort_exit).
        support.require(self, "memcoord_set_abort_exit")
        survivor = self.job.start_rank(0, "gil")
        out, err, elapsed = self.kill_rank_1_and_wait(survivor)
        print(f"\nrank 0 (GIL held) ended {elapsed:.3f} s after rank 1 was SIGKILLed; its message: {err.strip()}")
        self.assertEqual(survivor.returncode, _capi.EXIT_ABORTED, f"stdout={out!r} stderr={err!r}")
        self.assertIn("dead rank 1", err)
        self.assertLess(elapsed, 2.0)

    def test_a_handler_given_to_a_running_watcher_answers_the_abort(self):
        # watch_aborts(on_abort=...) after the watcher started (enable() starts one) used to be ignored: the
        # default response ran and the rank ended with EXIT_ABORTED instead of in the user's handler.
        survivor = self.job.start_rank(0, "replaced")
        out, err, _ = self.kill_rank_1_and_wait(survivor)
        self.assertEqual(survivor.returncode, 0, f"stdout={out!r} stderr={err!r}")
        self.assertIn("custom handler: dead_rank=1", out)
        self.assertNotIn("the job was aborted by the coordinator", err)  # the default response's message

    def test_step_end_raises_aborted_naming_the_dead_rank(self):
        survivor = self.job.start_rank(0, "stepping")
        victim = self.job.start_rank(1, "victim")
        time.sleep(0.5)
        victim.kill()
        out, err = survivor.communicate(timeout=40)
        self.assertEqual(survivor.returncode, 0, f"stdout={out!r} stderr={err!r}")
        self.assertIn("AbortedError dead_rank=1", out)

    def failing_rank_1_aborts(self, role, expected):
        """Rank 1 (`role`) ends on its own, failing; rank 0 (blocked in C) must end with EXIT_ABORTED naming rank 1
        and `expected` well within NCCL's 10 minutes (the bound leaves room for the exception hook's grace)."""
        survivor = self.job.start_rank(0, "blocked")
        started = time.monotonic()
        failing = self.job.start_rank(1, role)
        try:
            out, err = survivor.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            survivor.kill()
            self.fail(f"rank 0 was still running 15 s after rank 1 ({role}) started failing")
        elapsed = time.monotonic() - started
        failing_out, failing_err = failing.communicate(timeout=10)
        print(f"\nrank 0 ended {elapsed:.3f} s after rank 1 ({role}) started; its message: {err.strip()}")
        self.assertEqual(survivor.returncode, _capi.EXIT_ABORTED, f"stdout={out!r} stderr={err!r}")
        self.assertIn("aborted by the coordinator: rank 1 (host ", err)
        self.assertIn(f"is dead: {expected}", err)
        self.assertLess(elapsed, 5.0)
        return failing, failing_out, failing_err

    def test_a_rank_dying_of_an_uncaught_exception_aborts_its_peers(self):
        failing, _, err = self.failing_rank_1_aborts("raiser", "exited on ValueError: boom")
        self.assertEqual(failing.returncode, 1)
        self.assertIn("ValueError: boom", err)  # the traceback is still printed

    def test_a_rank_dying_of_an_uncaught_exception_under_a_user_excepthook_aborts_its_peers(self):
        failing, _, err = self.failing_rank_1_aborts("raiser_hooked", "exited on ValueError: boom")
        self.assertIn("user hook saw ValueError", err)

    def test_a_rank_calling_sys_exit_3_aborts_its_peers(self):
        failing, _, _ = self.failing_rank_1_aborts("exit3", "exited with code 3")
        self.assertEqual(failing.returncode, 3)

    def test_memcoord_fail_aborts_the_peers_naming_the_reason(self):
        failing, out, _ = self.failing_rank_1_aborts("failer", "gave up on purpose")
        self.assertEqual(failing.returncode, 0)
        self.assertIn("fail returned True", out)

    def test_a_rank_that_ends_normally_aborts_nobody(self):
        survivor = self.job.start_rank(0, "stepping_quiet")
        self.job.start_rank(1, "finisher")
        out, err = survivor.communicate(timeout=30)
        self.assertEqual(survivor.returncode, 0, f"stdout={out!r} stderr={err!r}")
        self.assertIn("no abort", out)


class WatcherSettingsTest(unittest.TestCase):
    """The watcher's settings and the exception hook, without a coordinator."""

    def setUp(self):
        support.require(self, "memcoord_wait_abort")
        memcoord.init()
        self.addCleanup(_abort.stop_watcher)

    def test_watch_aborts_replaces_the_running_watchers_handler(self):
        first = memcoord.watch_aborts(poll_ms=100)

        def handler(facts):
            pass

        second = memcoord.watch_aborts(on_abort=handler, poll_ms=50)
        self.assertIs(second, first)
        self.assertTrue(second.alive)
        self.assertIs(second.on_abort, handler)
        self.assertEqual(second.poll_ms, 50)
        # enable()'s start leaves the running watcher, and the user's handler, as they are.
        self.assertIs(_abort.start_watcher(keep_running=True), first)
        self.assertIs(first.on_abort, handler)
        memcoord.watch_aborts()  # the default response again
        self.assertIsNone(first.on_abort)
        with self.assertRaises(TypeError):
            memcoord.watch_aborts(on_abort="exit")
        with self.assertRaises(ValueError):
            memcoord.watch_aborts(poll_ms=0)

    def test_the_exception_hook_is_installed_once(self):
        # Each watcher start (after every shutdown()) wrapped the hook again, and an uncaught exception then
        # waited for an abort once per layer. One layer waits grace_ms (300 ms here, no abort coming).
        saved_hook = sys.excepthook
        self.addCleanup(setattr, sys, "excepthook", saved_hook)
        state = getattr(_abort, "_excepthook", {})
        self.addCleanup(state.update, dict(state))
        state["installed"] = False  # as in a process that has not installed it yet
        seen = []
        sys.excepthook = lambda exc_type, exc, tb: seen.append(exc_type)
        for _ in range(3):
            _abort.start_watcher(poll_ms=20, excepthook_grace_ms=300)
            _abort.stop_watcher()
        # This worker is standalone: as one attached to a coordinator (only those are ever aborted) it waits.
        attached = _abort._attached_to_a_coordinator
        self.addCleanup(setattr, _abort, "_attached_to_a_coordinator", attached)
        self.assertFalse(attached())
        _abort._attached_to_a_coordinator = lambda: True
        started = time.monotonic()
        sys.excepthook(ValueError, ValueError("the training loop's error"), None)
        elapsed = time.monotonic() - started
        self.assertEqual(seen, [ValueError])
        self.assertGreaterEqual(elapsed, 0.25)  # the hook is there, and waited once
        self.assertLess(elapsed, 0.6, "the exception waited for an abort more than once")

    def test_a_standalone_workers_exception_waits_for_no_abort(self):
        # No coordinator, no abort can come: an uncaught exception used to be held back grace_ms anyway.
        saved_hook = sys.excepthook
        self.addCleanup(setattr, sys, "excepthook", saved_hook)
        state = getattr(_abort, "_excepthook", {})
        self.addCleanup(state.update, dict(state))
        state["installed"] = False
        seen = []
        sys.excepthook = lambda exc_type, exc, tb: seen.append(exc_type)
        _abort.start_watcher(poll_ms=20, excepthook_grace_ms=1500)
        _abort.stop_watcher()
        started = time.monotonic()
        sys.excepthook(ValueError, ValueError("a typo in the training script"), None)
        self.assertEqual(seen, [ValueError])
        self.assertLess(time.monotonic() - started, 0.5)

    def test_exit_aborted_answers_once_when_two_callers_race(self):
        # The watcher and the exception hook may call exit_aborted at once; its check of "handled" and the
        # setting of it are one step. A slow is_set() opens the window a check-then-set leaves between them.
        script = textwrap.dedent("""
            import threading, time
            from memcoord import _abort

            class SlowEvent(threading.Event):
                def is_set(self):
                    value = super().is_set()
                    time.sleep(0.2)
                    return value

            _abort._handled = SlowEvent()
            # The first caller takes a while to exit (as a process-group abort does): time for a second to
            # print too, had it passed the check.
            _abort.abort_process_groups = lambda budget_s=1.0: time.sleep(0.5) or "no process group"
            facts = _abort.AbortFacts(1, "rank 1 died", 0)
            threads = [threading.Thread(target=_abort.exit_aborted, args=(facts,)) for _ in range(2)]
            for t in threads:
                t.start()
            time.sleep(5)
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, _capi.EXIT_ABORTED, done.stderr)
        self.assertEqual(done.stderr.count("the job was aborted by the coordinator"), 1, done.stderr)

    def test_exit_aborted_does_not_wait_for_a_main_thread_blocked_on_output(self):
        # The main thread writes to a pipe nobody reads: once it is full, the write blocks holding the stream's
        # buffer lock. exit_aborted wrote through sys.stderr and flushed sys.stdout, so it waited on that lock
        # forever and the process never exited. With stderr the blocked one, even a raw write to fd 2 blocks.
        script = textwrap.dedent("""
            import sys, threading, time
            from memcoord import _abort

            def abort_soon():
                time.sleep(0.5)
                _abort.exit_aborted(_abort.AbortFacts(1, "rank 1 died", 0))

            threading.Thread(target=abort_soon, daemon=True).start()
            stream = getattr(sys, sys.argv[1])
            while True:
                stream.write("x" * 1000 + "\\n")
        """)
        env = dict(os.environ)
        env.pop("PYTHONUNBUFFERED", None)  # unbuffered streams have no buffer lock to hold
        for stream in ("stdout", "stderr"):
            with self.subTest(blocked=stream):
                proc = subprocess.Popen([sys.executable, "-c", script, stream], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
                started = time.monotonic()
                try:
                    code = proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    code = None
                    proc.kill()
                elapsed = time.monotonic() - started
                _, err = proc.communicate()
                self.assertIsNotNone(code, f"the process still ran 15 s after the abort: {stream} blocked it")
                self.assertEqual(code, _capi.EXIT_ABORTED, err[-2000:])
                self.assertLess(elapsed, 5.0)
                if stream == "stdout":
                    self.assertIn(b"the job was aborted by the coordinator: rank 1 died", err)


class LibraryLoggingTest(unittest.TestCase):
    """stdout belongs to the training script: memcoord's log lines (here the worker's "attached to coordinator",
    at level info) go to stderr, and only at MEMCOORD_LOG_LEVEL (default warn). Before, the C ABI wrote spdlog's
    info lines to stdout, and a rank's "attached" line could come before its own "ready"."""

    def run_rank(self, level):
        job = Job()
        self.addCleanup(job.close)
        env = dict(os.environ, MEMCOORD_COORDINATOR=job.address, MEMCOORD_RANK="0", MEMCOORD_WORLD_SIZE="1",
                   MEMCOORD_BACKEND="host")
        env.pop("MEMCOORD_LOG_LEVEL", None)
        if level is not None:
            env["MEMCOORD_LOG_LEVEL"] = level
        return subprocess.run([sys.executable, str(RANK_SCRIPT), "finisher"], env=env, capture_output=True,
                              text=True, timeout=60)

    def test_info_lines_go_to_stderr_when_asked_for(self):
        done = self.run_rank("info")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, "ready\n")
        self.assertIn("attached to coordinator", done.stderr)

    def test_by_default_no_info_line_at_all(self):
        done = self.run_rank(None)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, "ready\n")
        self.assertNotIn("attached to coordinator", done.stderr)


if __name__ == "__main__":
    unittest.main()
