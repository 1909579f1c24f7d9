"""Training options and callbacks on tiny data, for real: val macro F1 after every epoch, the
best epoch kept as model.keras (the last as last.keras), early stopping, all surviving a
resume; EMA, gradient accumulation and two-phase fine-tuning, resumed exactly across the phase
boundary; the shorter epochs of a time plan made again, and their refit."""

import json

import numpy as np
import pytest

from corolla import config
from corolla.files import read_history
from corolla.runs import paths, rundir
from helpers.runs import Stop, history, same, saved_weights

pytestmark = pytest.mark.slow  # every test trains tiny runs (or reads a module fixture's)


def _callbacks(weights, crash_after=None):
    import keras

    class Record(keras.callbacks.Callback):  # after Corolla's own: the raw weights of the epoch
        def on_train_begin(self, logs=None):
            weights.setdefault("start", _backbone(self.model))

        def on_epoch_end(self, epoch, logs=None):
            weights[epoch] = [np.array(w) for w in self.model.get_weights()]
            weights[f"backbone{epoch}"] = _backbone(self.model)
            if epoch == crash_after:
                raise Stop(epoch)

    return [Record()]


def _backbone(model):
    import keras

    (backbone,) = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    return [np.array(w) for w in backbone.get_weights()]


def _fit(train_tiny, runs, name, overrides, crash_after=None, resume=False):
    """train_tiny.fit, recording every epoch's raw weights (and the backbone's)."""
    weights = {}
    result, _ = train_tiny.fit(runs, name, overrides, _callbacks(weights, crash_after), resume)
    return result, weights


@pytest.fixture(scope="module")
def f1_run(train_tiny, tmp_path_factory):
    """4 epochs asked, val macro F1 forced to 0.5, 0.9, 0.3, 0.95 (the patched metric), early
    stopping patience 1; killed after epoch 1 (the best), then resumed."""
    import corolla.training.callbacks as callbacks

    tmp = tmp_path_factory.mktemp("f1")
    figures = iter([0.5, 0.9, 0.3, 0.95])
    real = callbacks.macro_f1
    seen = []

    def forced(y_true, y_pred, **kwargs):
        seen.append(real(y_true, y_pred, **kwargs))  # the real figure is computed too
        return next(figures)

    callbacks.macro_f1 = forced
    try:
        overrides = {"train.epochs": 4, "train.early_stopping_patience": 1}
        _, first = _fit(train_tiny, tmp, "r", overrides, crash_after=1)
        backup = {p.name: p.read_bytes() for p in (tmp / "r" / paths.BACKUP).iterdir()}
        _, second = _fit(train_tiny, tmp, "r", {}, resume=True)
    finally:
        callbacks.macro_f1 = real
    return tmp / "r", {**first, **second}, seen, backup


def test_val_macro_f1_is_recorded_every_epoch_from_the_whole_val_split(f1_run):
    run, _, seen, _ = f1_run
    rows = history(run)
    assert [float(r["val_f1_macro"]) for r in rows] == [0.5, 0.9, 0.3]
    assert {"loss", "accuracy", "val_loss", "val_accuracy", "learning_rate"} <= set(rows[0])
    assert len(seen) == 3 and all(0 <= f <= 1 for f in seen)


def test_the_best_epoch_is_model_keras_and_the_last_is_last_keras_across_a_resume(f1_run):
    """Early stopping: epoch 3 (index 2) is worse than epoch 2 (the best, before the kill), so
    patience 1 stops the run there; the best survived the resume."""
    run, weights, _, _ = f1_run
    assert [r["epoch"] for r in history(run)] == ["1", "2", "3"]  # stopped, not 4 epochs
    assert rundir.status(run) == rundir.TRAINED and not (run / paths.BACKUP).exists()
    best, last = saved_weights(run / paths.MODEL), saved_weights(run / paths.LAST)
    assert same(best, weights[1]) and same(last, weights[2]) and not same(best, last)


def test_the_best_epoch_is_backed_up_as_the_models_weights_alone(f1_run):
    """No .keras per new best epoch (an archive with the optimizer's state: 3x the bytes with
    Adam): the model's weights of the best epoch, from which model.keras is written once."""
    import io

    _, weights, _, backup = f1_run
    assert sorted(backup) == ["best-epoch-0001.npz", "epoch-0001.npz", paths.STATE]
    with np.load(io.BytesIO(backup["best-epoch-0001.npz"])) as best:
        assert same([best[f"arr_{i}"] for i in range(len(best.files))], weights[1])


