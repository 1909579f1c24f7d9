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

from corolla import config
from corolla.cli import main
from corolla.data import layout, pipeline, records
from corolla.data.classes import CLASSES_FILE, format_classes_file
from corolla.report import submission

SIZE = 16
SHARDS = 3
# The fourth name ends with a space, as two of the competition's do.
CLASS_NAMES = ("band zero", "band one", "band two", "hippeastrum ")
CENTRES = (32, 96, 160, 224)  # the red value of each class's band, +/- JITTER
JITTER = 16  # bands [16, 48], [80, 112], [144, 176], [208, 240]: boundaries 64, 128, 192

# True labels in the order written (records go round-robin into the shards, so shard k holds
# positions k, k+3, ...). Every shard holds several classes.
TRAIN_LABELS = [0, 3, 1, 2, 2, 0, 3, 1, 2]
VAL_LABELS = [2, 0, 3, 1, 1, 3, 0, 2, 3, 2, 1, 0]  # 3 of each class
# 14 images: not a multiple of the shard count, nor of batch 16 or 3 (a padded last batch);
# batch 7 and 1 divide it (none). Classes 0-2 only, the ones the rule gets right, so every row
# of the submission is its true label.
TEST_LABELS = [1, 0, 2, 2, 0, 1, 1, 2, 0, 0, 2, 1, 0, 2]

RULE = {0: 0, 1: 1, 2: 2, 3: 2}  # what the model answers for each true class: 3 is read as 2

# The validation metrics of RULE on VAL_LABELS, by hand (3 images of each class; the twelve
# predictions are 0, 1, 2 three times each and 2 three more times):
#   accuracy      9 right of 12                                    = 0.75
#   class 0, 1    precision 3/3, recall 3/3, F1 1
#   class 2       precision 3/6, recall 3/3, F1 2 * 0.5 * 1 / 1.5  = 2/3
#   class 3       never predicted: precision 0 (0/0 counts as 0), recall 0/3, F1 0
#   macro over the classes {0, 1, 2, 3}:
#     precision   (1 + 1 + 0.5 + 0) / 4                            = 0.625
#     recall      (1 + 1 + 1 + 0) / 4                              = 0.75
#     F1          (1 + 1 + 2/3 + 0) / 4                            = 2/3
# The predicted classes are a subset of the true ones, so the competition's average (over the
# union of true and predicted labels, scikit-learn's default) and an average over the classes
# present in y_true agree here. Where they differ: had val held no class 3 image and the rule
# read class 2 as 3, the union {0, 1, 2, 3} gives macro F1 (1 + 1 + 0 + 0) / 4 = 0.5 (precision
# and recall 0.5 too), the present classes {0, 1, 2} give 2/3.
EXPECTED_METRICS = {"accuracy": 0.75, "precision_macro": 0.625, "recall_macro": 0.75,
                    "f1_macro": 2 / 3}
EXPECTED_F1_PER_CLASS = {"band zero": 1.0, "band one": 1.0, "band two": 2 / 3,
                         "hippeastrum ": 0.0}


def _image(label: int, rng: np.random.Generator) -> np.ndarray:
    red = CENTRES[label] + int(rng.integers(-JITTER, JITTER + 1))
    green, blue = (int(v) for v in rng.integers(0, 256, size=2))
    return np.broadcast_to(np.array([red, green, blue], np.uint8), (SIZE, SIZE, 3)).copy()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(data folder, {split: {id: true label}}): the competition layout, 3 shards a split."""
    import tensorflow as tf

    root = tmp_path_factory.mktemp("known")
    rng = np.random.default_rng(6)
    # Distinct random 9-hex ids: their sorted order is not the file order.
    ids = iter(f"{int(v):09x}" for v in rng.choice(16 ** 9, size=64, replace=False))
    truth = {}
    for split, labels in (("train", TRAIN_LABELS), ("val", VAL_LABELS), ("test", TEST_LABELS)):
        truth[split] = {next(ids): label for label in labels}
        serialized = [
            records.serialize(tf.io.encode_jpeg(_image(label, rng), quality=95).numpy(),
                              example_id, None if split == "test" else label)
            for example_id, label in truth[split].items()]
        written = records.write_shards(serialized, root / f"tfrecords-jpeg-{SIZE}x{SIZE}" / split,
                                       SIZE, SHARDS)
        assert len(written) == SHARDS
    (root / CLASSES_FILE).write_text(format_classes_file(CLASS_NAMES))
    return root, truth


def rule_model():
    """Input -> mean colour -> Dense (hand-set) -> softmax: the nearest band on the red mean.

    Nearest of the centres c_k to r  <=>  largest c_k * r - c_k**2 / 2, a linear function of r,
    scaled by 1/64 to keep the logits moderate. Class 3's logit is held far below the others,
    so a red mean in its band goes to the nearest remaining centre, class 2's."""
    import keras

    centres = np.array(CENTRES, np.float32)
    kernel = np.zeros((3, len(CENTRES)), np.float32)  # rows: red, green, blue
    kernel[0] = centres / 64
    bias = -(centres**2) / 2 / 64
    kernel[0, 3], bias[3] = 0.0, -1e4
    inputs = keras.Input((SIZE, SIZE, 3))
    x = keras.layers.GlobalAveragePooling2D(name="mean_colour")(inputs)
    outputs = keras.layers.Dense(len(CENTRES), activation="softmax", dtype="float32",
                                 name="bands")(x)
    model = keras.Model(inputs, outputs, name="rule")
    model.get_layer("bands").set_weights([kernel, bias])
    return model


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    """A run directory as `corolla train` leaves one: config.toml and model.keras."""
    root, _ = data
    run_dir = tmp_path_factory.mktemp("runs") / "rule"
    run_dir.mkdir()
    cfg = config.load(overrides={"data.path": str(root), "data.image_size": SIZE,
                                 "model.name": "small_cnn", "train.epochs": 1})
    config.save(cfg, run_dir / "config.toml")
    (run_dir / CLASSES_FILE).write_text(format_classes_file(CLASS_NAMES))  # as train saves it
    rule_model().save(run_dir / "model.keras")
    return run_dir


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
    model = keras.saving.load_model(run / "model.keras", compile=False, safe_mode=True)
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
    assert not (run / "submission.csv").exists()  # --out was honoured


@pytest.mark.parametrize("batch", [None, "5"], ids=["default-16", "5-does-not-divide-12"])
def test_evaluate_gives_the_hand_computed_metrics(data, run, batch):
    from sklearn import metrics as skm
    from sklearn.exceptions import UndefinedMetricWarning

    _, truth = data
    metrics_file = run / "metrics.json"
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
    (other / "metrics.json").unlink(missing_ok=True)
    inputs = keras.Input((SIZE, SIZE, 3))
    x = keras.layers.GlobalAveragePooling2D()(inputs)
    keras.Model(inputs, keras.layers.Dense(6, activation="softmax")(x)).save(
        other / "model.keras")
    for command in (["predict", str(other), "--out", str(tmp_path / "s.csv")],
                    ["evaluate", str(other)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"corolla: error: {other / 'model.keras'} outputs 6 classes but the run "
                       f"names 4; it is not this run's model"]
    assert not (tmp_path / "s.csv").exists() and not (other / "metrics.json").exists()
