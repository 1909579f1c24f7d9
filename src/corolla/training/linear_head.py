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

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from corolla.scoring.metrics import macro_f1

# The inverse regularisation strength: scikit-learn's default, the linear probe's, so the head a
# run starts from and falls back to is the probe it is measured against. Chosen on val from
# 0.01, 0.1 and 1 instead, over the suite's five sets and four rungs (docs/benchmarks.md, "The
# linear head's levers"), the head scored lower on the mean at two rungs of four, as high at a
# third and 0.0012 higher at the fourth, and the few val photos picked 0.01 where it lost up to
# 0.025 on test.
C = 1.0
MAX_ITER = 1000
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
