"""Classification metrics as plain data (scikit-learn), over the classes present in the labels.

The competition scores macro F1 over its 104 classes; a validation split (or a small data set
like flowers5) holds only some of them, and averaging in classes with no examples would only
add zeros, so the average runs over the classes that appear in `y_true`.
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm


def classification_metrics(y_true, y_pred, class_names) -> dict:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    labels = sorted(set(y_true.tolist()))
    kw = dict(labels=labels, average="macro", zero_division=0)
    per_class = skm.f1_score(y_true, y_pred, labels=labels, average=None, zero_division=0)
    return {
        "num_examples": int(len(y_true)),
        "num_classes_present": len(labels),
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "f1_macro": float(skm.f1_score(y_true, y_pred, **kw)),
        "precision_macro": float(skm.precision_score(y_true, y_pred, **kw)),
        "recall_macro": float(skm.recall_score(y_true, y_pred, **kw)),
        "f1_per_class": {class_names[c]: float(f) for c, f in zip(labels, per_class)},
    }


def confusion(y_true, y_pred) -> tuple[np.ndarray, list[int]]:
    """Row-normalised confusion matrix over the classes seen in labels or predictions."""
    labels = sorted(set(np.asarray(y_true).tolist()) | set(np.asarray(y_pred).tolist()))
    matrix = skm.confusion_matrix(y_true, y_pred, labels=labels, normalize="true")
    return np.nan_to_num(matrix), labels
