"""Predictions are data: the file format, what `evaluate` and `predict` save (on the known-answer
run of tests/test_known_answer.py, whose every label is known in advance), and the submission
check that every file Corolla writes passes and `corolla check-submission` runs on any file."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from corolla.cli import main
from corolla.data import layout, pipeline
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.report import scored
from corolla.report import submission
from helpers.known_answer import CLASS_NAMES, RULE, SIZE, TEST_LABELS, data, run  # noqa: F401


def _partials(folder):
    return sorted(p.name for p in folder.rglob("*.partial*"))


def _probabilities(rows: int, classes: int, seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(rows, classes))
    return (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)


# The file format.

def test_a_saved_split_reads_back_as_it_was_written(tmp_path):
    ids = ["0f3a9c2e1", "00000000a", "b7", "1"]  # not in sorted order: the order is kept
    probabilities = _probabilities(4, 4)
    (tmp_path / "run").mkdir()  # predictions/ is made in it (not a mistyped path's parents)
    path = scored.save_predictions(tmp_path / "run" / "predictions" / "val.npz", ids, [3, 0, 2, 3],
                                   probabilities, CLASS_NAMES)
    assert path == tmp_path / "run" / "predictions" / "val.npz" and path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == ["val.npz"]  # no partial file

    loaded = predictions.load(path)
    assert loaded.ids == tuple(ids)
    assert loaded.labels.dtype == np.int64 and loaded.labels.tolist() == [3, 0, 2, 3]
    assert loaded.probabilities.dtype == np.float32
    np.testing.assert_array_equal(loaded.probabilities, probabilities)
    assert loaded.class_names == CLASS_NAMES  # 'hippeastrum ' keeps its trailing space
    assert loaded.labelled and loaded.predicted.tolist() == probabilities.argmax(1).tolist()

    # The documented format, read with NumPy alone and no pickle.
    with np.load(path, allow_pickle=False) as archive:
        assert sorted(archive.files) == ["class_names", "ids", "labels", "probabilities",
                                         "tta"]
        assert archive["tta"].shape == () and int(archive["tta"]) == 1  # no augmented views
        assert archive["ids"].dtype.kind == "U" and archive["probabilities"].shape == (4, 4)


def test_test_predictions_have_unknown_labels(tmp_path):
    path = scored.save_predictions(predictions.path_in(tmp_path, "test"), ["a", "b"], None,
                                   _probabilities(2, 3), ["x", "y", "z"])
    assert path == tmp_path / "predictions" / "test.npz"
    loaded = predictions.load(path)
    assert loaded.labels.tolist() == [predictions.UNKNOWN] * 2 == [-1, -1]
    assert not loaded.labelled


def test_rows_can_be_put_in_another_order_by_id(tmp_path):
    p = predictions.make(["a", "b", "c"], [0, 1, 2], np.eye(3), ["x", "y", "z"])
    q = p.in_order(["c", "a", "b"])
    assert q.ids == ("c", "a", "b") and q.labels.tolist() == [2, 0, 1]
    assert q.predicted.tolist() == [2, 0, 1]  # each row stays with its id


@pytest.mark.parametrize("ids, labels, probabilities, message", [
    (["a", "a", "b"], [0, 1, 1], np.eye(3), "1 duplicate ids (e.g. 'a')"),
    (["a", "b"], [0, 1], np.eye(3), "2 ids, 2 labels and 3 rows of probabilities disagree"),
    (["a", "b", "c"], [0, 1], np.eye(3), "3 ids, 2 labels and 3 rows"),
    (["a", "b", "c"], [0, 1, 2], np.eye(3)[:, :2], "2 columns of probabilities but 3 class"),
    (["a", "b", "c"], [0, 1, 3], np.eye(3), "1 labels outside [0, 3) and not -1"),
    (["a", "b", "c"], [0, 1, -2], np.eye(3), "1 labels outside [0, 3)"),
    (["a", "b", "c"], [0, 1, 2], np.eye(3) * np.nan, "3 rows of probabilities hold NaN"),
    (["a", "b", "c"], [0, 1, 2], np.ones(3), "must be [examples, classes], got shape (3,)"),
], ids=["duplicate-id", "fewer-ids", "fewer-labels", "fewer-columns", "label-too-big",
        "label-negative", "nan", "one-dimensional"])
def test_arrays_that_are_not_a_splits_predictions_are_refused(tmp_path, ids, labels,
                                                              probabilities, message):
    with pytest.raises(ValueError) as refused:
        scored.save_predictions(tmp_path / "p.npz", ids, labels, probabilities, ["x", "y", "z"])
    assert message in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_file_that_is_not_predictions_is_one_line(tmp_path):
    (tmp_path / "text.npz").write_text("not an archive")
    np.savez(tmp_path / "partial.npz", ids=np.array(["a"]), labels=np.array([0]))
    np.savez(tmp_path / "bad.npz", ids=np.array(["a", "a"]), labels=np.array([0, 0]),
             probabilities=np.eye(2, dtype=np.float32), class_names=np.array(["x", "y"]))
    np.savez(tmp_path / "types.npz", ids=np.array([1, 2]), labels=np.array([0, 0]),
             probabilities=np.eye(2, dtype=np.float32), class_names=np.array(["x", "y"]))
    for name, needle in (("text.npz", "is not a predictions file Corolla can read"),
                         ("partial.npz", "lacks probabilities, class_names"),
                         ("bad.npz", "is not one split's predictions: 1 duplicate ids"),
                         ("types.npz", "holds arrays of the wrong types"),
                         ("missing.npz", "no predictions file")):
        with pytest.raises(UserError) as refused:
            predictions.load(tmp_path / name)
        message = str(refused.value)
        assert needle in message and str(tmp_path / name) in message, message
        assert "\n" not in message and "corolla evaluate RUN" in message


# What evaluate, predict and the whole flow save.

def _file_order(root, split):
    return pipeline.metadata(layout.open_layout(str(root), SIZE).split(split))["ids"]


def test_evaluate_saves_the_val_predictions_in_the_splits_order(data, run):
    root, truth = data
    assert main(["evaluate", str(run)]) == 0
    saved = predictions.load(run / "predictions" / "val.npz")

    assert list(saved.ids) == _file_order(root, "val")  # the order the split is read in
    assert dict(zip(saved.ids, saved.labels.tolist())) == truth["val"]
    assert dict(zip(saved.ids, saved.predicted.tolist())) == {
        i: RULE[label] for i, label in truth["val"].items()}
    assert saved.class_names == CLASS_NAMES and saved.probabilities.shape == (12, 4)
    np.testing.assert_allclose(saved.probabilities.sum(axis=1), 1, rtol=1e-5)
    # The run's scores follow from the file alone.
    from corolla.evaluation import metrics

    scores = json.loads((run / "metrics.json").read_text())
    again = metrics.classification_metrics(saved.labels, saved.predicted, saved.class_names)
    assert again["f1_macro"] == scores["f1_macro"] and again["accuracy"] == scores["accuracy"]
    assert _partials(run) == []


def test_predict_saves_the_test_predictions_in_the_submissions_order(data, run, tmp_path):
    root, truth = data
    out = tmp_path / "submission.csv"
    assert main(["predict", str(run), "--out", str(out), "--batch-size", "3"]) == 0
    saved = predictions.load(run / "predictions" / "test.npz")

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
    beside = run / "eval-other-bands" / "predictions"
    assert sorted(p.name for p in beside.iterdir()) == ["test.npz", "val.npz"]
    val = predictions.load(beside / "val.npz")
    assert dict(zip(val.ids, val.labels.tolist())) == truth["val"]

    # evaluate --out: the predictions go with the metrics.
    assert main(["evaluate", str(run), "--data", str(other), "--out",
                 str(tmp_path / "scores")]) == 0
    assert (tmp_path / "scores" / "predictions" / "val.npz").is_file()


def test_a_run_that_cannot_be_written_still_predicts_to_out(run, tmp_path, monkeypatch,
                                                            capsys):
    """Someone else's run (a folder this user may not write into; faked here, since root writes
    anywhere): with --out the submission is still written, the predictions are not saved."""
    from corolla.commands import predict

    def unwritable(run_dir, *args, **kwargs):
        raise UserError(f"cannot write into {run_dir} (permission denied); make it writable or "
                        f"pass --out with another one")

    monkeypatch.setattr(predict, "output_dir", unwritable)
    (run / "predictions" / "test.npz").unlink(missing_ok=True)
    assert main(["predict", str(run), "--out", str(tmp_path / "s.csv")]) == 0
    assert len(submission.read(tmp_path / "s.csv")) == len(TEST_LABELS)
    assert f"test predictions not saved: cannot write into {run}" in capsys.readouterr().out
    assert not (run / "predictions" / "test.npz").exists()
    assert main(["predict", str(run)]) == 2  # without --out there is nowhere to write
    assert "cannot write into" in capsys.readouterr().err


def test_the_flow_after_training_saves_val_and_test_predictions(data, run, tmp_path):
    """`corolla train`'s last steps (here on a trained run whose evaluation was cut short, so no
    model is trained): evaluate and predict save both splits' predictions, beside
    submission.csv, before FINISHED."""
    from corolla import config, runtime
    from corolla.commands.run import train_evaluate_predict

    _, truth = data
    copy = tmp_path / "trained"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("predictions", "metrics.json"))
    cfg = config.load(copy / "config.toml")
    run_dir, metrics = train_evaluate_predict(cfg, runtime.detect_for(cfg), resume=copy,
                                              log=lambda *a: None)
    assert run_dir == copy and (copy / "FINISHED").is_file()
    val = predictions.load(copy / "predictions" / "val.npz")
    test = predictions.load(copy / "predictions" / "test.npz")
    assert dict(zip(val.ids, val.labels.tolist())) == truth["val"]
    assert list(test.ids) == list(submission.read(copy / "submission.csv"))
    assert test.predicted.tolist() == list(submission.read(copy / "submission.csv").values())


# The submission check.

def _test_ids(root):
    return _file_order(root, "test")


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _right_lines(truth):
    return ["id,label"] + [f"{i},{label}" for i, label in truth["test"].items()]


def test_a_right_submission_passes_the_check(data, tmp_path, capsys):
    root, truth = data
    path = _write(tmp_path / "s.csv", _right_lines(truth))
    assert submission.check(path, _test_ids(root), 4) == []
    assert main(["check-submission", str(path), "--data", str(root)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"{path}: OK, {len(TEST_LABELS)} rows")


def test_the_check_finds_every_kind_of_fault(data, tmp_path):
    root, truth = data
    ids = list(truth["test"])
    lines = _right_lines(truth)
    lines[0] = "id,Label"  # a wrong header
    lines[1] = f"{ids[0]},4"  # out of range: 4 classes
    lines[2] = f"{ids[1]},2.0"  # not an integer
    lines[3] = f"{ids[2]}, 1"  # not an integer either (a space)
    del lines[5]  # ids[4] missing
    lines.append(f"{ids[6]},1")  # ids[6] twice
    lines.append("123456789,0")  # unknown
    lines.append("only-one-field")
    problems = submission.check(_write(tmp_path / "s.csv", lines), _test_ids(root), 4)

    assert [(p.kind, p.count) for p in problems] == [
        ("header", 1), ("malformed", 1), ("duplicate", 1), ("unknown", 1), ("missing", 1),
        ("not_integer", 2), ("out_of_range", 1)]
    by_kind = {p.kind: p for p in problems}
    assert by_kind["header"].examples == ("the first line is 'id,Label'",)
    assert by_kind["malformed"].examples == ("line 17: 'only-one-field'",)
    assert by_kind["missing"].examples == (repr(ids[4]),)
    assert by_kind["duplicate"].examples == (f"{ids[6]!r} (lines 7, 15)",)
    assert by_kind["unknown"].examples == ("'123456789' (line 16)",)
    assert by_kind["out_of_range"].examples == ("line 2: 4",)
    assert by_kind["not_integer"].examples == ("line 3: '2.0'", "line 4: ' 1'")
    assert str(by_kind["out_of_range"]) == "1 labels outside the 4 classes [0, 3]: line 2: 4"
    assert str(by_kind["header"]) == ("the header is not exactly 'id,label': the first line is "
                                      "'id,Label'")


@pytest.mark.parametrize("fault, kind", [
    ("missing", "missing"), ("duplicate", "duplicate"), ("unknown", "unknown"),
    ("out_of_range", "out_of_range"), ("negative", "out_of_range"),
    ("not_integer", "not_integer"), ("header", "header"), ("no_header", "header"),
    ("empty", "header")])
def test_check_submission_names_each_fault_and_exits_2(data, tmp_path, capsys, fault, kind):
    root, truth = data
    ids, lines = list(truth["test"]), _right_lines(truth)
    if fault == "missing":
        del lines[3]
    elif fault == "duplicate":
        lines.insert(5, lines[2])
    elif fault == "unknown":
        lines.append("fffffffff,1")
    elif fault == "out_of_range":
        lines[4] = f"{ids[3]},104"
    elif fault == "negative":
        lines[4] = f"{ids[3]},-1"
    elif fault == "not_integer":
        lines[4] = f"{ids[3]},tulip"
    elif fault == "header":
        lines[0] = "id,label,extra"
    elif fault == "no_header":
        del lines[0]
    elif fault == "empty":
        lines = []
    path = _write(tmp_path / "s.csv", lines)
    assert main(["check-submission", str(path), "--data", str(root)]) == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0].startswith(f"corolla: error: {path} is not a valid submission"), err
    assert captured.out == "" and "Traceback" not in captured.err
    expected = {p.kind for p in submission.check(path, _test_ids(root), 4)}
    assert kind in expected
    assert len(err) == 1 + len(expected)  # one line per kind of problem
    for line in err[1:]:  # "  N what: examples", or "  the header is not ...: ..."
        assert line.startswith("  ") and (line.strip()[0].isdigit() or "header" in line), line


def test_check_submission_cites_at_most_five_examples(data, tmp_path):
    root, truth = data
    lines = ["id,label"] + [f"{i},9" for i in truth["test"]]
    problems = submission.check(_write(tmp_path / "s.csv", lines), _test_ids(root), 4)
    assert [(p.kind, p.count, len(p.examples)) for p in problems] == [
        ("out_of_range", len(TEST_LABELS), 5)]
    assert str(problems[0]).endswith(f"(and {len(TEST_LABELS) - 5} more)")


def test_check_submission_user_mistakes_are_one_line(data, tmp_path, capsys):
    root, _ = data
    for argv, needle in (
            (["check-submission", str(tmp_path / "nope.csv"), "--data", str(root)],
             "does not exist"),
            (["check-submission", str(tmp_path), "--data", str(root)], "is a folder"),
            (["check-submission", str(tmp_path / "s.csv")], "required: --data")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("corolla") and needle in err[0], err


def test_check_submission_reads_only_regular_files_and_only_as_much_as_a_submission_holds(
        data, tmp_path, capsys):
    """A device (/dev/urandom never ends), a FIFO, or a file larger than any submission of the
    split: one line, exit 2, and the memory never filled (the read stops at the bound)."""
    root, truth = data
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)  # opened for reading, it would block: the check must not open it
    big = _write(tmp_path / "big.csv", _right_lines(truth) + ["x" * 100] * 10_000)
    limit = submission.size_limit(_test_ids(root), 4)
    assert big.stat().st_size > limit > (tmp_path / "s.csv").write_text(
        "\n".join(_right_lines(truth))) * 1.5  # the bound leaves room for quotes and spaces
    for path, needle in (("/dev/urandom", "is not a regular file"),
                         (fifo, "is not a regular file"),
                         (big, f"holds over {limit:,} bytes")):
        assert main(["check-submission", str(path), "--data", str(root)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


def test_a_submission_that_fails_its_check_never_replaces_the_old_one(tmp_path, monkeypatch):
    path = submission.write(["a", "b"], [0, 1], tmp_path / "s.csv", num_classes=2)
    old = path.read_bytes()
    with pytest.raises(ValueError, match="fails its check: 1 labels outside the 2 classes"):
        submission.write(["a", "b"], [0, 2], path, num_classes=2)
    assert path.read_bytes() == old and _partials(tmp_path) == []
