"""Predictions are data: the file format (what `evaluate` and `predict` save on a run:
end_to_end/test_saved_predictions.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.report import scored
from corolla.runs import paths
from helpers.known_answer import CLASS_NAMES


def _partials(folder):
    return sorted(p.name for p in folder.rglob("*.partial*"))


def _probabilities(rows: int, classes: int, seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(rows, classes))
    return (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)


def test_a_saved_split_reads_back_as_it_was_written(tmp_path):
    ids = ["0f3a9c2e1", "00000000a", "b7", "1"]  # not in sorted order: the order is kept
    probabilities = _probabilities(4, 4)
    (tmp_path / "run").mkdir()  # predictions/ is made in it (not a mistyped path's parents)
    path = scored.save_predictions(tmp_path / "run" / paths.PREDICTIONS / "val.npz", ids,
                                   [3, 0, 2, 3], probabilities, CLASS_NAMES)
    assert path == paths.predictions_file(tmp_path / "run", "val") and path.is_file()
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
    assert path == paths.predictions_file(tmp_path, "test")
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


@pytest.mark.parametrize("rows, says", [
    ([[1.2, -0.2], [0.5, 0.5]], "1 rows of probabilities hold negative values (e.g. row 0: -0.2)"),
    ([[0.5, 0.5], [2.0, 3.0]], "1 rows of probabilities do not sum to 1 (e.g. row 1: 5)"),
    ([[0.5, 0.49], [0.3, 0.3]], "2 rows of probabilities do not sum to 1 (e.g. row 0: 0.99)"),
])
def test_saved_rows_that_are_not_probabilities_are_one_line(tmp_path, rows, says):
    """Scores or logits saved by another tool (negative, or rows not summing to 1) were
    blended and thresholded as if they were probabilities."""
    np.savez(tmp_path / "val.npz", ids=np.array(["a", "b"]), labels=np.array([0, 1]),
             probabilities=np.array(rows, np.float32), class_names=np.array(["x", "y"]))
    with pytest.raises(UserError) as refused:
        predictions.load(tmp_path / "val.npz")
    assert str(refused.value).startswith(f"{tmp_path / 'val.npz'} is not one split's "
                                         f"predictions: {says}; "), str(refused.value)


def test_rows_within_rounding_of_one_are_probabilities(tmp_path):
    """float32 softmax rows of many classes, averaged (TTA) or blended, miss 1 by rounding."""
    probabilities = _probabilities(64, 104)
    probabilities[0] *= np.float32(1 + 5e-4)
    np.savez(tmp_path / "val.npz", ids=np.array([f"i{k}" for k in range(64)]),
             labels=np.zeros(64, np.int64), probabilities=probabilities,
             class_names=np.array([f"c{k}" for k in range(104)]))
    assert len(predictions.load(tmp_path / "val.npz")) == 64
