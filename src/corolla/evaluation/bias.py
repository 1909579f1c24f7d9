"""Decisions made for macro F1: one additive offset per class on the log-probabilities.

A model trained on unequal classes puts less probability on the rare ones, and argmax then
under-predicts them; macro F1 weighs every class the same, so a missed rare class costs as much
as a missed common one. The offsets b maximise macro F1 of argmax(log p + b) on held-out
predictions (val, or a k-fold run's out-of-fold ones), found by coordinate ascent: class by
class, the best offset on a grid with the others fixed, until a round changes nothing. With one
class's offset varying, each image's answer is either that class or the best of the others, so
every grid point costs one pass over the images.

Offsets fitted on a split score optimistically on that split. `cross_fitted` gives the honest
figure: the images split in two stratified halves, offsets fitted on each half and scored on
the other, both halves' decisions pooled.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from corolla.errors import UserError, shown
from corolla.scoring.metrics import macro_f1
from corolla.files import read_json
from corolla.runs.paths import BIAS

GRID = np.round(np.linspace(-3.0, 3.0, 61), 2)  # offsets tried, in log-probability (x e^3)
ROUNDS = 5  # at most; it usually settles in two or three
EPS = 1e-12  # log(0) guard: a probability of exactly 0 stays the least likely


def log_probabilities(probabilities) -> np.ndarray:
    return np.log(np.maximum(np.asarray(probabilities, np.float64), EPS))


def decide(probabilities, offsets) -> np.ndarray:
    """The classes chosen with `offsets` (argmax of log p + b)."""
    return (log_probabilities(probabilities) + np.asarray(offsets)).argmax(axis=1)


def adjusted(probabilities, offsets) -> np.ndarray:
    """Probabilities re-weighted by exp(offsets) and renormalised: their argmax is `decide`'s.
    Decision scores, not calibrated probabilities."""
    scores = log_probabilities(probabilities) + np.asarray(offsets)
    scores = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (scores / scores.sum(axis=1, keepdims=True)).astype(np.float32)


def fit(probabilities, labels, grid=GRID, rounds: int = ROUNDS) -> np.ndarray:
    """Offsets [C] maximising macro F1 of `decide` on (probabilities, labels), from 0: a class
    the grid cannot improve, or with no image here, keeps 0."""
    logp = log_probabilities(probabilities)
    labels = np.asarray(labels)
    classes = logp.shape[1]
    offsets = np.zeros(classes)
    best = macro_f1(labels, (logp + offsets).argmax(1))
    # A class with no image here can only gain false positives: its offset stays 0.
    present = np.unique(labels)
    for _ in range(rounds):
        changed = False
        for c in present:
            scores = logp + offsets
            scores[:, c] = -np.inf
            other, other_best = scores.argmax(1), scores.max(1)
            for value in grid:
                f1 = macro_f1(labels, np.where(logp[:, c] + value > other_best, c, other))
                if f1 > best + 1e-12:
                    best, offsets[c], changed = f1, value, True
        if not changed:
            break
    return offsets


def _halves(labels, seed: int) -> np.ndarray:
    """0/1 per image: two halves stratified by class (a class of one image goes to either)."""
    rng = np.random.default_rng(seed)
    half = np.zeros(len(labels), np.int64)
    for c in np.unique(labels):
        where = rng.permutation(np.flatnonzero(labels == c))
        half[where[rng.integers(2)::2]] = 1
    return half


def cross_fitted(probabilities, labels, seed: int = 0) -> dict:
    """Macro F1 of argmax and of offsets fitted on the other half of the images (see the
    module), on the same images: the honest comparison."""
    probabilities, labels = np.asarray(probabilities), np.asarray(labels)
    half = _halves(labels, seed)
    fitted = np.empty(len(labels), np.int64)
    for h in (0, 1):
        train, test = half != h, half == h
        fitted[test] = decide(probabilities[test], fit(probabilities[train], labels[train]))
    return {"images": len(labels), "argmax": macro_f1(labels, probabilities.argmax(1)),
            "fitted": macro_f1(labels, fitted), "method": "2-fold cross-fitting (stratified "
            "halves): offsets fitted on one half, scored on the other"}


def record(offsets, class_names, fitted_on: str, held_out: dict) -> dict:
    """What bias.json holds: the offsets by class name, and how they were fitted and scored."""
    return {"offsets": {name: float(b) for name, b in zip(class_names, offsets)},
            "fitted_on": fitted_on, "images": held_out["images"],
            "held_out_macro_f1": {"argmax": held_out["argmax"], "fitted": held_out["fitted"],
                                  "method": held_out["method"]},
            "method": f"coordinate ascent on macro F1, offsets in log-probability on the grid "
                      f"{GRID[0]:g}..{GRID[-1]:g} step {GRID[1] - GRID[0]:g}"}


def load_offsets(run_dir, class_names) -> np.ndarray:
    """The run's fitted offsets [C], in the order of `class_names`."""
    path = Path(run_dir) / BIAS
    if not path.is_file():
        raise UserError(f"{run_dir} has no fitted offsets ({path}); fit them first with "
                        f"`corolla evaluate {run_dir} --fit-bias`, or leave out --bias")
    fix = f"fit them again with `corolla evaluate {run_dir} --fit-bias`"
    record = read_json(path, fix)
    offsets = record.get("offsets") if isinstance(record, dict) else None
    if not isinstance(offsets, dict):
        raise UserError(f"{path} holds no table of offsets by class; {fix}")
    missing = [name for name in class_names if name not in offsets]
    extra = [name for name in offsets if name not in set(class_names)]
    if missing or extra:
        what = f"no offset for class {missing[0]!r}" if missing else \
            f"an offset for {shown(extra[0])}, which is not a class of the run"
        raise UserError(f"{path} holds {what} ({len(missing)} missing, {len(extra)} not the "
                        f"run's); {fix}")
    # Python's json reads NaN and Infinity: one such offset made every row the same class.
    wrong = [name for name in class_names if type(offsets[name]) not in (int, float) or
             not math.isfinite(offsets[name])]
    if wrong:
        raise UserError(f"{path} holds {shown(offsets[wrong[0]])} as the offset of class "
                        f"{wrong[0]!r}, not a finite number; {fix}")
    return np.array([float(offsets[name]) for name in class_names])
