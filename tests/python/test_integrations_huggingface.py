"""memcoord.integrations.huggingface driven by a stand-in for transformers' Trainer (transformers is not installed
here). What the stand-in mirrors, from huggingface/transformers as read at src/transformers/trainer.py commit 000945a9
(the processing_class era, 2025) and src/transformers/trainer_callback.py commit 01081ce2 (older; its call_event
and TrainerCallback signatures are unchanged since, but for tokenizer= becoming processing_class=):
  - TrainerCallback: every event is event(args, state, control, **kwargs), on_log(args, state, control, logs=None,
    **kwargs); CallbackHandler.call_event calls the callbacks in list order with model=, optimizer=, ... keywords
    and keeps the control a callback returns unless it returned None;
  - Trainer.__init__: the callbacks are DEFAULT_CALLBACKS (DefaultFlowCallback), the report_to reporters, then
    those given in callbacks=[...], then the progress/printer callback;
  - Trainer._inner_training_loop: for each micro-batch `step` of an epoch, on_step_begin when
    step % gradient_accumulation_steps == 0; the training step; at a sync step ((step + 1) % gradient_accumulation_steps
    == 0, or the epoch's last batch) the optimizer step, state.global_step += 1, on_step_end, then
    _maybe_log_save_evaluate (log() when control.should_log, which DefaultFlowCallback.on_step_end sets every
    logging_steps steps); on_substep_end at the other micro-batches;
  - Trainer.log: state.log_history gets {**logs, "step": global_step} first, then on_log(logs) runs."""

import importlib
import sys
import types
import unittest
import warnings
from unittest import mock

import support

import memcoord
from memcoord import _abort


class TrainerControl:
    def __init__(self):
        self.should_log = False
        self.should_training_stop = False


class TrainerCallback:
    def on_step_begin(self, args, state, control, **kwargs):
        pass

    def on_substep_end(self, args, state, control, **kwargs):
        pass

    def on_step_end(self, args, state, control, **kwargs):
        pass

    def on_log(self, args, state, control, **kwargs):
        pass


