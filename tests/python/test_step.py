"""memcoord.step(), the safe points of a hand-written training loop, and the framework callbacks built on them
(driven through minimal stand-ins for transformers' TrainerCallback and Lightning's Callback, since neither
framework is installed here: the callbacks' own logic is what is tested)."""

import importlib
import os
import subprocess
import sys
import types
import unittest

import support  # noqa: F401  (environment)

import memcoord


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


def _install_fake(name, **attributes):
    """A stand-in module `name` (and its parents) in sys.modules."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    for key, value in attributes.items():
        setattr(sys.modules[name], key, value)


class HuggingFaceCallbackTest(unittest.TestCase):
    def setUp(self):
        if "transformers" not in sys.modules:
            _install_fake("transformers", TrainerCallback=type("TrainerCallback", (), {}))
        memcoord.init()

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


class LightningCallbackTest(unittest.TestCase):
    def setUp(self):
        if "lightning" not in sys.modules:
            _install_fake("lightning.pytorch.callbacks", Callback=type("Callback", (), {"__init__": lambda self: None}))
        memcoord.init()

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
        pl = importlib.import_module("memcoord.integrations.lightning")
        callback = pl.MemcoordCallback()
        logged = []
        module = types.SimpleNamespace(log_dict=lambda values, **kw: logged.append(values))
        trainer = types.SimpleNamespace(global_step=0, log_every_n_steps=2)
        start = memcoord.step_count()
        has_stats = memcoord._capi.library().has("memcoord_device_stats_get")
        for batch in range(4):
            trainer.global_step = batch
            callback.on_train_batch_start(trainer, module, None, batch)
            if has_stats:
                callback.on_train_batch_end(trainer, module, None, None, batch)
            else:
                callback._steps.end()
        self.assertEqual(memcoord.step_count(), start + 4)
        if has_stats:
            self.assertEqual(len(logged), 2)  # global steps 0 and 2
            self.assertIn("memcoord/allocated_gb", logged[0])


if __name__ == "__main__":
    unittest.main()
