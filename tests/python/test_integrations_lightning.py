"""memcoord.integrations.lightning and memcoord.integrations.pytorch_lightning against stand-ins for Lightning (neither
`lightning` nor `pytorch_lightning` is installed here). The stand-ins are written as packages on disk, so that a fresh Python can have one of them, both or
neither, and import them in either order.

What they mirror, from Lightning 2.x (Lightning-AI/pytorch-lightning, src/lightning/pytorch/, read at commits 20a82d08
(callbacks/callback.py), 19df72b0 (utilities/model_helpers.py), 017bff99 (loops/training_epoch_loop.py) and 0407e849
(loops/optimization/automatic.py)):
  - callbacks/callback.py: Callback, its hook signatures (on_train_batch_start(trainer, pl_module, batch,
    batch_idx), on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx), on_train_start,
    on_exception(trainer, pl_module, exception), state_dict, ...), a plain class;
  - utilities/model_helpers.py is_overridden: the parent class comes from isinstance(instance, pl.Callback), and
    an instance of no known parent raises ValueError("Expected a parent"); trainer/connectors/
    callback_connector.py _validate_callbacks_list runs it over every callback when the Trainer is made;
  - trainer/call.py _call_callback_hooks: getattr(callback, hook) for every callback;
  - loops/training_epoch_loop.py advance/on_advance_end and loops/optimization/automatic.py _optimizer_step:
    on_train_batch_start, the training step, the optimizer step (global_step counts it, only when not
    accumulating), on_train_batch_end, then the logger connector flushes step metrics when
    (_batches_that_stepped + 1) % log_every_n_steps == 0, and _batches_that_stepped moves after an optimizer step;
  - trainer/call.py _call_and_handle_interrupt: an exception calls on_exception on every callback, then goes on.
pytorch_lightning (the name before 2.0, still published for 2.x) is the same code under that name."""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

import support

import memcoord

CALLBACK = '''
"""Stand-in for {pkg}.callbacks.callback (Lightning 2.x signatures)."""


class Callback:
    @property
    def state_key(self):
        return self.__class__.__qualname__

    def setup(self, trainer, pl_module, stage):
        pass

    def teardown(self, trainer, pl_module, stage):
        pass

    def on_fit_start(self, trainer, pl_module):
        pass

    def on_train_start(self, trainer, pl_module):
        pass

    def on_train_end(self, trainer, pl_module):
        pass

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        pass

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pass

    def on_exception(self, trainer, pl_module, exception):
        pass

    def state_dict(self):
        return {{}}

    def load_state_dict(self, state_dict):
        pass
'''

TRAINER = '''
"""Stand-in for {pkg}'s Trainer: what of it the callback meets (see the test module's docstring)."""

import {pkg} as pl


def is_overridden(method_name, instance=None, parent=None):
    if instance is None:
        return False
    if parent is None:
        if isinstance(instance, pl.Callback):
            parent = pl.Callback
        if parent is None:
            raise ValueError("Expected a parent")
    return getattr(type(instance), method_name).__code__ is not getattr(parent, method_name).__code__


class LightningModule:
    def __init__(self):
        self.logged = []  # (global_step, values) of every log_dict call

    def log_dict(self, dictionary, on_step=None, on_epoch=None, sync_dist=False, **kwargs):
        self.logged.append((self.trainer.global_step, dict(dictionary)))


class Trainer:
    def __init__(self, callbacks=(), accumulate_grad_batches=1, log_every_n_steps=50):
        self.callbacks = list(callbacks)
        [cb for cb in self.callbacks if is_overridden("state_dict", instance=cb)]  # _validate_callbacks_list
        self.accumulate_grad_batches = accumulate_grad_batches
        self.log_every_n_steps = log_every_n_steps
        self.global_step = 0
        self._batches_that_stepped = 0
        self.flushed = []  # _batches_that_stepped of every flush of step metrics to the logger

    def _call_callback_hooks(self, hook_name, *args):
        for callback in self.callbacks:
            fn = getattr(callback, hook_name)
            if callable(fn):
                fn(self, self.lightning_module, *args)

    def fit(self, module, num_batches, fail_at=None):
        """One epoch of `num_batches`; the training step of batch `fail_at` raises (a CUDA OOM, say)."""
        self.lightning_module = module
        module.trainer = self
        try:
            self._call_callback_hooks("on_train_start")
            for batch_idx in range(num_batches):
                self._call_callback_hooks("on_train_batch_start", [batch_idx], batch_idx)
                if batch_idx == fail_at:
                    raise RuntimeError("CUDA out of memory")
                last = batch_idx + 1 == num_batches
                accumulate = (batch_idx + 1) % self.accumulate_grad_batches != 0 and not last
                if not accumulate:
                    self.global_step += 1
                self._call_callback_hooks("on_train_batch_end", {{"loss": 0.0}}, [batch_idx], batch_idx)
                if not accumulate:
                    if self.log_every_n_steps and (self._batches_that_stepped + 1) % self.log_every_n_steps == 0:
                        self.flushed.append(self._batches_that_stepped)
                    self._batches_that_stepped += 1
            self._call_callback_hooks("on_train_end")
        except BaseException as exception:
            self._call_callback_hooks("on_exception", exception)
            raise
'''