class DefaultFlowCallback(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if args.logging_steps > 0 and state.global_step % args.logging_steps == 0:
            control.should_log = True
        return control


class Trainer:
    def __init__(self, callbacks=(), reporters=(), gradient_accumulation_steps=1, logging_steps=500):
        self.args = types.SimpleNamespace(gradient_accumulation_steps=gradient_accumulation_steps,
                                          logging_steps=logging_steps)
        self.callback_handler = types.SimpleNamespace(
            callbacks=[DefaultFlowCallback()] + list(reporters) + list(callbacks) + [TrainerCallback()])
        self.state = types.SimpleNamespace(global_step=0, log_history=[], is_world_process_zero=True)
        self.control = TrainerControl()

    def call_event(self, event, **kwargs):
        for callback in self.callback_handler.callbacks:
            result = getattr(callback, event)(self.args, self.state, self.control, model=None, optimizer=None,
                                              lr_scheduler=None, train_dataloader=None, eval_dataloader=None,
                                              **kwargs)
            if result is not None:
                self.control = result

    def log(self, logs):
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self.call_event("on_log", logs=logs)

    def train(self, steps_in_epoch, epochs=1, fail_at=None):
        """The hooks of _inner_training_loop over `epochs` epochs of `steps_in_epoch` micro-batches; the training
        step of micro-batch `fail_at` (of the first epoch) raises, as a CUDA OOM does."""
        ga = self.args.gradient_accumulation_steps
        for epoch in range(epochs):
            for step in range(steps_in_epoch):
                do_sync_step = (step + 1) % ga == 0 or (step + 1) == steps_in_epoch
                if step % ga == 0:
                    self.control.should_log = False  # CallbackHandler.on_step_begin resets it
                    self.call_event("on_step_begin")
                if epoch == 0 and step == fail_at:
                    raise RuntimeError("CUDA out of memory")
                if do_sync_step:
                    self.state.global_step += 1
                    self.call_event("on_step_end")
                    if self.control.should_log:
                        self.log({"loss": 1.5, "grad_norm": 0.5})
                else:
                    self.call_event("on_substep_end")


class Recorder(TrainerCallback):
    """After memcoord's callback: memcoord's step count at every micro-batch's end, and the logs it was given."""

    def __init__(self):
        self.counts, self.seen = [], []

    def on_substep_end(self, args, state, control, **kwargs):
        self.counts.append(memcoord.step_count())

    def on_step_end(self, args, state, control, **kwargs):
        self.counts.append(memcoord.step_count())

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append(dict(logs))


def _isolate(test):
    """transformers' stand-in in sys.modules and a fresh memcoord.integrations.huggingface, forgotten after `test`;
    the abort watcher and exception hook as they were (the callback starts them)."""
    patcher = mock.patch.dict(sys.modules)
    patcher.start()
    test.addCleanup(patcher.stop)
    sys.modules.pop("memcoord.integrations.huggingface", None)
    sys.modules["transformers"] = types.SimpleNamespace(TrainerCallback=TrainerCallback)
    _abort.stop_watcher()
    test.addCleanup(_abort.stop_watcher)
    test.addCleanup(setattr, sys, "excepthook", sys.excepthook)
    test.addCleanup(_abort._excepthook.update, dict(_abort._excepthook))
    return importlib.import_module("memcoord.integrations.huggingface")


class StepsTest(unittest.TestCase):
    def setUp(self):
        self.hf = _isolate(self)
        memcoord.init()

    def test_gradient_accumulation_micro_steps_are_inside_one_step(self):
        recorder = Recorder()
        trainer = Trainer(callbacks=[self.hf.MemcoordCallback(), recorder], gradient_accumulation_steps=4)
        start = memcoord.step_count()
        trainer.train(10, epochs=2)  # per epoch: sync steps at micro-batches 4, 8 and 10 (the epoch's last)
        per_epoch = [0, 0, 0, 1, 1, 1, 1, 2, 2, 3]
        self.assertEqual([c - start for c in recorder.counts], per_epoch + [3 + c for c in per_epoch])
        self.assertEqual(trainer.state.global_step, 6)

    def test_a_step_that_raised_is_no_safe_point_and_the_retry_goes_on_with_it(self):
        # auto_find_batch_size: accelerate's find_executable_batch_size catches the OOM and runs the inner loop
        # again. The failed step never ended (no safe point: the coordinator's trims wait); the retried loop's
        # first optimizer step ends it, once.
        recorder = Recorder()
        trainer = Trainer(callbacks=[self.hf.MemcoordCallback(), recorder], gradient_accumulation_steps=2)
        start = memcoord.step_count()
        with self.assertRaises(RuntimeError):
            trainer.train(8, fail_at=3)  # the second optimizer step's second micro-batch
        self.assertEqual(memcoord.step_count(), start + 1)
        recorder.counts.clear()
        trainer.train(4)
        self.assertEqual([c - start for c in recorder.counts], [1, 2, 2, 3])

    def test_control_is_returned_and_kept(self):
        callback = self.hf.MemcoordCallback()
        control = TrainerControl()
        for event in ("on_step_begin", "on_step_end"):
            self.assertIs(getattr(callback, event)(None, None, control, model=None), control)


class LogsTest(unittest.TestCase):
    def setUp(self):
        support.require(self, "memcoord_device_stats_get")
        self.hf = _isolate(self)
        memcoord.init()

    def test_the_figures_their_names_and_units(self):
        reporter = Recorder()
        trainer = Trainer(callbacks=[self.hf.MemcoordCallback()], reporters=[reporter], logging_steps=2)
        self.hf.add_to(trainer)
        block = memcoord.alloc(3 << 20)
        self.addCleanup(memcoord.free, block)
        trainer.train(4)
        logged = reporter.seen[-1]
        stats = memcoord.stats()
        names = ("allocated_gb", "reserved_gb", "peak_allocated_gb", "peak_reserved_gb", "trims")
        self.assertEqual(sorted(k for k in logged if k.startswith("memcoord/")), sorted(f"memcoord/{n}" for n in names))
        # Gigabytes of 10^9 bytes, as memcoord's sizes write "GB" (GiB would be 2^30), as floats.
        self.assertEqual(logged["memcoord/allocated_gb"], stats["allocated_bytes"] / 1e9)
        self.assertGreaterEqual(logged["memcoord/allocated_gb"], (3 << 20) / 1e9)
        self.assertEqual(logged["memcoord/reserved_gb"], stats["reserved_bytes"] / 1e9)
        self.assertEqual(logged["memcoord/trims"], float(stats["trims"]))
        self.assertTrue(all(isinstance(logged[f"memcoord/{n}"], float) for n in names))
        # Both log calls (global steps 2 and 4) carry them, in what the reporters saw and in the history.
        self.assertEqual([h["step"] for h in trainer.state.log_history if "memcoord/reserved_gb" in h], [2, 4])
        self.assertEqual(len([s for s in reporter.seen if "memcoord/reserved_gb" in s]), 2)

    def test_evaluation_logs_at_the_same_step_get_them_too(self):
        trainer = Trainer(callbacks=[self.hf.MemcoordCallback()])
        trainer.train(2)
        trainer.log({"eval_loss": 2.0})
        trainer.log({"train_runtime": 1.0})  # Trainer.train's last log, at the same global step
        self.assertEqual([("memcoord/reserved_gb" in h) for h in trainer.state.log_history], [True, True])


class NotEnabledTest(unittest.TestCase):
    """PyTorch imported (transformers and Lightning always import it) without memcoord.enable(): the callbacks ran
    memcoord's worker on their own and logged its empty pools' figures (near 0) beside a full GPU, silently."""

    def setUp(self):
        self.hf = _isolate(self)
        memcoord.init()
        steps = importlib.import_module("memcoord.integrations._steps")
        self.addCleanup(steps._warned.update, dict(steps._warned))
        steps._warned["not_torchs_allocator"] = False
        self.torch_side = importlib.import_module("memcoord._torch")

    def steps_taken(self):
        callback = self.hf.MemcoordCallback()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                callback.on_step_begin(None, None, None)
                callback.on_step_end(None, None, None)
        return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    def test_warns_once_when_pytorch_uses_its_own_allocator(self):
        with mock.patch.dict(sys.modules, {"torch": types.ModuleType("torch")}):
            messages = self.steps_taken()
            self.assertEqual(len(messages), 1, messages)
            self.assertIn("memcoord.enable()", messages[0])
            self.assertEqual(self.steps_taken(), [])  # once a process

    def test_silent_when_enabled_or_without_pytorch(self):
        self.assertEqual(self.steps_taken(), [])  # no torch: memcoord's own pools are the point
        with mock.patch.dict(sys.modules, {"torch": types.ModuleType("torch")}), \
                mock.patch.dict(self.torch_side._state, {"enabled": True}):
            self.assertEqual(self.steps_taken(), [])


if __name__ == "__main__":
    unittest.main()
