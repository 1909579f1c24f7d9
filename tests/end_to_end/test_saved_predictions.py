"""What `evaluate`, `predict` and the flow after training save, on the known-answer run (whose every
label is known in advance): each split's predictions in its read order, beside the run or its
eval-* folder, and a submission still written where the run cannot be."""

from __future__ import annotations

import json
import shutil

import numpy as np

from corolla.cli import main
from corolla.data import layout, pipeline
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.report import submission
from corolla.runs import paths
from helpers.known_answer import (  # noqa: F401 (data, run: the fixtures)
    CLASS_NAMES, RULE, SIZE, TEST_LABELS, data_fixture, run_fixture)


def _partials(folder):
    return sorted(p.name for p in folder.rglob("*.partial*"))


def _file_order(root, split):
    return pipeline.metadata(layout.open_layout(str(root), SIZE).split(split))["ids"]


def test_evaluate_saves_the_val_predictions_in_the_splits_order(data, run):
    root, truth = data
    assert main(["evaluate", str(run)]) == 0
    saved = predictions.load(paths.predictions_file(run, "val"))

    assert list(saved.ids) == _file_order(root, "val")  # the order the split is read in
    assert dict(zip(saved.ids, saved.labels.tolist())) == truth["val"]
    assert dict(zip(saved.ids, saved.predicted.tolist())) == {
        i: RULE[label] for i, label in truth["val"].items()}
    assert saved.class_names == CLASS_NAMES and saved.probabilities.shape == (12, 4)
    np.testing.assert_allclose(saved.probabilities.sum(axis=1), 1, rtol=1e-5)
    # The run's scores follow from the file alone.
    from corolla.scoring import metrics

    scores = json.loads((run / paths.METRICS).read_text())
    again = metrics.classification_metrics(saved.labels, saved.predicted, saved.class_names)
    assert again["f1_macro"] == scores["f1_macro"] and again["accuracy"] == scores["accuracy"]
    assert _partials(run) == []


def test_predict_saves_the_test_predictions_in_the_submissions_order(data, run, tmp_path):
    root, truth = data
    out = tmp_path / "submission.csv"
    assert main(["predict", str(run), "--out", str(out), "--batch-size", "3"]) == 0
    saved = predictions.load(paths.predictions_file(run, "test"))

    rows = [line.split(",") for line in out.read_text().splitlines()[1:]]
    assert list(saved.ids) == [i for i, _ in rows] == _file_order(root, "test")
    assert saved.predicted.tolist() == [int(label) for _, label in rows]
    assert dict(zip(saved.ids, saved.predicted.tolist())) == truth["test"]
    assert saved.labels.tolist() == [-1] * len(TEST_LABELS) and not saved.labelled
    assert saved.class_names == CLASS_NAMES


def test_scores_on_other_data_save_their_predictions_beside_the_run(data, run, tmp_path):
    root, truth = data
    other = tmp_path / "other-bands"
    shutil.copytree(root, other)
    assert main(["evaluate", str(run), "--data", str(other)]) == 0
    assert main(["predict", str(run), "--data", str(other), "--out",
                 str(tmp_path / "s.csv")]) == 0
    beside = run / "eval-other-bands" / paths.PREDICTIONS
    assert sorted(p.name for p in beside.iterdir()) == ["test.npz", "val.npz"]
    val = predictions.load(beside / "val.npz")
    assert dict(zip(val.ids, val.labels.tolist())) == truth["val"]

    # evaluate --out: the predictions go with the metrics.
    assert main(["evaluate", str(run), "--data", str(other), "--out",
                 str(tmp_path / "scores")]) == 0
    assert paths.predictions_file(tmp_path / "scores", "val").is_file()


def test_a_run_that_cannot_be_written_still_predicts_to_out(run, tmp_path, monkeypatch,
                                                            capsys):
    """Someone else's run (a folder this user may not write into; faked here, since root writes
    anywhere): with --out the submission is still written, the predictions are not saved."""
    from corolla.flows import predict

    def unwritable(run_dir, *args, **kwargs):
        raise UserError(f"cannot write into {run_dir} (permission denied); make it writable or "
                        f"pass --out with another one")

    monkeypatch.setattr(predict, "output_dir", unwritable)
    paths.predictions_file(run, "test").unlink(missing_ok=True)
    assert main(["predict", str(run), "--out", str(tmp_path / "s.csv")]) == 0
    assert len(submission.read(tmp_path / "s.csv")) == len(TEST_LABELS)
    assert f"test predictions not saved: cannot write into {run}" in capsys.readouterr().out
    assert not paths.predictions_file(run, "test").exists()
    assert main(["predict", str(run)]) == 2  # without --out there is nowhere to write
    assert "cannot write into" in capsys.readouterr().err


def test_the_flow_after_training_saves_val_and_test_predictions(data, run, tmp_path):
    """`corolla train`'s last steps (here on a trained run whose evaluation was cut short, so no
    model is trained): evaluate and predict save both splits' predictions, beside
    submission.csv, before FINISHED."""
    from corolla import config, runtime
    from corolla.flows.run import train_evaluate_predict

    _, truth = data
    copy = tmp_path / "trained"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(paths.PREDICTIONS, paths.METRICS))
    cfg = config.load_config(copy / paths.CONFIG)
    run_dir, metrics = train_evaluate_predict(cfg, runtime.detect_for(cfg), resume=copy,
                                              log=lambda *a: None)
    assert run_dir == copy and (copy / paths.FINISHED).is_file()
    val = predictions.load(paths.predictions_file(copy, "val"))
    test = predictions.load(paths.predictions_file(copy, "test"))
    assert dict(zip(val.ids, val.labels.tolist())) == truth["val"]
    assert list(test.ids) == list(submission.read(copy / paths.SUBMISSION))
    assert test.predicted.tolist() == list(submission.read(copy / paths.SUBMISSION).values())