def _write_package(root, pkg):
    """The stand-in for `pkg` ("lightning.pytorch" or "pytorch_lightning") under `root`."""
    folder = os.path.join(root, *pkg.split("."))
    os.makedirs(os.path.join(folder, "callbacks"))
    files = {
        "callbacks/callback.py": CALLBACK.format(pkg=pkg),
        "callbacks/__init__.py": f"from {pkg}.callbacks.callback import Callback\n",
        "trainer.py": TRAINER.format(pkg=pkg),
        "__init__.py": f"from {pkg}.callbacks import Callback\nfrom {pkg}.trainer import LightningModule, Trainer\n",
    }
    if pkg == "lightning.pytorch":  # `import lightning` imports lightning.pytorch, as the real package does
        with open(os.path.join(root, "lightning", "__init__.py"), "w") as f:
            f.write("from lightning.pytorch import Callback, LightningModule, Trainer\n")
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


class _StandIns:
    """Three folders of stand-ins: both packages, lightning alone, pytorch_lightning alone."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.roots = {}
        for name, packages in (("both", ("lightning.pytorch", "pytorch_lightning")),
                               ("lightning", ("lightning.pytorch",)), ("pytorch_lightning", ("pytorch_lightning",))):
            root = os.path.join(self._tmp.name, name)
            os.makedirs(root)
            for pkg in packages:
                _write_package(root, pkg)
            self.roots[name] = root

    def run(self, installed, script):
        """Runs `script` in a fresh Python that finds the stand-ins `installed` ("both", "lightning",
        "pytorch_lightning"); returns what it printed last, as JSON."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([self.roots[installed], env.get("PYTHONPATH", "")])
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                              timeout=60, env=env)
        if done.returncode != 0:
            raise AssertionError(f"the script failed:\n{done.stderr}")
        return json.loads(done.stdout.strip().splitlines()[-1])


_stand_ins = None


def setUpModule():
    global _stand_ins
    _stand_ins = _StandIns()


def tearDownModule():
    _stand_ins._tmp.cleanup()