@pytest.fixture(scope="module")
def option_runs(train_tiny, tmp_path_factory):
    """EMA + 2 batches per update + two-phase (1 frozen epoch, then x 0.5), label smoothing,
    deterministic:
    one uninterrupted run, and one killed after the frozen epoch and resumed."""
    tmp = tmp_path_factory.mktemp("options")
    overrides = {"train.epochs": 2, "train.ema": True,
                 "train.ema_momentum": 0.5, "train.accumulation_steps": 2,
                 "train.frozen_epochs": 1, "train.finetune_lr_scale": 0.5,
                 "train.label_smoothing": 0.1, "train.deterministic": True,
                 "train.steps_per_epoch": 4}  # 2 updates per epoch: the EMA moves off the raw
    result, whole = _fit(train_tiny, tmp, "a", overrides)
    _, first = _fit(train_tiny, tmp, "b", overrides, crash_after=0)
    _, second = _fit(train_tiny, tmp, "b", {}, resume=True)
    return tmp, result, whole, {**first, **second}


def test_two_phase_freezes_the_backbone_then_trains_it_at_the_scaled_rate(option_runs):
    from corolla.training.schedule import learning_rate_schedule

    tmp, _, weights, _ = option_runs
    assert same(weights["start"], weights["backbone0"])  # frozen (BatchNorm statistics too)
    changed = [not np.array_equal(x, y) for x, y in zip(weights["backbone0"],
                                                        weights["backbone1"])]
    assert sum(changed) >= len(changed) // 2  # trained in the second phase
    rows = history(tmp / "a")
    # 4 steps per epoch, 2 batches per update: 2 updates per epoch; 1 warm-up epoch, then
    # cosine; each epoch's rate is its last update's.
    schedule = learning_rate_schedule(3e-3, 4, 2, 3e-4, 3e-5)
    expected = [float(schedule(1)), 0.5 * float(schedule(3))]
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx(expected, rel=1e-5)


def test_ema_weights_are_saved_and_resume_across_the_phase_boundary_is_exact(option_runs):
    """The saved last epoch holds the EMA of the weights (the raw ones differ); the run killed
    after the frozen epoch and resumed ends bit-identical to the uninterrupted one."""
    tmp, _, whole, resumed = option_runs
    a, b = saved_weights(tmp / "a" / paths.LAST), saved_weights(tmp / "b" / paths.LAST)
    assert same(a, b)
    assert same(saved_weights(tmp / "a" / paths.MODEL),
                saved_weights(tmp / "b" / paths.MODEL))
    assert not same(a, whole[1])  # raw weights at the end of the last epoch: not what is saved
    assert same(whole[1], resumed[1])
    assert [r["epoch"] for r in history(tmp / "b")] == ["1", "2"]


@pytest.fixture(scope="module")
def progressive_runs(train_tiny, tmp_path_factory):
    """Progressive resizing on 32 px data: epochs 1-2 at 16 px, epoch 3 at 32; one run
    uninterrupted, one killed after its first epoch and resumed. Records the size of every
    training dataset built (the first epoch it starts at, its images' size)."""
    from corolla.data import pipeline

    tmp = tmp_path_factory.mktemp("progressive")
    real, built = pipeline.train_dataset, []

    def recording(split, image_size, *args, **kwargs):
        ds = real(split, image_size, *args, **kwargs)
        built.append((kwargs["first_epoch"], image_size, ds.element_spec[0].shape[1]))
        return ds

    pipeline.train_dataset = recording
    try:
        overrides = {"train.epochs": 3, "train.start_size": 16, "train.size_ramp_start": 0.0,
                     "train.size_ramp_end": 0.5, "train.deterministic": True}
        _fit(train_tiny, tmp, "a", overrides)
        whole, built[:] = list(built), []
        _fit(train_tiny, tmp, "b", overrides, crash_after=0)
        _fit(train_tiny, tmp, "b", {}, resume=True)
    finally:
        pipeline.train_dataset = real
    return tmp, whole, built


