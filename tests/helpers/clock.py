"""A clock advanced by the work a run does, not by the host's time: a time budget's tests hold
what it does exactly, at any load (`corolla.runtime.clock`)."""

from __future__ import annotations

import contextlib

from corolla.runtime.clock import Clock


class StepClock(Clock):
    """Seconds that pass only as work is done: `step` a training step, `predict` a batch
    predicted (validation, the caching of frozen features, the test split), `commit` an
    epoch's commit (the checkpoint's), each times `pace` (raise it mid-run for a host that
    turned busier than the probe found it; lower it for a faster one). `advance` adds any
    other seconds (a start-up, a pause)."""

    def __init__(self, step: float = 0.5, predict: float = 0.2, commit: float = 0.3,
                 start: float = 1000.0):
        self.t, self.step, self.predict, self.commit, self.pace = start, step, predict, commit, 1.0
        self.steps = self.batches = self.commits = 0

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds * self.pace


@contextlib.contextmanager
def driving(clock: StepClock, monkeypatch):
    """Inside the block, every Keras fit and predict of this process advances `clock` by the
    steps and batches it runs (before its callbacks hear of them, so their timers read the
    time after them), every commit of a checkpoint by `clock.commit`; a run handed no clock
    reads this one (`clock.default_clock`)."""
    import keras

    from corolla.training import checkpoint
    from corolla.runtime import clock as clock_lib

    callback_list = keras.callbacks.CallbackList

    def counted(hook: str, attribute: str, per: str):
        original = getattr(callback_list, hook)

        def at_end(self, batch, logs=None):  # `batch`: the execution's last step, from 0
            done = batch + 1 - getattr(self, "_clock_seen", 0)
            self._clock_seen = batch + 1
            setattr(clock, attribute, getattr(clock, attribute) + done)
            clock.advance(done * getattr(clock, per))
            original(self, batch, logs)

        monkeypatch.setattr(callback_list, hook, at_end)

    def reset(hook: str):
        original = getattr(callback_list, hook)

        def begin(self, *args, **kwargs):
            self._clock_seen = 0
            original(self, *args, **kwargs)

        monkeypatch.setattr(callback_list, hook, begin)

    counted("on_train_batch_end", "steps", "step")
    counted("on_predict_batch_end", "batches", "predict")
    reset("on_epoch_begin")
    reset("on_predict_begin")
    commit = checkpoint.Checkpoint.on_epoch_end

    def committed(self, epoch, logs=None):
        clock.commits += 1
        clock.advance(clock.commit)
        commit(self, epoch, logs)

    monkeypatch.setattr(checkpoint.Checkpoint, "on_epoch_end", committed)
    monkeypatch.setattr(clock_lib, "SYSTEM_CLOCK", clock)
    yield clock


def pace_from(clock: StepClock, pace: float, epoch: int = 0):
    """A Keras callback (a run's extra one: the probe does not hear it) that sets `clock`'s
    pace to `pace` from epoch `epoch` (from 0) on: a host slower or faster than its probe
    found."""
    import keras

    class Pace(keras.callbacks.Callback):
        def on_epoch_begin(self, at, logs=None):
            if at >= epoch:
                clock.pace = pace

    return Pace()