class WhichLightningTest(unittest.TestCase):
    """A Trainer accepts only a callback of its own package: with both installed, a pytorch_lightning Trainer refused a
    MemcoordCallback built on lightning.pytorch's Callback (ValueError "Expected a parent", the mixed-imports failure
    Lightning-AI/pytorch-lightning#17485 describes). memcoord.integrations.lightning is on lightning's Callback
    (pytorch_lightning's where lightning is missing), memcoord.integrations.pytorch_lightning on pytorch_lightning's."""

    BASE = '[c.__module__ for c in type(callback).__mro__ if c.__name__ == "Callback"]'

    def test_both_installed_each_trainer_takes_its_modules_callback(self):
        script = f'''
            import json
            import lightning, pytorch_lightning
            from memcoord.integrations import lightning as for_lightning, pytorch_lightning as for_pl
            bases = []
            for L, module in ((lightning, for_lightning), (pytorch_lightning, for_pl)):
                callback = module.MemcoordCallback()
                L.Trainer(callbacks=[callback])
                bases.append({self.BASE})
            try:  # what the second module is for
                pytorch_lightning.Trainer(callbacks=[for_lightning.MemcoordCallback()])
            except ValueError as error:
                refused = str(error)
            print(json.dumps([bases, refused]))
        '''
        bases, refused = _stand_ins.run("both", script)
        self.assertEqual(bases, [["lightning.pytorch.callbacks.callback"], ["pytorch_lightning.callbacks.callback"]])
        self.assertEqual(refused, "Expected a parent")

    def test_only_pytorch_lightning_installed(self):
        # memcoord.integrations.lightning falls back to pytorch_lightning, as memcoord.integrations.pytorch_lightning
        # is on it.
        script = f'''
            import json
            import pytorch_lightning as L
            from memcoord.integrations import lightning, pytorch_lightning
            bases = []
            for module in (lightning, pytorch_lightning):
                callback = module.MemcoordCallback()
                L.Trainer(callbacks=[callback])
                bases.append({self.BASE})
            print(json.dumps(bases))
        '''
        self.assertEqual(_stand_ins.run("pytorch_lightning", script), [["pytorch_lightning.callbacks.callback"]] * 2)

    def test_only_lightning_installed(self):
        script = f'''
            import json
            import lightning as L
            from memcoord.integrations.lightning import MemcoordCallback
            callback = MemcoordCallback()
            L.Trainer(callbacks=[callback])
            try:
                import memcoord.integrations.pytorch_lightning
            except ImportError as error:
                missing = str(error)
            print(json.dumps([{self.BASE}, missing]))
        '''
        base, missing = _stand_ins.run("lightning", script)
        self.assertEqual(base, ["lightning.pytorch.callbacks.callback"])
        self.assertIn("needs `pytorch_lightning`", missing)
        self.assertIn("pip install pytorch-lightning", missing)
        self.assertIn("memcoord.integrations.lightning", missing)

    def test_neither_installed_both_modules_name_what_to_install(self):
        # None in sys.modules refuses the import (and hides the stand-ins on the path).
        script = '''
            import json, sys
            sys.modules["lightning"] = sys.modules["pytorch_lightning"] = None
            messages = []
            for name in ("lightning", "pytorch_lightning"):
                try:
                    __import__("memcoord.integrations." + name)
                except ImportError as error:
                    messages.append(str(error))
            print(json.dumps(messages))
        '''
        for_lightning, for_pl = _stand_ins.run("both", script)
        self.assertTrue(for_lightning.startswith("memcoord.integrations.lightning needs PyTorch Lightning"),
                        for_lightning)
        self.assertIn("neither `lightning`", for_lightning)
        self.assertIn("`pytorch_lightning`", for_lightning)
        self.assertIn("pip install lightning", for_lightning)
        self.assertTrue(for_pl.startswith("memcoord.integrations.pytorch_lightning needs `pytorch_lightning`"), for_pl)
        self.assertIn("pip install pytorch-lightning", for_pl)

    def test_unpickled_in_a_fresh_process(self):
        # ddp_spawn's workers unpickle the Trainer and its callbacks in processes that imported nothing yet.
        script = '''
            import copy, json, pickle
            from memcoord.integrations.{module} import MemcoordCallback
            callback = MemcoordCallback(log_prefix="p/")
            print(json.dumps([pickle.dumps(callback).hex(), type(copy.deepcopy(callback)) is type(callback)]))
        '''
        for installed, module, package in (("both", "lightning", "lightning"),
                                           ("both", "pytorch_lightning", "pytorch_lightning"),
                                           ("pytorch_lightning", "lightning", "pytorch_lightning")):
            data, copied = _stand_ins.run(installed, script.format(module=module))
            self.assertTrue(copied)
            again = _stand_ins.run(installed, f'''
                import json, pickle
                callback = pickle.loads(bytes.fromhex("{data}"))
                import {package} as L
                L.Trainer(callbacks=[callback])
                print(json.dumps([isinstance(callback, L.Callback), callback._prefix, callback._step_at_begin]))
            ''')
            self.assertEqual(again, [True, "p/", None], (installed, module))

    def test_a_subclass_of_the_callback(self):
        script = '''
            import json, pickle
            import {package} as L
            from memcoord.integrations.{module} import MemcoordCallback

            class Mine(MemcoordCallback):
                def __init__(self):
                    super().__init__(log_prefix="mine/")

            callback = Mine()
            L.Trainer(callbacks=[callback])
            again = pickle.loads(pickle.dumps(callback))
            print(json.dumps([isinstance(callback, L.Callback), isinstance(again, Mine), again._prefix,
                              callback.state_key]))
        '''
        for module, package in (("lightning", "lightning"), ("pytorch_lightning", "pytorch_lightning")):
            result = _stand_ins.run("both", script.format(module=module, package=package))
            self.assertEqual(result, [True, True, "mine/", "Mine"], module)

    def test_importing_memcoord_imports_no_framework(self):
        script = '''
            import json, sys
            import memcoord, memcoord.integrations, memcoord.integrations._lightning_hooks
            print(json.dumps(sorted(m for m in ("lightning", "pytorch_lightning", "transformers", "torch")
                                    if m in sys.modules)))
        '''
        self.assertEqual(_stand_ins.run("both", script), [])


