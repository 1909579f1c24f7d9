"""Loss weights per class (config `train.class_weight`), for rare classes.

The competition's 104 classes are very unequal in size and macro F1 weighs each the same: a
loss weighted by inverse class frequency ("balanced": n / (C * n_c), scikit-learn's
`compute_class_weight` formula, mean 1 over the training images) makes a rare class's image
count as much as a common one's. The weights reach the loss as per-example sample weights
from the input pipeline (`pipeline.train_dataset`): the one path that Keras takes under every
strategy and backend (MirroredStrategy, JAX DataParallel, one device), and that works with
one-hot mixed labels too (mixup, cutmix: an example's weight is the mix of its classes').
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from corolla.errors import UserError


def balanced(labels, num_classes: int) -> np.ndarray:
    """n / (C * n_c) for the classes present (C: how many are present); 1 for a class with no
    training image (it is never drawn)."""
    counts = np.bincount(np.asarray(labels, np.int64), minlength=num_classes)
    present = counts > 0
    weights = np.ones(num_classes)
    weights[present] = counts.sum() / (present.sum() * counts[present])
    return weights


def from_file(path: str | Path, class_names) -> np.ndarray:
    """A file of `class,weight` lines (the class by name or index; classes not listed: 1)."""
    index = {name: i for i, name in enumerate(class_names)}
    weights = np.ones(len(class_names))
    with Path(path).open(newline="", encoding="utf-8-sig") as f:
        for line, row in enumerate(csv.reader(f), 1):
            if not row or not "".join(row).strip() or row[0].startswith("#"):
                continue
            name = row[0]
            key = index.get(name, index.get(name.strip()))
            if key is None and name.strip().isdigit() and int(name) < len(class_names):
                key = int(name)
            try:
                value = float(row[1])
            except (IndexError, ValueError):
                value = -1.0
            if key is None or not np.isfinite(value) or value < 0:
                raise UserError(f"{path}, line {line}: expected class,weight with a class of "
                                f"the data (a name or an index below {len(class_names)}) and a "
                                f"weight of 0 or more, got {','.join(row)!r}")
            weights[key] = value
    return weights


def class_weights_for(setting: str, labels, class_names) -> np.ndarray | None:
    """The weight of each class (None: unweighted) for `train.class_weight`; `labels`: the
    training split's, for "balanced"."""
    if setting in ("", "none"):
        return None
    if setting == "balanced":
        return balanced(labels, len(class_names))
    return from_file(setting, class_names)
