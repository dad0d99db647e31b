"""memcoord.step(), the safe points of a hand-written training loop, and the framework callbacks built on them
(driven through minimal stand-ins for transformers' TrainerCallback and Trainer and Lightning's Callback and
Trainer, since neither framework is installed here: the callbacks' own logic is what is tested)."""

import importlib
import os
import subprocess
import sys
import types
import unittest
import unittest.mock
from unittest import mock

import support  # noqa: F401  (environment)

import memcoord
from memcoord import _abort


class StepContextTest(unittest.TestCase):
    def setUp(self):
        memcoord.init()

    def test_each_step_ends_once(self):
        start = memcoord.step_count()
        for _ in range(3):
            with memcoord.step():
                pass
        self.assertEqual(memcoord.step_count(), start + 3)

    def test_a_step_whose_body_raised_does_not_end(self):
        start = memcoord.step_count()
        with self.assertRaises(KeyError):
            with memcoord.step():
                raise KeyError("batch")
        self.assertEqual(memcoord.step_count(), start)

    def test_as_a_decorator(self):
        start = memcoord.step_count()

        @memcoord.step()
        def train_step():
            return 1

        train_step()
        train_step()
        self.assertEqual(memcoord.step_count(), start + 2)

    def test_a_nested_step_is_part_of_the_outer_one(self):
        # The outer step owns the step: an inner `with` or decorated function begins and ends nothing, so no
        # coordinator command runs mid-step and the count goes up once.
        start = memcoord.step_count()

        @memcoord.step()
        def train_step():
            return 1

        with memcoord.step():
            with memcoord.step():
                pass
            train_step()
            self.assertEqual(memcoord.step_count(), start)
        self.assertEqual(memcoord.step_count(), start + 1)
        # An inner step whose body raised, caught inside the outer one, does not keep the outer from ending.
        with memcoord.step():
            with self.assertRaises(KeyError):
                with memcoord.step():
                    raise KeyError("batch")
        self.assertEqual(memcoord.step_count(), start + 2)
        train_step()  # alone again: a step of its own
        self.assertEqual(memcoord.step_count(), start + 3)

    def test_bad_on_abort_says_what_is_accepted(self):
        with self.assertRaises(ValueError) as caught:
            memcoord.step(on_abort="ignore")
        self.assertIn("'exit', 'raise'", str(caught.exception))

    def test_a_decorator_without_parentheses_says_how_to_write_it(self):
        with self.assertRaises(TypeError) as caught:
            @memcoord.step
            def train_step():
                pass
        self.assertIn("@memcoord.step() (with parentheses)", str(caught.exception))
        self.assertIn("'train_step'", str(caught.exception))


def _install_fake(name, **attributes):
    """A stand-in module `name` (and its parents) in sys.modules."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    for key, value in attributes.items():
        setattr(sys.modules[name], key, value)


def _isolate_abort_watcher(test):
    """The callbacks start the abort watcher (and its exception hook): each test starts from none, and the
    process's hook and watcher are as they were afterwards."""
    _abort.stop_watcher()
    test.addCleanup(_abort.stop_watcher)
    test.addCleanup(setattr, sys, "excepthook", sys.excepthook)
    test.addCleanup(_abort._excepthook.update, dict(_abort._excepthook))


class FakeHfTrainer:
    """transformers.Trainer's callback order: its defaults, then the report_to reporters, then the user's
    `callbacks`, then the console printer (added last); log() as Trainer.log: the history gets a copy of the
    logs, then every callback's on_log runs in order."""

    def __init__(self, reporters, callbacks):
        self.state = types.SimpleNamespace(global_step=4, log_history=[])
        flow = types.SimpleNamespace(on_log=lambda args, state, control, logs=None, **kw: control)
        self.callback_handler = types.SimpleNamespace(callbacks=[flow] + reporters + callbacks + [flow])

    def log(self, logs):
        self.state.log_history.append({**logs, "step": self.state.global_step})
        for callback in self.callback_handler.callbacks:
            callback.on_log(None, self.state, None, logs=logs)


class Reporter:
    """Stands for a report_to reporter (TensorBoard, W&B): records what its on_log received."""

    def __init__(self):
        self.seen = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append(dict(logs))
        return control