def _import_stand_in(test, package):
    """This process imports the stand-in `package` ("lightning" or "pytorch_lightning", installed alone) and a fresh
    memcoord.integrations.`package`, all forgotten after `test` (another test module may hold stand-ins of its own
    under the same names)."""
    patcher = mock.patch.dict(sys.modules)
    patcher.start()
    test.addCleanup(patcher.stop)
    for name in list(sys.modules):
        if name.split(".")[0] in ("lightning", "pytorch_lightning") or name in (
                "memcoord.integrations.lightning", "memcoord.integrations.pytorch_lightning"):
            del sys.modules[name]
    path = mock.patch.object(sys, "path", [_stand_ins.roots[package]] + sys.path)
    path.start()
    test.addCleanup(path.stop)
    import importlib

    return importlib.import_module(package), importlib.import_module(f"memcoord.integrations.{package}")


def _isolate_abort_watcher(test):
    """The callbacks start the abort watcher (and its exception hook): each test starts from none, and the
    process's hook and watcher are as they were afterwards (as test_step.py does)."""
    from memcoord import _abort

    _abort.stop_watcher()
    test.addCleanup(_abort.stop_watcher)
    test.addCleanup(setattr, sys, "excepthook", sys.excepthook)
    test.addCleanup(_abort._excepthook.update, dict(_abort._excepthook))


