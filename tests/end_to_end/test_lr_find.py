"""`corolla lr-find` and `corolla train --lr find` on the tiny synthetic petals: the range test
runs on the run's own model and stream, says its rule and rate, draws its picture, and leaves
no run behind; a run trained at the rate found keeps the test and starts from the weights its
model had before it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corolla.cli import main
from corolla.config.range_test import RULES
from corolla.runs import paths

pytestmark = pytest.mark.slow  # each test trains or sweeps a tiny model

SMALL = ("--model", "small_cnn", "--batch-size", "8")


def _png(path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_lr_find_says_the_rule_and_the_rate_draws_the_curve_and_makes_no_run(
        tiny_petals, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # its default place: the current folder
    runs = tmp_path / "runs"
    assert main(["lr-find", "--data", str(tiny_petals), *SMALL, "--steps", "60",
                 "--runs-dir", str(runs), "--name", "x"]) == 0
    out = capsys.readouterr().out
    assert "lr-find: step 6/60" in out and f"({RULES['steepest']};" in out
    line = next(li for li in out.splitlines() if li.startswith("suggested learning rate "))
    rate = float(line.split()[3])
    record = json.loads((tmp_path / paths.LR_FIND).read_text())
    assert record["suggestion"] == rate and record["rule"] == "steepest"
    assert record["model"] == "small_cnn" and record["global_batch"] == 8
    assert _png(tmp_path / paths.LR_FIND_PICTURE)
    assert not runs.exists()  # no run folder, named or not


def test_train_lr_find_trains_from_the_weights_before_the_test_at_the_rate_found(
        train_tiny, tmp_path, monkeypatch, capsys):
    """The run's config has the rate found, its folder the test's record and picture; the
    test ran on the run's own model, and training began from the weights that model was
    built with, not those the test left (it trained them into divergence)."""
    import keras

    from corolla import config
    from corolla.training import fit, trainer

    def weights(model):
        return [keras.ops.convert_to_numpy(v) for v in model.weights]

    built, tested, fitted = [], [], []
    real_find, real_fit = fit.range_test.find_rate, trainer.Trainer.fit_phases

    def find_rate(run_trainer, settings, log):
        built.append(weights(run_trainer.model))
        tested.append(run_trainer.model)
        return real_find(run_trainer, settings, log)

    def fit_phases(self, until=0):
        fitted.append((self.model, weights(self.model)))
        return real_fit(self, until)

    monkeypatch.setattr(fit.range_test, "find_rate", find_rate)
    monkeypatch.setattr(trainer.Trainer, "fit_phases", fit_phases)
    run = train_tiny(tmp_path, "--lr", "find", *SMALL)
    out = capsys.readouterr().out
    record = json.loads((run / paths.LR_FIND).read_text())
    rate = record["suggestion"]
    assert rate and f"suggested learning rate {rate:.3g}" in out and "the run trains at it" in out
    t = config.load_config(run / paths.CONFIG).train
    assert (t.learning_rate, t.start_learning_rate, t.min_learning_rate) == \
        (rate, config.derived_rate(rate / 10), config.derived_rate(rate / 100))
    assert np.all(np.diff(record["rates"]) > 0) and _png(run / paths.LR_FIND_PICTURE)
    assert "Learning-rate range test (--lr find) (lr_find.png)" in \
        (run / paths.REPORT).read_text()  # the report shows it too
    (model, at_fit), = fitted
    assert tested == [model]
    for start, initial in zip(at_fit, built[0]):
        np.testing.assert_array_equal(start, initial)


def test_a_curve_that_never_falls_is_one_line_before_any_run(train_tiny, tmp_path,
                                                             monkeypatch):
    import pytest

    from corolla import config, runtime, training
    from corolla.config.range_test import RangeSettings
    from corolla.errors import UserError
    from corolla.training import range_test

    monkeypatch.setattr(range_test, "suggest", lambda *a, **k: (None, None))
    cfg = config.load_config(overrides={
        "data.path": str(train_tiny.tiny_petals), "model.name": "small_cnn",
        "train.batch_size": 8, "train.epochs": 1, "train.steps_per_epoch": 2,
        "output.runs_dir": str(tmp_path / "runs"), "output.name": "w"})
    with pytest.raises(UserError, match=r"loss never fell .* pass --lr RATE"):
        training.run(cfg, runtime.detect_for(cfg), log=lambda *a: None,
                     lr_find=RangeSettings(steps=20))
    assert not (tmp_path / "runs").exists()
