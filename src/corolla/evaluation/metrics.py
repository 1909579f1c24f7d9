"""Classification metrics as plain data (scikit-learn), defined as the competition scores them.

Kaggle scores macro F1 with scikit-learn's defaults: the average runs over the union of the true
and the predicted labels, so predicting a class that the split lacks costs a zero in the average.
A validation split (or a small data set like flowers5) holds only some of the 104 classes; the
average over the classes present in `y_true` alone is kept beside it as `f1_macro_present`, for
comparison, never in place of the competition's figure.
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm


def classification_metrics(y_true, y_pred, class_names) -> dict:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    present = sorted(set(y_true.tolist()))
    scored = sorted(set(y_true.tolist()) | set(y_pred.tolist()))  # scikit-learn's default set
    zero = dict(zero_division=0)
    precision, recall, f1, support = skm.precision_recall_fscore_support(
        y_true, y_pred, labels=scored, average=None, **zero)
    return {
        "num_examples": int(len(y_true)),
        "num_classes_present": len(present),
        "num_classes_scored": len(scored),
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "f1_macro": macro_f1(y_true, y_pred),
        "precision_macro": float(skm.precision_score(y_true, y_pred, average="macro", **zero)),
        "recall_macro": float(skm.recall_score(y_true, y_pred, average="macro", **zero)),
        "f1_macro_present": float(skm.f1_score(y_true, y_pred, labels=present,
                                               average="macro", **zero)),
        "f1_per_class": {class_names[c]: float(f) for c, f in zip(scored, f1)},
        "per_class": [{"label": int(c), "name": class_names[c], "support": int(s),
                       "precision": float(p), "recall": float(r), "f1": float(f)}
                      for c, p, r, f, s in zip(scored, precision, recall, f1, support)],
    }


def confusion(y_true, y_pred) -> tuple[np.ndarray, list[int]]:
    """Row-normalised confusion matrix over the classes seen in labels or predictions."""
    labels = sorted(set(np.asarray(y_true).tolist()) | set(np.asarray(y_pred).tolist()))
    matrix = skm.confusion_matrix(y_true, y_pred, labels=labels, normalize="true")
    return np.nan_to_num(matrix), labels


def macro_f1(y_true, y_pred) -> float:
    """The competition's figure, the one definition every score of Corolla uses: scikit-learn's
    default macro F1 (per-class F1 = 2 TP / (true + predicted), averaged over the union of the
    true and the predicted classes), from counts: an ensemble's search scores hundreds of
    blends, and scikit-learn's checks would take most of its time. tests/test_ensemble.py holds
    it equal to scikit-learn's."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    size = int(max(y_true.max(initial=0), y_pred.max(initial=0))) + 1
    tp = np.bincount(y_true[y_true == y_pred], minlength=size)
    both = np.bincount(y_true, minlength=size) + np.bincount(y_pred, minlength=size)
    scored = both > 0
    return float((2 * tp[scored] / both[scored]).mean()) if scored.any() else 0.0
