"""Training: the schedule, resuming (after a crash, with the same schedule and the same data
as an uninterrupted run), --deterministic, and what a run records about itself."""

import csv
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from helpers.processes import REPO, SCRIPTS
from corolla import config

CRASH = SCRIPTS / "crash_train.py"


def test_schedule_matches_its_formula_at_chosen_steps():
    from corolla.training import learning_rate_schedule

    peak, total, warmup = 1e-3, 100, 10
    schedule = learning_rate_schedule(peak, total, warmup)
    expected = {
        0: peak / 10,  # the ramp starts at a tenth of the peak
        5: peak / 10 + (peak - peak / 10) * 5 / 10,  # linear ramp
        10: peak,
        55: peak * (0.99 * 0.5 * (1 + np.cos(np.pi * 45 / 90)) + 0.01),  # half way down
        100: peak * 0.01,  # cosine ends at 1% of the peak
    }
    for step, lr in expected.items():
        assert float(schedule(step)) == pytest.approx(lr, rel=1e-5), step


def test_progressive_resizing_ramps_in_steps_of_16_and_ends_at_the_input_size():
    from corolla.training import fit, schedule

    def sizes(final, epochs, **train):
        t = config.load(overrides={"train.epochs": epochs, **{f"train.{k}": v
                                                                for k, v in train.items()}}).train
        return [schedule.size_at(t, final, e) for e in range(epochs)]

    # FFCV's ramp by fractions: 96 until half way (epoch 14), linear to 128 by 80% (22.4),
    # rounded down to multiples of 16.
    assert sizes(128, 28, start_size=96) == [96] * 19 + [112] * 4 + [128] * 5
    assert sizes(128, 5, start_size=0) == sizes(128, 5, start_size=160) == [128] * 5
    # The last epoch is at the input size even when the ramp ends with the training.
    assert sizes(48, 4, start_size=16, size_ramp_start=0, size_ramp_end=1) == [16, 16, 32, 48]
    assert sizes(200, 3, start_size=64, size_ramp_start=0.9, size_ramp_end=0.9) == [64, 64, 200]
    # Phases split where the size changes, and where two-phase fine-tuning unfreezes.
    t = config.load(overrides={"train.epochs": 6, "train.start_size": 16,
                               "train.frozen_epochs": 2, "train.size_ramp_start": 0.4,
                               "train.size_ramp_end": 0.6}).train
    assert [(p.start, p.end, p.frozen, p.size) for p in fit.phases(t, True, 32)] == [
        (0, 2, True, 16), (2, 4, False, 16), (4, 6, False, 32)]
    assert [(p.start, p.end, p.size) for p in fit.phases(t, True, 0)] == [(0, 2, 0), (2, 6, 0)]


def _train(args, crash="none", env=None, timeout=300):
    cmd = [sys.executable, str(CRASH), crash, "train", *map(str, args)]
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run(cmd, cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=timeout)


def _history(run):
    with (run / "history.csv").open() as f:
        return list(csv.DictReader(f))


def _model_weights(run):
    code = ("import sys, numpy as np, corolla.runtime as r; r.detect(); import keras; "
            "import corolla.models.layers; m = keras.saving.load_model(sys.argv[1], "
            "compile=False); np.savez(sys.argv[2], *m.get_weights())")
    out = run / "weights.npz"
    subprocess.run([sys.executable, "-c", code, str(run / "model.keras"), str(out)], check=True,
                   capture_output=True, timeout=300)
    with np.load(out) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


@pytest.mark.large  # 50 s: CI's large step (the README's suite keeps to 20 min)
def test_a_crashed_run_resumes_exactly_where_an_uninterrupted_one_would_be(tiny_petals,
                                                                           tmp_path):
    """--deterministic: a run killed after its second epoch and resumed (another process)
    ends bit-identical to an uninterrupted run with the same seed (same weights, optimizer
    step, data order and augmentation per epoch): which also shows that two runs with one seed
    are bit-identical. Its history has every epoch once."""
    common = ["--data", tiny_petals, "--epochs", 3, "--batch-size", 8, "--deterministic",
              "--runs-dir", tmp_path]
    result = _train([*common, "--name", "a"])
    assert result.returncode == 0, result.stderr[-3000:]
    crashed = _train([*common, "--name", "c"], crash="epoch_end:1")
    assert crashed.returncode == 3 and "CRASH after epoch 1" in crashed.stdout
    run_c = tmp_path / "c"
    assert not (run_c / "model.keras").exists() and (run_c / "backup" / "state.json").is_file()
    assert [r["epoch"] for r in _history(run_c)] == ["1", "2"]

    resumed = _train(["--resume", run_c])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "FIRST_EPOCH 2" in resumed.stdout and "after epoch 2 of 3" in resumed.stdout
    assert not (run_c / "backup").exists()  # gone once model.keras is safely written

    runs = {name: tmp_path / name for name in "ac"}
    histories = {name: _history(run) for name, run in runs.items()}
    assert [r["epoch"] for r in histories["c"]] == ["1", "2", "3"]
    for key in ("learning_rate", "loss", "accuracy", "val_loss"):
        column = {name: [float(r[key]) for r in rows] for name, rows in histories.items()}
        assert column["a"] == column["c"], key
    lrs = [float(r["learning_rate"]) for r in histories["c"]]
    assert lrs[0] > lrs[1] > lrs[2]  # past the 1-epoch ramp, decaying towards the end
    weights = {name: _model_weights(run) for name, run in runs.items()}
    assert len(weights["a"]) == len(weights["c"]) > 0
    for a, c in zip(weights["a"], weights["c"]):
        np.testing.assert_array_equal(a, c)


def test_a_run_records_what_ran(tmp_path, tiny_petals):
    from corolla.cli import main

    rel = os.path.relpath(tiny_petals)
    assert main(["train", "--data", rel, "--epochs", "1", "--batch-size", "8", "--runs-dir",
                 str(tmp_path), "--name", "r"]) == 0
    run = tmp_path / "r"
    config = tomllib.loads((run / "config.toml").read_text())
    assert config["data"]["path"] == str(Path(tiny_petals).resolve())  # absolute, not as typed
    assert config["train"]["global_batch_size"] == 8 and config["train"]["steps_per_epoch"] == 8
    assert len(config["output"]["run_id"]) == 12
    plan = json.loads((run / "plan.json").read_text())["sessions"][0]
    assert plan["plan"]["backend"] == "tensorflow" and plan["plan"]["global_batch"] == 8
    assert {"python", "keras", "tensorflow"} <= set(plan["versions"])
    assert (run / "classes.txt").read_text() == (tiny_petals / "classes.txt").read_text()

    # Rerunning the saved config makes a new run (a fresh name and id), said in the log.
    assert main(["train", "--config", str(run / "config.toml")]) == 0
    again = tomllib.loads((tmp_path / "r-2" / "config.toml").read_text())
    assert again["output"]["name"] == "r-2"
    assert again["output"]["run_id"] != config["output"]["run_id"]