class StepsTest(unittest.TestCase):
    """memcoord.integrations.lightning's callback in a lightning Trainer."""

    PACKAGE = "lightning"

    def setUp(self):
        support.require(self, "memcoord_device_stats_get")
        self.L, self.pl = _import_stand_in(self, self.PACKAGE)
        memcoord.init()
        _isolate_abort_watcher(self)

    def counting(self, callback, **options):
        """A Trainer with `callback` and, after it, a recorder of memcoord's step count at every batch end."""
        counts = []

        class Recorder(self.L.Callback):
            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                counts.append(memcoord.step_count())

        return self.L.Trainer(callbacks=[callback, Recorder()], **options), counts

    def test_every_optimizer_step_is_one_step_and_micro_batches_are_inside_it(self):
        trainer, counts = self.counting(self.pl.MemcoordCallback(), accumulate_grad_batches=4)
        start = memcoord.step_count()
        trainer.fit(self.L.LightningModule(), 10)  # optimizer steps at batches 4, 8 and 10 (the epoch's last)
        self.assertEqual([c - start for c in counts], [0, 0, 0, 1, 1, 1, 1, 2, 2, 3])

    def test_a_batch_that_raised_leaves_no_stale_step_behind(self):
        # The step a failing batch began stays open (it never completed: no safe point). What the callback kept of
        # it (global_step at its start) went stale with it: a new Trainer counts from 0, and its first micro-batch
        # ended a step (and logged) in the middle of an accumulation.
        callback = self.pl.MemcoordCallback()
        module = self.L.LightningModule()
        with self.assertRaises(RuntimeError):
            self.L.Trainer(callbacks=[callback]).fit(module, 10, fail_at=3)  # global_step 3 when batch 3 began
        trainer, counts = self.counting(callback, accumulate_grad_batches=4, log_every_n_steps=1)
        start = memcoord.step_count()
        trainer.fit(module, 8)
        self.assertEqual([c - start for c in counts], [0, 0, 0, 1, 1, 1, 1, 2])
        self.assertEqual([step for step, _ in module.logged], [1, 2])

    def test_the_batch_size_finder_resetting_the_count(self):
        # Lightning's BatchSizeFinder runs trial fits, catches the OOM of a trial and resets the progress
        # (global_step back to 0) before training goes on; a stale anchor then ended the first step at once.
        callback = self.pl.MemcoordCallback()
        module = self.L.LightningModule()
        trainer, counts = self.counting(callback, accumulate_grad_batches=2)
        with self.assertRaises(RuntimeError):
            trainer.fit(module, 8, fail_at=5)  # the OOM in the third optimizer step, global_step 2
        trainer.global_step = trainer._batches_that_stepped = 0
        del counts[:]
        start = memcoord.step_count()
        trainer.fit(module, 4)
        self.assertEqual([c - start for c in counts], [0, 1, 1, 2])

    def test_logged_when_the_logger_flushes(self):
        # log_dict on the steps whose metrics Lightning writes to the logger, once each, and only those.
        callback = self.pl.MemcoordCallback()
        module = self.L.LightningModule()
        trainer = self.L.Trainer(callbacks=[callback], accumulate_grad_batches=2, log_every_n_steps=3)
        trainer.fit(module, 20)  # 10 optimizer steps
        self.assertEqual([step for step, _ in module.logged], [3, 6, 9])
        self.assertEqual(trainer.flushed, [2, 5, 8])  # the logger's step (_batches_that_stepped) for those
        values = module.logged[0][1]
        self.assertEqual(sorted(values), sorted(f"memcoord/{k}" for k in (
            "allocated_gb", "reserved_gb", "peak_allocated_gb", "peak_reserved_gb", "trims")))
        self.assertTrue(all(isinstance(v, float) for v in values.values()), values)

    def test_nothing_logged_when_lightning_logs_nothing(self):
        # log_every_n_steps=0: Lightning's logger connector writes no step metrics (should_update_logs is False);
        # memcoord took it for 50 and computed its figures every 50 steps for nothing.
        module = self.L.LightningModule()
        trainer = self.L.Trainer(callbacks=[self.pl.MemcoordCallback()], log_every_n_steps=0)
        trainer.fit(module, 100)
        self.assertEqual(module.logged, [])
        self.assertEqual(trainer.flushed, [])

    def test_the_callback_pickles(self):
        callback = self.pl.MemcoordCallback(log_prefix="x/")
        self.L.Trainer(callbacks=[callback]).fit(self.L.LightningModule(), 2)
        again = pickle.loads(pickle.dumps(callback))
        self.assertIsInstance(again, self.L.Callback)
        self.assertEqual(again._prefix, "x/")

    def test_a_subclass_of_the_callback(self):
        class Mine(self.pl.MemcoordCallback):
            pass

        module = self.L.LightningModule()
        trainer, counts = self.counting(Mine(log_prefix="mine/"), accumulate_grad_batches=2, log_every_n_steps=1)
        start = memcoord.step_count()
        trainer.fit(module, 4)
        self.assertEqual([c - start for c in counts], [0, 1, 1, 2])
        self.assertEqual([sorted(values)[0] for _, values in module.logged], ["mine/allocated_gb"] * 2)


class PytorchLightningStepsTest(StepsTest):
    """The same, memcoord.integrations.pytorch_lightning's callback in a pytorch_lightning Trainer."""

    PACKAGE = "pytorch_lightning"


if __name__ == "__main__":
    unittest.main()