class HuggingFaceCallbackTest(unittest.TestCase):
    def setUp(self):
        if "transformers" not in sys.modules:
            _install_fake("transformers", TrainerCallback=type("TrainerCallback", (), {}))
        memcoord.init()
        _isolate_abort_watcher(self)

    def test_without_transformers_the_error_names_it_and_how_to_install(self):
        # Was a bare "No module named 'transformers'". A fresh process: this one may hold a stand-in.
        script = "import sys; sys.modules['transformers'] = None; import memcoord.integrations.huggingface"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ))
        self.assertNotEqual(done.returncode, 0)
        last = done.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("ImportError: memcoord.integrations.huggingface needs Hugging Face "
                                        "Transformers"), last)
        self.assertIn("`transformers`", last)
        self.assertIn("pip install transformers", last)

    def test_steps_and_logs(self):
        hf = importlib.import_module("memcoord.integrations.huggingface")
        callback = hf.MemcoordCallback()
        start = memcoord.step_count()
        control = object()
        for _ in range(2):
            self.assertIs(callback.on_step_begin(None, None, control), control)
            self.assertIs(callback.on_step_end(None, None, control), control)
        callback.on_step_end(None, None, control)  # an end without a begin is not a step
        self.assertEqual(memcoord.step_count(), start + 2)
        try:
            memcoord.stats()
        except memcoord.MissingSymbolError:
            self.skipTest("libmemcoord_capi.so has no memcoord_device_stats_get")
        logs = {"loss": 1.0}
        # As transformers' Trainer.log does: the history gets a copy of the logs before the callbacks run.
        state = types.SimpleNamespace(global_step=2, log_history=[{"loss": 2.0, "step": 1}, {"loss": 1.0, "step": 2}])
        callback.on_log(None, state, control, logs=logs)
        self.assertEqual(logs["loss"], 1.0)
        for key in ("memcoord/allocated_gb", "memcoord/reserved_gb", "memcoord/peak_reserved_gb"):
            self.assertIsInstance(logs[key], float)
            self.assertEqual(state.log_history[-1][key], logs[key])
            self.assertNotIn(key, state.log_history[0])
        callback.on_log(None, None, control, logs={})  # no state: the logs alone

    def test_add_to_puts_the_callback_before_the_report_to_reporters(self):
        support.require(self, "memcoord_device_stats_get")
        hf = importlib.import_module("memcoord.integrations.huggingface")
        # Passed in `callbacks`, the callback runs after the reporters: they never see memcoord's figures.
        reporter = Reporter()
        FakeHfTrainer([reporter], [hf.MemcoordCallback()]).log({"loss": 1.0})
        self.assertNotIn("memcoord/reserved_gb", reporter.seen[-1])
        # add_to moves the one already there to the front (never a second one: each would begin every step).
        reporter = Reporter()
        given = hf.MemcoordCallback()
        trainer = FakeHfTrainer([reporter], [given])
        count = len(trainer.callback_handler.callbacks)
        self.assertIs(hf.add_to(trainer), given)
        self.assertIs(trainer.callback_handler.callbacks[0], given)
        self.assertEqual(len(trainer.callback_handler.callbacks), count)
        trainer.log({"loss": 1.0})
        self.assertIn("memcoord/reserved_gb", reporter.seen[-1])
        self.assertIn("memcoord/reserved_gb", trainer.state.log_history[-1])
        # None there: a new one, first.
        trainer = FakeHfTrainer([Reporter()], [])
        added = hf.add_to(trainer)
        self.assertIsInstance(added, hf.MemcoordCallback)
        self.assertIs(trainer.callback_handler.callbacks[0], added)
        with self.assertRaises(ValueError) as caught:
            hf.add_to(trainer, hf.MemcoordCallback())
        self.assertIn("already has another MemcoordCallback", str(caught.exception))
        with self.assertRaises(TypeError) as caught:
            hf.add_to(object())
        self.assertIn("expected a transformers.Trainer", str(caught.exception))
        with self.assertRaises(TypeError) as caught:
            hf.add_to(trainer, Reporter())
        self.assertIn("must be a MemcoordCallback or None, got Reporter", str(caught.exception))

    def test_on_log_before_any_step_makes_the_worker(self):
        # trainer.evaluate() before train(): on_log comes before any on_step_begin, in a process where nothing
        # made memcoord's worker yet; stats() alone raised FAILED_PRECONDITION.
        support.require(self, "memcoord_device_stats_get")
        hf = importlib.import_module("memcoord.integrations.huggingface")
        memcoord.shutdown()
        logs = {"eval_loss": 1.0}
        hf.MemcoordCallback().on_log(None, types.SimpleNamespace(global_step=0, log_history=[]), None, logs=logs)
        self.assertIsInstance(logs["memcoord/reserved_gb"], float)

    def test_the_first_step_starts_the_abort_watcher_and_keeps_a_users_handler(self):
        support.require(self, "memcoord_wait_abort")
        hf = importlib.import_module("memcoord.integrations.huggingface")
        callback = hf.MemcoordCallback()
        callback.on_step_begin(None, None, None)
        callback.on_step_end(None, None, None)
        watcher = _abort._watcher
        self.assertTrue(watcher is not None and watcher.alive, "no abort watcher after the first step")
        self.assertIsNone(watcher.on_abort)  # the default response: EXIT_ABORTED naming the dead rank
        _abort.stop_watcher()

        def handler(facts):
            pass

        memcoord.watch_aborts(on_abort=handler)
        callback = hf.MemcoordCallback()
        callback.on_step_begin(None, None, None)
        callback.on_step_end(None, None, None)
        self.assertIs(_abort._watcher.on_abort, handler)

    def test_enable_without_the_watcher_is_respected_by_the_callbacks(self):
        support.require(self, "memcoord_wait_abort")
        _abort.stop_watcher()
        torch_side = importlib.import_module("memcoord._torch")
        hf = importlib.import_module("memcoord.integrations.huggingface")
        with unittest.mock.patch.dict(torch_side._state, {"enabled": True, "watch_aborts": False}):
            callback = hf.MemcoordCallback()
            callback.on_step_begin(None, None, None)
            callback.on_step_end(None, None, None)
            watcher = _abort._watcher
            self.assertFalse(watcher is not None and watcher.alive, "enable(watch_aborts=False) was overridden")

    def test_memcoord_step_gives_an_abort_to_the_users_handler(self):
        support.require(self, "memcoord_wait_abort")
        answered = []
        memcoord.watch_aborts(on_abort=answered.append)

        def aborted():
            raise memcoord.AbortedError("memcoord_step_end", 1, "rank 1 (host h, pid 9) is dead: no heartbeat")

        with unittest.mock.patch.object(memcoord, "step_end", aborted):
            with self.assertRaises(memcoord.AbortedError):
                with memcoord.step():
                    pass
        self.assertEqual(len(answered), 1)  # the handler, not an exit with 75
        _abort.stop_watcher()

    def test_without_the_watcher_an_abort_at_a_steps_end_reaches_the_caller(self):
        # enable(watch_aborts=False): the user handles aborts at step ends. The step end answered the abort anyway
        # (exit_aborted: os._exit(75)), so the AbortedError the user was told to catch never came.
        support.require(self, "memcoord_wait_abort")
        _abort.stop_watcher()
        torch_side = importlib.import_module("memcoord._torch")
        hf = importlib.import_module("memcoord.integrations.huggingface")
        steps = importlib.import_module("memcoord.integrations._steps")

        def aborted():
            raise memcoord.AbortedError("memcoord_step_end", 1, "rank 1 (host h, pid 9) is dead: no heartbeat")

        exits = []
        with mock.patch.dict(torch_side._state, {"enabled": True, "watch_aborts": False}), \
                mock.patch.object(steps, "step_end", aborted), mock.patch.object(memcoord, "step_end", aborted), \
                mock.patch.object(_abort, "exit_aborted", lambda facts, *a: exits.append(facts)):
            callback = hf.MemcoordCallback()
            callback.on_step_begin(None, None, None)
            with self.assertRaises(memcoord.AbortedError) as caught:
                callback.on_step_end(None, None, None)
            self.assertEqual(caught.exception.dead_rank, 1)
            with self.assertRaises(memcoord.AbortedError):
                with memcoord.step():  # on_abort="exit", the default
                    pass
            self.assertEqual(exits, [])
            self.assertIsNone(_abort._watcher)
            # A handler the user set since (watch_aborts(on_abort=...)) is called, then the error goes on.
            answered = []
            memcoord.watch_aborts(on_abort=answered.append)
            with self.assertRaises(memcoord.AbortedError):
                with memcoord.step():
                    pass
            self.assertEqual([f.dead_rank for f in answered], [1])
            self.assertEqual(exits, [])
            _abort.stop_watcher()
        # Without enable(watch_aborts=False), memcoord.step() answers with the default response (stood in for).
        with mock.patch.object(memcoord, "step_end", aborted), \
                mock.patch.object(_abort, "exit_aborted", lambda facts, *a: exits.append(facts)):
            with self.assertRaises(memcoord.AbortedError):
                with memcoord.step():
                    pass
        self.assertEqual([f.dead_rank for f in exits], [1])

    def test_an_abort_at_a_steps_end_goes_to_the_users_handler(self):
        # An AbortedError at a step's end always exited 75, even with the user's own handler set.
        support.require(self, "memcoord_wait_abort")
        hf = importlib.import_module("memcoord.integrations.huggingface")
        steps = importlib.import_module("memcoord.integrations._steps")
        answered = []
        memcoord.watch_aborts(on_abort=answered.append)

        def aborted():
            raise memcoord.AbortedError("memcoord_step_end", 1, "rank 1 (host h, pid 9) is dead: no heartbeat")

        exits = []
        with mock.patch.object(steps, "step_end", aborted), \
                mock.patch.object(_abort, "exit_aborted", lambda facts, *a: exits.append(facts)):
            callback = hf.MemcoordCallback()
            for _ in range(2):  # the handler answers once; every step end after it still stops the loop
                callback.on_step_begin(None, None, None)
                with self.assertRaises(memcoord.AbortedError):
                    callback.on_step_end(None, None, None)
            self.assertEqual([f.dead_rank for f in answered], [1])
            self.assertEqual(exits, [])
            # Without a handler of the user's: the default response (exit_aborted, stood in for here).
            _abort.stop_watcher()
            callback = hf.MemcoordCallback()
            callback.on_step_begin(None, None, None)
            with self.assertRaises(memcoord.AbortedError):
                callback.on_step_end(None, None, None)
            self.assertEqual([(f.dead_rank, f.reason) for f in exits], [(1, "rank 1 (host h, pid 9) is dead: no heartbeat")])


