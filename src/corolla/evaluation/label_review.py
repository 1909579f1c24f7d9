"""Labels that look wrong, from predictions on images the model did not train on (a k-fold
run's out-of-fold predictions, or a run's val predictions): confident learning (Northcutt,
Jiang and Chuang, "Confident Learning: Estimating Uncertainty in Dataset Labels", JAIR 2021),
as cleanlab's `find_label_issues` does it by default, without the dependency.

Each class j gets a threshold: the mean probability the model gives j on the images labelled
j (how sure it is of that class when the label is right, most of the time), at most `CAP`.
An image labelled y is doubted when some other class j reaches its own threshold on it (it
lands off the diagonal of the "confident joint"); the class suggested is the most probable of
those. The doubted images are ranked by margin, p(suggested) - p(given): the model most sure
of another class and least of the given one first. Pure: returns data, writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corolla.evaluation.predictions import Predictions


@dataclass(frozen=True)
class Doubt:
    index: int  # row of the predictions
    id: str
    given: int  # the label the data gives
    suggested: int  # the class the model is confident of instead
    p_given: float
    p_suggested: float

    @property
    def margin(self) -> float:
        return self.p_suggested - self.p_given


# A class the model gives more than this is one it is confident of, whatever the class's
# mean: on a model that is right and sure (90%) of nearly every image, a flipped label whose
# true class gets 85% would otherwise be missed (measured: a third of 5% flipped labels).
CAP = 0.5


def thresholds(probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per class: the mean probability of the class over the images labelled with it, at most
    `CAP` (above 1, never reached, for a class no image is labelled with)."""
    c = probabilities.shape[1]
    out = np.full(c, 2.0)
    for j in np.unique(labels):
        out[j] = min(probabilities[labels == j, j].mean(), CAP)
    return out


def review(predictions: Predictions) -> list[Doubt]:
    """The images whose label the model doubts (see the module), most doubtful first."""
    if not predictions.labelled:
        raise ValueError("label review needs labelled predictions (val or out-of-fold)")
    p, y = predictions.probabilities.astype(np.float64), predictions.labels
    rows = np.arange(len(y))
    confident = p >= thresholds(p, y)[None, :]
    confident[rows, y] = False  # another class than the given one
    doubted = np.flatnonzero(confident.any(axis=1))
    suggested = np.where(confident[doubted], p[doubted], -1.0).argmax(axis=1)
    margin = p[doubted, suggested] - p[doubted, y[doubted]]
    order = np.lexsort((doubted, -margin))  # ties: in the predictions' order
    return [Doubt(int(doubted[k]), predictions.ids[doubted[k]], int(y[doubted[k]]),
                  int(suggested[k]), float(p[doubted[k], y[doubted[k]]]),
                  float(p[doubted[k], suggested[k]])) for k in order]
