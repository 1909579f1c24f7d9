"""Known answers, end to end: `corolla predict` and `corolla evaluate` on a run whose model is a
fixed rule, over generated records whose true labels the test keeps, test split included.

The data: 16 px solid-colour JPEGs whose red channel sits in one of four bands, one band per
class (green and blue are noise). The model: global average pooling and one Dense layer with
hand-set weights, a nearest-band rule on the mean red value that is right on classes 0-2 and
reads class 3 as class 2 on purpose. So every test id's label in submission.csv is known in
advance, and so are the validation metrics, by hand. The labels change along the file order and
within every shard: predictions paired with the wrong ids (shifted, reordered, padding kept,
a shard skipped) cannot pass.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from corolla.cli import main
from corolla.data import layout, pipeline
from corolla.report import submission
from corolla.runs import paths
from helpers.known_answer import (  # noqa: F401 (data, run: the fixtures)
    CLASS_NAMES, EXPECTED_F1_PER_CLASS, EXPECTED_METRICS, RULE, SHARDS, SIZE, TEST_LABELS,
    VAL_LABELS, data_fixture, run_fixture)


def test_the_data_set_would_catch_a_wrong_pairing(data):
    """Not a test of Corolla: the check that the data can tell a right pairing from a wrong
    one, which is what makes the end-to-end tests below worth passing."""
    _, truth = data
    ids, labels = list(truth["test"]), list(truth["test"].values())
    for shift in range(1, len(ids)):  # predictions shifted against the ids
        assert dict(zip(ids, labels[shift:] + labels[:shift])) != truth["test"], shift
    assert dict(zip(ids, labels[::-1])) != truth["test"]
    assert dict(zip(sorted(ids), labels)) != truth["test"]  # ids sorted, labels not
    for split, n in (("train", 9), ("val", 12), ("test", 14)):
        split_labels = list(truth[split].values())
        assert len(split_labels) == n
        for shard in range(SHARDS):
            assert len(set(split_labels[shard::SHARDS])) >= 2, (split, shard)


def test_corolla_reads_back_the_ids_and_labels_written(data):
    root, truth = data
    found = layout.open_layout(str(root), SIZE)
    assert found.class_names == CLASS_NAMES
    for split in ("train", "val", "test"):
        part = found.split(split)
        assert len(part.files) == SHARDS and part.count == len(truth[split])
        meta = pipeline.metadata(part)
        assert sorted(meta["ids"]) == sorted(truth[split])
        if split != "test":
            assert dict(zip(meta["ids"], meta["labels"])) == truth[split]
        else:
            assert meta["labels"] == []


def test_the_rule_model_is_right_except_on_class_3(data, run):
    """The model alone, loaded with safe_mode as Corolla loads it, on every decoded image."""
    import keras

    root, truth = data
    model = keras.saving.load_model(run / paths.MODEL, compile=False, safe_mode=True)
    found = layout.open_layout(str(root), SIZE)
    for split in ("train", "val", "test"):
        examples = list(pipeline.read(found.split(split), SIZE, ordered=True))
        images = np.stack([e["image"].numpy() for e in examples]).astype(np.float32)
        answers = model.predict(images, verbose=0).argmax(axis=1)
        assert {e["id"].numpy().decode(): int(a) for e, a in zip(examples, answers)} == {
            i: RULE[label] for i, label in truth[split].items()}


@pytest.mark.parametrize("batch", [None, "3", "7", "1"],
                         ids=["default-16", "3-does-not-divide-14", "7-divides-14", "1"])
def test_predict_writes_every_test_id_with_its_true_label(data, run, tmp_path, batch):
    root, truth = data
    out = tmp_path / "submission.csv"
    argv = ["predict", str(run), "--out", str(out)]
    assert main(argv + (["--batch-size", batch] if batch else [])) == 0

    assert submission.read(out) == truth["test"]  # every id, and each with its true label
    lines = out.read_text().splitlines()
    assert lines[0] == "id,label" and len(lines) == 1 + len(TEST_LABELS)
    file_order = pipeline.metadata(layout.open_layout(str(root), SIZE).split("test"))["ids"]
    assert [line.split(",")[0] for line in lines[1:]] == file_order
    assert not (run / paths.SUBMISSION).exists()  # --out was honoured


@pytest.mark.parametrize("batch", [None, "5"], ids=["default-16", "5-does-not-divide-12"])
def test_evaluate_gives_the_hand_computed_metrics(data, run, batch):
    from sklearn import metrics as skm
    from sklearn.exceptions import UndefinedMetricWarning

    _, truth = data
    metrics_file = run / paths.METRICS
    metrics_file.unlink(missing_ok=True)
    assert main(["evaluate", str(run)] + (["--batch-size", batch] if batch else [])) == 0
    metrics = json.loads(metrics_file.read_text())

    assert metrics["split"] == "val" and metrics["num_examples"] == len(VAL_LABELS)
    for key, value in EXPECTED_METRICS.items():
        assert metrics[key] == pytest.approx(value, abs=1e-9), key
    # Predictions inside the true classes: the present-classes average is the same here.
    assert metrics["f1_macro_present"] == pytest.approx(EXPECTED_METRICS["f1_macro"], abs=1e-9)
    assert metrics["f1_per_class"] == pytest.approx(EXPECTED_F1_PER_CLASS, abs=1e-9)

    # The hand computation agrees with scikit-learn's defaults, the competition's definition.
    y_true = list(truth["val"].values())
    y_pred = [RULE[label] for label in y_true]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # class 3's precision is 0/0
        sklearn_says = {
            "accuracy": skm.accuracy_score(y_true, y_pred),
            "precision_macro": skm.precision_score(y_true, y_pred, average="macro"),
            "recall_macro": skm.recall_score(y_true, y_pred, average="macro"),
            "f1_macro": skm.f1_score(y_true, y_pred, average="macro"),
        }
    assert sklearn_says == pytest.approx(EXPECTED_METRICS, abs=1e-12)



def test_a_model_of_another_width_than_the_run_is_refused(data, run, tmp_path, capsys):
    """A model.keras with 6 outputs in a 4-class run would write labels 4 and 5 (or crash in
    the metrics): one line, exit 2, nothing written."""
    import shutil

    import keras

    other = tmp_path / "other"
    shutil.copytree(run, other)
    (other / paths.METRICS).unlink(missing_ok=True)
    inputs = keras.Input((SIZE, SIZE, 3))
    x = keras.layers.GlobalAveragePooling2D()(inputs)
    keras.Model(inputs, keras.layers.Dense(6, activation="softmax")(x)).save(
        other / paths.MODEL)
    for command in (["predict", str(other), "--out", str(tmp_path / "s.csv")],
                    ["evaluate", str(other)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"corolla: error: {other / paths.MODEL} outputs 6 classes but the run "
                       f"names 4; it is not this run's model"]
    assert not (tmp_path / "s.csv").exists() and not (other / paths.METRICS).exists()
