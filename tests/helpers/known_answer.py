"""The known-answer data and run (end_to_end/test_known_answer.py says what they hold): records
whose true labels are known, and a run whose model is a fixed rule on the red channel. The
fixtures `data` and `run` are module-scoped: a test module imports them (`from
helpers.known_answer import data_fixture, run_fixture`: named apart from the arguments that
request them) and gets its own run to write into."""

from __future__ import annotations

import numpy as np
import pytest

from corolla import config
from corolla.data import records
from corolla.data.classes import CLASSES_FILE, format_classes_file
from corolla.runs import paths

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


@pytest.fixture(scope="module", name="data")
def data_fixture(tmp_path_factory):
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


@pytest.fixture(scope="module", name="run")
def run_fixture(data, tmp_path_factory):
    """A run directory as `corolla train` leaves one: config.toml and model.keras."""
    root, _ = data
    run_dir = tmp_path_factory.mktemp("runs") / "rule"
    run_dir.mkdir()
    cfg = config.load_config(overrides={"data.path": str(root), "data.image_size": SIZE,
                                        "model.name": "small_cnn", "train.epochs": 1})
    config.save_config(cfg, run_dir / paths.CONFIG)
    (run_dir / paths.CLASSES).write_text(format_classes_file(CLASS_NAMES))  # as train saves it
    rule_model().save(run_dir / paths.MODEL)
    return run_dir
