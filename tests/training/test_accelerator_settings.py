"""An accelerator's settings, forced on CPU (a CPU-only CI holds them): mixed precision (float16
with its loss-scale optimizer, or bfloat16), XLA (`runtime.jit_compile = on`) and several steps
per execution, under EMA, gradient accumulation, the ramp schedule, two-phase fine-tuning and
progressive resizing. Each trains with a finite loss, and a run killed after its first epoch and
resumed ends bit-identical to the uninterrupted one, loss-scale state included."""

import math

import numpy as np
import pytest

from corolla.runs import paths
from helpers.runs import Stop, same, saved_weights

pytestmark = pytest.mark.slow  # every test trains tiny runs (or reads a module fixture's)


def _loss_scale(optimizer) -> dict:
    """The loss-scale optimizer's own state (empty without one)."""
    if not hasattr(optimizer, "inner_optimizer") or not optimizer.built:
        return {}
    return {"scale": float(np.array(optimizer.dynamic_scale)),
            "counter": int(np.array(optimizer.step_counter))}


def _fit(train_tiny, runs, name, overrides, crash_after=None, resume=False, extra=()):
    """train_tiny.fit (4 steps of 4 images an epoch), recording per epoch the raw weights, the
    loss-scale state (at the epoch's end, and as restored at the start) and the loss."""
    import keras

    seen = {}

    class Record(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.setdefault("restored", _loss_scale(self.model.optimizer))

        def on_epoch_end(self, epoch, logs=None):
            seen[epoch] = [np.array(w) for w in self.model.get_weights()]
            seen[f"scale{epoch}"] = _loss_scale(self.model.optimizer)
            seen[f"loss{epoch}"] = float(logs["loss"])
            if epoch == crash_after:
                raise Stop(epoch)

    overrides = {} if resume else {"train.batch_size": 4, "train.steps_per_epoch": 4,
                                   **overrides}
    _, seen["plan"] = train_tiny.fit(runs, name, overrides, [Record(), *extra], resume)
    return seen


def _whole_and_resumed(train_tiny, tmp, overrides):
    whole = _fit(train_tiny, tmp, "a", overrides)
    first = _fit(train_tiny, tmp, "b", overrides, crash_after=0)
    second = _fit(train_tiny, tmp, "b", {}, resume=True)
    return whole, first, second


# What a GPU with float16 tensor cores gets, and more: 2 steps per execution, EMA, 2 batches
# per update, the ramp schedule (two-phase fine-tuning, whose second phase starts a fresh
# optimizer, loss scale included, is under `large` below); deterministic,
# so that a resumed run can be compared bit for bit (which keeps XLA off on TensorFlow: see
# runtime/test_decide.py's test_deterministic_tensorflow_keeps_xla_off).
GPU_LIKE = {"runtime.precision": "mixed_float16", "runtime.steps_per_execution": 2,
            "train.ema": True, "train.ema_momentum": 0.5, "train.accumulation_steps": 2,
            "train.schedule": "ramp", "train.epochs": 2, "train.deterministic": True}


@pytest.fixture(scope="module", autouse=True)
def _keep_the_dtype_policy():
    """A plan sets Keras' global dtype policy (runtime.detect): the float16 runs here must not
    leave it to the test modules after this one."""
    import keras

    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(scope="module")
def gpu_like_runs(train_tiny, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu_like")
    return (tmp, *_whole_and_resumed(train_tiny, tmp, GPU_LIKE))


def test_float16_with_several_steps_per_execution_and_accumulation_trains(gpu_like_runs):
    _, whole, _, _ = gpu_like_runs
    plan = whole["plan"]
    assert (plan.accelerator, plan.precision, plan.steps_per_execution) == \
        ("cpu", "mixed_float16", 2)
    assert all(math.isfinite(whole[f"loss{e}"]) for e in (0, 1))
    assert not same(whole[0], whole[1])
    # float16 compute under the loss-scale optimizer: the state a resume after epoch 1 must
    # restore (the scale, and the steps since it last changed).
    assert whole["scale0"]["scale"] > 1 and whole["scale0"]["counter"] > 0


def test_a_killed_float16_run_resumes_with_its_loss_scale_and_ends_identical(gpu_like_runs):
    tmp, whole, first, second = gpu_like_runs
    assert second["restored"] == first["scale0"] == whole["scale0"]
    assert second["scale1"] == whole["scale1"]
    assert same(whole[1], second[1])
    for name in (paths.LAST, paths.MODEL):
        assert same(saved_weights(tmp / "a" / name), saved_weights(tmp / "b" / name)), name


def test_xla_is_forced_on_cpu_and_keras_keeps_it(train_tiny, tmp_path):
    """runtime.jit_compile = on: the train step runs as one XLA program on CPU (Keras
    silently drops it where it thinks the model cannot be compiled), with float16 and 2 steps
    per execution."""
    overrides = {"runtime.precision": "mixed_float16", "runtime.jit_compile": "on",
                 "runtime.steps_per_execution": 2, "train.epochs": 1, "train.ema": True}
    import keras

    class Jit(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["jit"] = self.model.jit_compile

    seen = {}
    run = _fit(train_tiny, tmp_path, "x", overrides, extra=[Jit()])
    assert run["plan"].jit_compile and seen["jit"] is True
    assert math.isfinite(run["loss0"])
    # The loss-scale optimizer took each of the epoch's 4 updates: a finite one counts, one
    # that overflows halves the scale (from Keras' 2^15) and starts the count again. Either
    # can happen here: the order of the reads is not fixed (determinism would turn XLA off),
    # and one run in four overflowed on its last update.
    halvings = math.log2(2 ** 15 / run["scale0"]["scale"])
    assert halvings.is_integer() and 0 <= run["scale0"]["counter"] <= 4 - halvings
    assert run["scale0"]["counter"] > 0 or halvings > 0


@pytest.mark.large
@pytest.mark.parametrize("settings", [
    # bfloat16 (TPUs, GPUs of compute capability 8.0+): no loss scaling.
    {"runtime.precision": "mixed_bfloat16", "runtime.steps_per_execution": 4,
     "train.ema": True, "train.accumulation_steps": 2, "train.deterministic": True},
    # Two-phase fine-tuning under float16 and 2 steps per execution.
    {"runtime.precision": "mixed_float16", "runtime.steps_per_execution": 2,
     "train.ema": True, "train.frozen_epochs": 1, "train.deterministic": True},
    # Progressive resizing (16 px, then 32) under float16 and 2 steps per execution, with the
    # ramp schedule.
    {"runtime.precision": "mixed_float16", "runtime.steps_per_execution": 2,
     "train.schedule": "ramp", "train.epochs": 3, "train.start_size": 16,
     "train.size_ramp_start": 0.0, "train.size_ramp_end": 0.5, "train.deterministic": True},
    # XLA, float16, 2 steps per execution, EMA, accumulation: not deterministic (TensorFlow's
    # op determinism and XLA exclude each other), so the resumed run is not compared bit for
    # bit (its reads are not ordered), only its restored loss scale.
    {"runtime.precision": "mixed_float16", "runtime.jit_compile": "on",
     "runtime.steps_per_execution": 2, "train.ema": True, "train.accumulation_steps": 2,
     "train.schedule": "ramp"},
    # The same with two phases.
    {"runtime.precision": "mixed_float16", "runtime.jit_compile": "on",
     "runtime.steps_per_execution": 2, "train.ema": True, "train.frozen_epochs": 1},
], ids=["bfloat16", "two-phase-float16", "progressive-float16", "xla-float16",
        "xla-float16-two-phase"])
def test_accelerator_settings_resume(train_tiny, tmp_path, settings):
    """Finite losses; the killed run resumes with the loss-scale state it had (a second phase
    starts a fresh optimizer); deterministic ones end bit-identical to the uninterrupted run."""
    overrides = {"train.epochs": 2, **settings}
    whole, first, second = _whole_and_resumed(train_tiny, tmp_path, overrides)
    epochs = overrides["train.epochs"]
    assert all(math.isfinite(run[f"loss{e}"]) for run in (whole, second)
               for e in range(1, epochs))
    assert whole["plan"].jit_compile == (settings.get("runtime.jit_compile") == "on")
    if not settings.get("train.frozen_epochs"):
        assert second["restored"] == first["scale0"]
    if settings.get("train.deterministic"):
        assert same(whole[epochs - 1], second[epochs - 1])
        assert same(saved_weights(tmp_path / "a" / paths.LAST),
                    saved_weights(tmp_path / "b" / paths.LAST))
