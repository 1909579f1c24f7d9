"""The linear head: a converged multinomial logistic regression on a run's cached frozen
features, the floor a timed run never ends below.

A timed run's fine-tuning gets what epochs the host's speed allows; on a slow host that was
less than a logistic regression on the same frozen features reaches in seconds. So a timed run
whose first phase trains on cached features (`features.FrozenPath`) first fits this head there
(scikit-learn's lbfgs), writes it into the model's own classifier (`probabilities`: kernel =
coef.T, bias = intercept), scores it on val with the run's macro F1, and keeps it as the best
so far (`checkpoint.Checkpoint.seed`): fine-tuning starts from it, and a fine-tuned epoch is
kept only where it beats it on val. A budget too short for a thawed epoch ends with it, as
does a fine-tuning that fails; a refit whose run kept it fits it again on train + val.

Plain NumPy and scikit-learn, no Keras import: `put` sets the weights through the model it is
given."""

from __future__ import annotations

import math

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from corolla.scoring.metrics import macro_f1

# The default inverse regularisation strength, the first `choose_c` tries (docs/benchmarks.md,
# "The linear head, a timed run's floor"). The images' mirror images as extra rows did not
# help (and doubled the fit's time): the head fits on the images as they are.
C = 0.01
MAX_ITER = 1000
# The inverse regularisation strengths `choose_c` tries on val, the fixed C first. On the
# suite's five sets (Lite0, 192 px; docs/benchmarks.md) this coarse grid never chose below the
# fixed C's test score, where a finer one (0.001 to 1, a factor of 3 apart) overfit the few val
# photos (textures: 0.003, -0.017); the fixed C alone lost 0.07 on the fine-grained cars.
GRID = (0.01, 0.1, 1.0)
# A class the training split lacks gets no weights and a bias this far below the lowest of the
# training examples' top logits: never predicted on data like them, and its share of a
# label-smoothed loss stays moderate for the epochs that train from it.
ABSENT_MARGIN = 10.0


def fit(features: np.ndarray, labels, num_classes: int, class_weights=None,
        c: float = C) -> tuple[np.ndarray, np.ndarray]:
    """(kernel [D, num_classes], bias [num_classes]) of a multinomial logistic regression of
    `labels` on `features` [N, D], with each class weighted by `class_weights` (per class, or
    None). Classes absent from `labels` get no weights and a bias below every training
    example's top logit (ABSENT_MARGIN)."""
    labels, x = np.asarray(labels), np.asarray(features, np.float32)
    weights = None if class_weights is None else np.asarray(class_weights, np.float64)[labels]
    present = np.unique(labels)
    kernel = np.zeros((x.shape[1], num_classes), np.float32)
    bias = np.zeros(num_classes, np.float32)
    if len(present) == 1:  # nothing to separate: the one class always
        bias[:] = -ABSENT_MARGIN
        bias[present[0]] = 0.0
        return kernel, bias
    model = LogisticRegression(C=c, max_iter=MAX_ITER)
    # One thread: a problem this small gains nothing from BLAS's and OpenMP's threads, and on
    # a busy host their spinning waits multiply its time (figures: docs/benchmarks.md, "Figures
    # behind the defaults").
    with threadpool_limits(1):
        model.fit(x, labels, sample_weight=weights)
    coef, intercept = model.coef_, model.intercept_
    if len(present) == 2:  # scikit-learn keeps one row of a binary problem: its two logits
        coef, intercept = np.stack([-coef[0] / 2, coef[0] / 2]), \
            np.array([-intercept[0] / 2, intercept[0] / 2])
    kernel[:, present] = coef.T
    bias[present] = intercept
    if len(present) < num_classes:
        absent = np.setdiff1d(np.arange(num_classes), present)
        bias[absent] = (x @ kernel[:, present] + bias[present]).max(axis=1).min() - \
            ABSENT_MARGIN
    return kernel, bias


