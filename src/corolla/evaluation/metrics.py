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
        "f1_macro": float(skm.f1_score(y_true, y_pred, average="macro", **zero)),
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