def test_progressive_resizing_trains_small_first_and_saves_at_the_input_size(progressive_runs):
    import keras

    tmp, whole, _ = progressive_runs
    assert whole == [(0, 16, 16), (2, 32, 32)]  # one dataset per size, from its first epoch
    for name in (paths.MODEL, paths.LAST):
        model = keras.saving.load_model(tmp / "a" / name, compile=False)
        assert model.input_shape == (None, 32, 32, 3)
    assert config.load_config(tmp / "a" / paths.CONFIG).train.start_size == 16


def test_a_progressive_run_resumes_at_the_size_of_its_next_epoch(progressive_runs):
    tmp, _, resumed = progressive_runs
    assert resumed == [(0, 16, 16), (1, 16, 16), (2, 32, 32)]
    assert [r["epoch"] for r in history(tmp / "b")] == ["1", "2", "3"]
    assert same(saved_weights(tmp / "a" / paths.LAST),
                saved_weights(tmp / "b" / paths.LAST))


def test_a_progressive_run_resumed_after_its_size_changed_trains_as_the_uninterrupted_one(
        train_tiny, tmp_path):
    """Epochs 1-2 at 16 px, 3-4 at 32 on one optimizer: killed after epoch 3, the run resumes
    with its schedule counted from that optimizer's first epoch, not from the 32 px part's (the
    optimizer's restored step counts from there: counted from epoch 3, epoch 4's rates were
    those of an epoch 6)."""
    overrides = {"train.epochs": 4, "train.start_size": 16, "train.size_ramp_start": 0.0,
                 "train.size_ramp_end": 0.5, "train.deterministic": True,
                 "train.schedule": "cosine", "train.warmup_epochs": 0}
    _fit(train_tiny, tmp_path, "a", overrides)
    _fit(train_tiny, tmp_path, "b", overrides, crash_after=2)
    _fit(train_tiny, tmp_path, "b", {}, resume=True)
    rates = [[r["learning_rate"] for r in history(tmp_path / name)] for name in "ab"]
    assert rates[0] == rates[1] and len(set(rates[0])) == 4
    assert same(saved_weights(tmp_path / "a" / paths.LAST),
                saved_weights(tmp_path / "b" / paths.LAST))


def test_epochs_of_other_steps_after_a_plan_made_again_train_them_and_resume_exactly(
        train_tiny, tmp_path):
    """A time plan made again after epoch 2 with epochs of 1 step, not 2, after it (as
    `time_plan.replan` records it): those epochs train 1 step each on the schedule followed
    epoch by epoch, killed after epoch 3 and resumed as the uninterrupted run."""
    import keras

    from corolla.training import refit
    from corolla.training.schedule import for_training

    overrides = {"train.epochs": 4, "train.deterministic": True, "train.schedule": "cosine",
                 "train.warmup_epochs": 0, "train.time_steps_from": 2,
                 "train.time_steps_later": 1}
    _, plan = train_tiny.fit(tmp_path, "a", overrides)
    _fit(train_tiny, tmp_path, "b", overrides, crash_after=2)
    _fit(train_tiny, tmp_path, "b", {}, resume=True)
    rates = [[r["learning_rate"] for r in history(tmp_path / name)] for name in "ab"]
    # Each epoch's rate is its last update's (counted from 0): 1 and 3, then 4 and 5, which
    # the schedule of 2-step epochs over the 8 updates of the run reads as its 4 and 4 + 2.
    t = config.load_config(overrides={"train.learning_rate": 3e-3, "train.min_learning_rate": 3e-5,
                                      **overrides}).train
    plain = for_training(t, 2)
    expected = [float(keras.ops.convert_to_numpy(plain(u))) for u in (1, 3, 4, 6)]
    assert [float(r) for r in rates[0]] == pytest.approx(expected) and rates[0] == rates[1]
    assert same(saved_weights(tmp_path / "a" / paths.LAST),
                saved_weights(tmp_path / "b" / paths.LAST))
    # Its refit trains 4 epochs all of its own steps, on the schedule of those.
    refit.train(tmp_path / "a", plan, lambda *a: None)
    steps = json.loads((tmp_path / "a" / paths.REFIT_PLAN).read_text())["settings"][
        "train.time_steps"]
    ours = for_training(t, steps)
    assert [r["learning_rate"] for r in read_history(tmp_path / "a" / paths.REFIT_HISTORY)] \
        == pytest.approx([float(keras.ops.convert_to_numpy(ours(k * steps - 1)))
                          for k in (1, 2, 3, 4)])
