"""Classification metrics as plain data (scikit-learn), defined as the competition scores them.

Kaggle scores macro F1 with scikit-learn's defaults: the average runs over the union of the true
and the predicted labels, so predicting a class that the split lacks costs a zero in the average.
A validation split (or a small data set of a few flowers) holds only some of the 104 classes; the
average over the classes present in `y_true` alone is kept beside it as `f1_macro_present`, for
comparison, never in place of the competition's figure.
"""

from __future__ import annotations

import numpy as np
from sklearn import metrics as skm


def classification_metrics(y_true, y_pred, class_names, interval: bool = True) -> dict:
    """The scores of one split; `interval`: with the bootstrap interval of macro F1."""
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
        # Two runs 0.005 apart on a few thousand images are not different: see the interval.
        **({"f1_macro_ci95": list(macro_f1_interval(y_true, y_pred))} if interval else {}),
        "precision_macro": float(skm.precision_score(y_true, y_pred, average="macro", **zero)),
        "recall_macro": float(skm.recall_score(y_true, y_pred, average="macro", **zero)),
        "f1_macro_present": float(skm.f1_score(y_true, y_pred, labels=present,
                                               average="macro", **zero)),
        "f1_per_class": {class_names[c]: float(f) for c, f in zip(scored, f1)},
        "per_class": [{"label": int(c), "name": class_names[c], "support": int(s),
                       "precision": float(p), "recall": float(r), "f1": float(f)}
                      for c, p, r, f, s in zip(scored, precision, recall, f1, support)],
    }


def confusion_table(y_true, y_pred) -> tuple[np.ndarray, list[int]]:
    """Row-normalised confusion matrix over the classes seen in labels or predictions."""
    labels = sorted(set(np.asarray(y_true).tolist()) | set(np.asarray(y_pred).tolist()))
    matrix = skm.confusion_matrix(y_true, y_pred, labels=labels, normalize="true")
    return np.nan_to_num(matrix), labels


def macro_f1(y_true, y_pred) -> float:
    """The competition's figure, the one definition every score of Corolla uses: scikit-learn's
    default macro F1 (per-class F1 = 2 TP / (true + predicted), averaged over the union of the
    true and the predicted classes), from counts: an ensemble's search scores hundreds of
    blends, and scikit-learn's checks would take most of its time.
    tests/evaluation/test_ensemble.py holds it equal to scikit-learn's."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    size = int(max(y_true.max(initial=0), y_pred.max(initial=0))) + 1
    tp = np.bincount(y_true[y_true == y_pred], minlength=size)
    both = np.bincount(y_true, minlength=size) + np.bincount(y_pred, minlength=size)
    scored = both > 0
    return float((2 * tp[scored] / both[scored]).mean()) if scored.any() else 0.0


BOOTSTRAP_RESAMPLES = 1000  # enough for the 2.5% and 97.5% quantiles to settle to ~0.003
CHUNK = 100  # draws computed together
BOOTSTRAP_SEED = 0  # fixed: the same interval for the same predictions, on every machine


def macro_f1_interval(y_true, y_pred, level: float = 0.95,
                      resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """The percentile bootstrap interval of `macro_f1` over images: the split's images drawn
    with replacement `resamples` times, macro F1 of each draw, the central `level` of them.
    It says how much the figure moves with the luck of which images a split holds (not with
    the training's seed). All draws at once, from counts: cheap enough to give with every score
    (figures: docs/benchmarks.md#figures-behind-the-defaults)."""
    y_true, y_pred = np.asarray(y_true, np.int64), np.asarray(y_pred, np.int64)
    n = len(y_true)
    if n == 0:
        return (0.0, 0.0)
    size = int(max(y_true.max(), y_pred.max())) + 1
    rng = np.random.default_rng(seed)
    f1 = []
    for start in range(0, resamples, CHUNK):  # bounded memory for any split
        k = min(CHUNK, resamples - start)
        draws = rng.integers(0, n, size=(k, n))
        offsets = (np.arange(k)[:, None] * size)  # each draw's own block of counts
        t, p = y_true[draws] + offsets, y_pred[draws] + offsets
        tp = np.bincount(t[t == p], minlength=k * size).reshape(k, size)
        both = (np.bincount(t.ravel(), minlength=k * size) +
                np.bincount(p.ravel(), minlength=k * size)).reshape(k, size)
        scored = both > 0
        f1.append(np.where(scored, 2 * tp / np.maximum(both, 1), 0.0).sum(1) / scored.sum(1))
    f1 = np.concatenate(f1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(f1, [tail, 100 - tail])
    return (float(low), float(high))


def f1_text(m: dict) -> str:
    """"macro F1 0.8123 (95% CI 0.7951-0.8290)" of a metrics dict (without the interval when
    it has none: metrics.json written before intervals were)."""
    interval = m.get("f1_macro_ci95")
    ci = f" (95% CI {interval[0]:.4f}-{interval[1]:.4f})" if interval else ""
    return f"macro F1 {m['f1_macro']:.4f}{ci}"
