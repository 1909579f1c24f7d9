"""The tiny demo end to end (`corolla demo --tiny`: the session's `tiny_run`): a complete run,
its submission, and evaluate and predict on it, which leave the run's record alone."""

import json
import shutil
import subprocess
import sys
import tomllib

import pytest

from corolla.cli import main
from corolla.data import layout, pipeline
from corolla.report import submission
from corolla.runs import paths
from helpers.cli import one_line_error
from helpers.runs import data_of, history


def test_demo_writes_a_complete_run(tiny_run):
    run = tiny_run
    for name in (paths.CONFIG, paths.MODEL, paths.HISTORY, paths.METRICS, paths.SUBMISSION,
                 paths.CONFUSION, paths.CURVES, paths.SAMPLES):
        assert (run / name).is_file() and (run / name).stat().st_size > 0, name
    config = tomllib.loads((run / paths.CONFIG).read_text())
    assert config["model"]["name"] == "small_cnn" and config["data"]["image_size"] == 32
    assert config["train"]["learning_rate"] > 0  # resolved, not the "0 = default" placeholder
    metrics = json.loads((run / paths.METRICS).read_text())
    assert metrics["split"] == "val" and metrics["num_examples"] == 32
    assert metrics["num_classes_present"] == 4  # the values: test_known_answer.py
    rows = history(run)
    assert len(rows) == 1 and {"loss", "val_loss", "accuracy", "val_accuracy"} <= set(rows[0])


def test_submission_has_each_test_id_exactly_once(tiny_run):
    run = tiny_run
    data = layout.open_layout(str(data_of(run)))
    test_ids = pipeline.metadata(data.split("test"))["ids"]
    lines = (run / paths.SUBMISSION).read_text().splitlines()
    assert lines[0] == "id,label" and len(lines) == 1 + len(test_ids) == 21
    rows = submission.read(run / paths.SUBMISSION)
    assert list(rows) == test_ids  # in the test split's order; the labels: test_known_answer


def test_evaluate_and_predict_leave_the_model_config_and_history_alone(tiny_run_copy,
                                                                       tmp_path):
    run = tiny_run_copy
    kept = (paths.MODEL, paths.CONFIG, paths.HISTORY, paths.PLAN, paths.CLASSES)
    before = {name: (run / name).read_bytes() for name in kept}
    assert main(["evaluate", str(run)]) == 0
    assert main(["predict", str(run), "--out", str(tmp_path / "sub.csv")]) == 0
    assert {name: (run / name).read_bytes() for name in kept} == before


def test_an_existing_run_is_never_overwritten(tiny_run, capsys):
    run = tiny_run
    root = run.parent.parent  # the demo's own command: <root>/cache, <root>/runs/tiny
    stamp = (run / paths.MODEL).stat().st_mtime_ns
    code = main(["demo", "--tiny", "--cache-dir", str(root / "cache"), "--runs-dir",
                 str(root / "runs"), "--name", "tiny"])
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert (run / paths.MODEL).stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_a_tensorflow_run_on_the_jax_backend_is_a_clear_error(tiny_run):
    run = tiny_run
    result = subprocess.run([sys.executable, "-m", "corolla", "evaluate", str(run), "--backend",
                             "jax"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "corolla: error:" in result.stderr and "use --backend tensorflow" in result.stderr
    assert "Traceback" not in result.stderr


def test_evaluating_on_data_with_other_classes_is_refused(tiny_run, tmp_path, capsys):
    run = tiny_run
    other = tmp_path / "other"
    shutil.copytree(data_of(run), other)
    (other / "classes.txt").write_text("a\nb\nc\nd\n")
    one_line_error(capsys, ["evaluate", str(run), "--data", str(other)],
                   "names other classes, not the 4 this run was trained on")
