"""`--class-weight` (config train.class_weight): the loss weighted per class, as per-example
sample weights from the input pipeline, so it reaches every strategy and backend and follows
mixed labels. On data where one class is 10x rarer, `balanced` raises that class's recall."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.processes import REPO, SCRIPTS, run_python

from corolla import config
from corolla.cli import main
from corolla.data import class_weights, layout, pipeline, records
from corolla.errors import UserError

SIZE = 16
CENTRES = (40, 215, 128)  # red value of class 0, 1 and the rare class 2
JITTER = 75  # the rare class's band overlaps both others: priors decide the overlaps
TRAIN = {0: 150, 1: 150, 2: 15}  # class 2 is 10x rarer
VAL = {0: 40, 1: 40, 2: 40}


@pytest.fixture(scope="module")
def rare(tmp_path_factory) -> Path:
    """Solid-colour images whose class is their red band, with one class 10x rarer."""
    import tensorflow as tf

    root = tmp_path_factory.mktemp("rare")
    rng = np.random.default_rng(0)
    for split, counts in (("train", TRAIN), ("val", VAL), ("test", {0: 2, 1: 2, 2: 2})):
        labels = rng.permutation([c for c, n in counts.items() for _ in range(n)])
        serialized = []
        for i, label in enumerate(labels):
            red = int(np.clip(CENTRES[label] + rng.integers(-JITTER, JITTER + 1), 0, 255))
            pixel = np.array([red, *rng.integers(0, 256, 2)], np.uint8)
            image = np.broadcast_to(pixel, (SIZE, SIZE, 3)).copy()
            serialized.append(records.serialize(tf.io.encode_jpeg(image, quality=95).numpy(),
                                                f"{split}{i:05d}",
                                                None if split == "test" else int(label)))
        records.write_shards(serialized, root / f"tfrecords-jpeg-{SIZE}x{SIZE}" / split, SIZE, 1)
    (root / "classes.txt").write_text("common a\ncommon b\nrare\n")
    return root


def test_balanced_weights_are_inverse_frequency_with_mean_one():
    labels = [0] * 100 + [1] * 100 + [2] * 10
    w = class_weights.balanced(labels, 4)
    np.testing.assert_allclose(w[:3], [210 / 300, 210 / 300, 210 / 30])
    assert w[3] == 1  # no training image: never drawn
    assert np.isclose(np.mean(w[np.asarray(labels)]), 1)


def test_a_weights_file_names_classes_and_bad_lines_are_one_line(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("rare,5\n1,0.5\n")
    np.testing.assert_allclose(class_weights.from_file(path, ("a", "b", "rare")), [1, 0.5, 5])
    path.write_text("tulip,2\n")
    with pytest.raises(UserError, match="line 1"):
        class_weights.from_file(path, ("a", "b", "rare"))
    with pytest.raises(UserError, match="train.class_weight"):
        config.load(overrides={"train.class_weight": str(tmp_path / "missing.csv")})


def test_batches_carry_each_examples_weight_also_with_mixed_labels(rare):
    split = layout.open_layout(str(rare), SIZE).split("train")
    weights = np.array([1.0, 2.0, 10.0], np.float32)
    for augment in ("none", "mixup"):
        ds = pipeline.train_dataset(split, SIZE, 16, epoch_examples=64, augment=[augment]
                                    if augment != "none" else "none", num_classes=3,
                                    class_weights=weights, ordered=True)
        for images, labels, sample in ds.take(4):
            np.testing.assert_allclose(sample.numpy(), labels.numpy() @ weights, rtol=1e-6)
        if augment == "mixup":  # mixed labels got mixed weights, between the classes' own
            assert any(not np.isin(np.round(s, 4), weights).all()
                       for _, _, s in (b for b in ds.take(4)))


def _rare_recall(rare, runs, name, weight) -> float:
    assert main(["train", "--data", str(rare), "--model", "small_cnn", "--epochs", "2",
                 "--batch-size", "16", "--lr", "0.003", "--no-augment", "--seed", "1",
                 "--class-weight", weight, "--runs-dir", str(runs), "--name", name]) == 0
    saved = config.load(runs / name / "config.toml")
    assert saved.train.class_weight == weight  # recorded with the run
    per_class = json.loads((runs / name / "metrics.json").read_text())["per_class"]
    return next(c["recall"] for c in per_class if c["name"] == "rare")


@pytest.mark.slow
@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_balanced_raises_the_rare_classs_recall(rare, tmp_path):
    """Measured: recall of the rare class 0.0 unweighted, 0.75 balanced (2 epochs, seed 1)."""
    none = _rare_recall(rare, tmp_path, "none", "none")
    balanced = _rare_recall(rare, tmp_path, "balanced", "balanced")
    assert balanced > none + 0.2, (none, balanced)


HELPER = SCRIPTS / "replicas.py"


@pytest.mark.large
@pytest.mark.parametrize("backend, devices, strategy", [("tensorflow", 2, "MirroredStrategy"),
                                                        ("jax", 2, "DataParallel")])
def test_class_weights_with_mixed_labels_train_on_several_replicas(tiny_petals, tmp_path,
                                                                   backend, devices, strategy):
    overrides = json.dumps({"train.class_weight": "balanced", "data.augment": ["flip", "mixup"]})
    argv = [str(HELPER), backend, str(devices), "train", str(tiny_petals), str(tmp_path), "16",
            overrides]
    code = f"import runpy, sys; sys.argv = {argv!r}; " \
           f"runpy.run_path({str(HELPER)!r}, run_name='__main__')"
    result = run_python(code, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads([s for s in result.stdout.splitlines() if s.startswith("RESULT ")][-1][7:])
    assert (out["strategy"], out["replicas"]) == (strategy, devices)
    run = Path(out["run_dir"])
    assert config.load(run / "config.toml").train.class_weight == "balanced"
    assert (run / "model.keras").is_file()
