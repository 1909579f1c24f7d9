"""`--class-weight` (config train.class_weight): the loss weighted per class, as per-example
sample weights from the input pipeline, so it reaches every strategy and backend and follows
mixed labels; `balanced` weights and a weights file (trained for real:
end_to_end/test_class_weight_training.py)."""

from __future__ import annotations

import numpy as np
import pytest

from corolla import config
from corolla.data import class_weights, layout, pipeline
from corolla.errors import UserError
from helpers.records import RARE_SIZE


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
        config.load_config(overrides={"train.class_weight": str(tmp_path / "missing.csv")})


def test_batches_carry_each_examples_weight_also_with_mixed_labels(rare_class):
    split = layout.open_layout(str(rare_class), RARE_SIZE).split("train")
    weights = np.array([1.0, 2.0, 10.0], np.float32)
    for augment in ("none", "mixup"):
        ds = pipeline.train_dataset(split, RARE_SIZE, 16, epoch_examples=64, augment=[augment]
                                    if augment != "none" else "none", num_classes=3,
                                    class_weights=weights, ordered=True)
        for images, labels, sample in ds.take(4):
            np.testing.assert_allclose(sample.numpy(), labels.numpy() @ weights, rtol=1e-6)
        if augment == "mixup":  # mixed labels got mixed weights, between the classes' own
            assert any(not np.isin(np.round(s, 4), weights).all()
                       for _, _, s in (b for b in ds.take(4)))
