"""The scores of a k-fold run, from its folds' saved predictions alone: every train+val example
scored by the one model that never trained on it (out-of-fold), and the folds' test
probabilities averaged."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla.errors import UserError
from corolla.scoring.metrics import classification_metrics
from corolla.evaluation import predictions
from corolla.evaluation.predictions import Predictions


@dataclass
class Pooled:
    oof: Predictions  # every train+val id once, in the assignment's order
    metrics: dict  # the out-of-fold scores, with each fold's own (per_fold)
    test: Predictions | None  # the mean of the folds' test probabilities; None if any lacks it


def pool_folds(assignment, fold_dirs: list[Path], class_names, split: str) -> Pooled:
    """`assignment`: the parent's `data.folds.Assignment`; `fold_dirs`: fold 1..K's run
    folders, each holding its held-out fold's val predictions (and its test predictions).
    `split` names the pooled split in the metrics (the run-folder format's "oof")."""
    held_out = [predictions.load(predictions.path_in(d, "val")) for d in fold_dirs]
    per_fold = []
    for fold, (d, p) in enumerate(zip(fold_dirs, held_out), 1):
        expected = {i for i, f in zip(assignment.ids, assignment.folds) if f == fold}
        if set(p.ids) != expected:
            raise UserError(f"{predictions.path_in(d, 'val')} does not hold fold {fold}'s "
                            f"{len(expected)} ids; evaluate that fold again (`corolla evaluate "
                            f"{d}`)")
        scores = classification_metrics(p.labels, p.predicted, p.class_names,
                                        interval=False)
        per_fold.append({"fold": fold, "num_examples": len(p), "accuracy": scores["accuracy"],
                         "f1_macro": scores["f1_macro"]})
    oof = predictions.make(
        [i for p in held_out for i in p.ids], np.concatenate([p.labels for p in held_out]),
        np.concatenate([p.probabilities for p in held_out]), class_names
    ).in_order(assignment.ids)
    m = classification_metrics(oof.labels, oof.predicted, class_names)
    m.update(split=split, folds=len(fold_dirs), per_fold=per_fold)
    tests = [predictions.path_in(d, "test") for d in fold_dirs]
    test = None
    if all(path.is_file() for path in tests):
        loaded = [predictions.load(path) for path in tests]
        first = loaded[0]
        mean = np.mean([p.in_order(first.ids).probabilities for p in loaded], axis=0)
        test = predictions.make(first.ids, None, mean, class_names)
    return Pooled(oof, m, test)