def choose_c(train: np.ndarray, labels, val: np.ndarray, val_labels, num_classes: int,
             class_weights=None, grid=GRID) -> tuple[float, dict[float, float]]:
    """(the C of `grid` whose head, fit on `train`, scores the best val macro F1; each C's
    score). A tie (few val photos score several C alike) goes to the C nearest the fixed `C`
    (by ratio), then to the smaller: the choice moves off the default only for a gain."""
    scores = {c: score(val, val_labels, *fit(train, labels, num_classes, class_weights, c))
              for c in grid}
    return _best(scores), scores


def choose_c_cv(features: np.ndarray, labels, num_classes: int, class_weights=None,
                grid=GRID, folds: int = 3, seed: int = 0) -> tuple[float, dict[float, float]]:
    """(the C of `grid` whose heads score the best mean macro F1 over `folds` stratified folds
    of `features`, each fit on the others; each C's mean): `choose_c` on every photo instead
    of one val split's few. Ties as there. At most as many folds as the rarest class has
    photos (at least 2)."""
    labels = np.asarray(labels)
    k = max(2, min(folds, int(np.bincount(labels)[np.unique(labels)].min())))
    splits = list(StratifiedKFold(k, shuffle=True, random_state=seed).split(features, labels))
    scores = {c: float(np.mean([score(features[b], labels[b],
                                      *fit(features[a], labels[a], num_classes,
                                           class_weights, c)) for a, b in splits]))
              for c in grid}
    return _best(scores), scores


def _best(scores: dict[float, float]) -> float:
    """The C of the best score; of tied ones the nearest `C` by ratio, then the smaller."""
    best = max(scores.values())
    tied = [c for c, f in scores.items() if f >= best - 1e-9]
    return min(tied, key=lambda c: (round(abs(math.log(c / C)), 6), c))


def probabilities(features: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """The softmax of the head's logits on `features` [N, D]."""
    logits = np.asarray(features, np.float64) @ kernel + bias
    logits -= logits.max(axis=1, keepdims=True)
    out = np.exp(logits)
    return out / out.sum(axis=1, keepdims=True)


def score(features: np.ndarray, labels, kernel: np.ndarray, bias: np.ndarray) -> float:
    """Macro F1 of the head on `features` against `labels`, as the run scores its epochs."""
    return macro_f1(np.asarray(labels), (np.asarray(features, np.float64) @ kernel + bias)
                    .argmax(axis=1))


def put(model, kernel: np.ndarray, bias: np.ndarray) -> None:
    """The head's weights into `model`'s classifier (`probabilities`)."""
    model.get_layer("probabilities").set_weights([kernel, bias])


def verdict(head_f1: float, epochs_f1, frozen=frozenset()) -> tuple[bool, str]:
    """(whether the run keeps the linear head, the line that says why): kept unless a
    fine-tuned epoch's val macro F1 (`epochs_f1`, one per epoch; None: not validated) beats
    its `head_f1`, as the checkpoint keeps the best. The epochs of `frozen` (counted from 0)
    trained the head alone on the same features: never kept over it (`Checkpoint.may_keep`)."""
    scored = {i: f for i, f in enumerate(epochs_f1) if f is not None and np.isfinite(f)}
    rivals = {i: f for i, f in scored.items() if i not in frozen}
    if not rivals:
        if not scored:
            return True, f"no trained epoch was validated: kept the linear head (val macro " \
                f"F1 {head_f1:.4f})"
        return True, f"no epoch that trained the backbone was validated: kept the linear " \
            f"head (val macro F1 {head_f1:.4f}; the frozen epochs' best, " \
            f"{max(scored.values()):.4f}, is the same head on the same features fit on train " \
            f"alone)"
    best = max(rivals, key=lambda i: (rivals[i], -i))
    if rivals[best] > head_f1:
        return False, f"training beat the linear head on val ({rivals[best]:.4f} > " \
            f"{head_f1:.4f}): kept epoch {best + 1}"
    return True, f"training did not beat the linear head on val ({rivals[best]:.4f} <= " \
        f"{head_f1:.4f}): kept the linear head"