class LightningCallbackTest(unittest.TestCase):
    def setUp(self):
        if "lightning" not in sys.modules:
            _install_fake("lightning.pytorch.callbacks", Callback=type("Callback", (), {"__init__": lambda self: None}))
        memcoord.init()
        _isolate_abort_watcher(self)

    def run_batches(self, callback, trainer, module, stepped):
        """Lightning's fit loop over len(stepped) batches: the optimizer steps inside batch i when stepped[i],
        and global_step has counted it by on_train_batch_end."""
        for batch_idx, steps in enumerate(stepped):
            callback.on_train_batch_start(trainer, module, None, batch_idx)
            trainer.global_step += int(steps)
            callback.on_train_batch_end(trainer, module, None, None, batch_idx)

    def test_without_lightning_the_error_names_both_packages(self):
        # Neither package importable (None in sys.modules refuses the import): one error naming both, not only
        # "No module named 'pytorch_lightning'". A fresh process: this one may hold a stand-in for lightning.
        script = ("import sys; sys.modules['lightning'] = None; sys.modules['pytorch_lightning'] = None; "
                  "import memcoord.integrations.lightning")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ))
        self.assertNotEqual(done.returncode, 0)
        last = done.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("ImportError: memcoord.integrations.lightning needs PyTorch Lightning"), last)
        self.assertIn("neither `lightning`", last)
        self.assertIn("`pytorch_lightning`", last)
        self.assertIn("pip install lightning", last)

    def test_batches_are_steps_and_stats_are_logged(self):
        support.require(self, "memcoord_device_stats_get")
        pl = importlib.import_module("memcoord.integrations.lightning")
        callback = pl.MemcoordCallback()
        logged = []
        module = types.SimpleNamespace(log_dict=lambda values, **kw: logged.append(values))
        trainer = types.SimpleNamespace(global_step=0, log_every_n_steps=2)
        start = memcoord.step_count()
        self.run_batches(callback, trainer, module, [True] * 4)
        self.assertEqual(memcoord.step_count(), start + 4)
        self.assertEqual(len(logged), 2)  # global steps 2 and 4
        self.assertIn("memcoord/allocated_gb", logged[0])

    def test_accumulated_micro_batches_are_one_step_and_log_once(self):
        # accumulate_grad_batches=4: the batch hooks run for every micro-batch, the optimizer steps at every 4th
        # and at the epoch's last batch. Before, every micro-batch was a memcoord step (a trim could land in the
        # middle of an accumulation) and log_dict ran on each micro-batch of a logged step.
        support.require(self, "memcoord_device_stats_get")
        pl = importlib.import_module("memcoord.integrations.lightning")
        callback = pl.MemcoordCallback()
        logged = []
        module = types.SimpleNamespace(log_dict=lambda values, **kw: logged.append(values))
        trainer = types.SimpleNamespace(global_step=0, log_every_n_steps=1, accumulate_grad_batches=4)
        start = memcoord.step_count()
        stepped = [False, False, False, True] * 2 + [False, True]  # 10 batches: a short last accumulation
        self.run_batches(callback, trainer, module, stepped)
        self.assertEqual(memcoord.step_count(), start + 3)
        self.assertEqual(len(logged), 3)
        # A step stays open across micro-batches: no safe point (no trim) between them.
        self.run_batches(callback, trainer, module, [False, False])
        self.assertEqual(memcoord.step_count(), start + 3)
        self.run_batches(callback, trainer, module, [True])
        self.assertEqual(memcoord.step_count(), start + 4)

if __name__ == "__main__":
    unittest.main()
