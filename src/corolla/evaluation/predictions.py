"""Saved predictions: what a model said about every example of a split, kept as data.

`evaluate` and `predict` run the model once and their class probabilities are saved in this
format (`corolla.report.scored.save_predictions` writes it; `load` reads it), so that reports,
ensembles and k-fold scores are computed from the files without running a model again.

One file per split, `<folder>/predictions/<split>.npz` (a NumPy archive, read without pickle):

    ids            str      [N]     the split's ids, in the order the split is read (its files in
                                    sorted order, records in file order): the order of
                                    submission.csv's rows
    labels         int64    [N]     the true class of each id; -1 where unknown (the test split)
    probabilities  float32  [N, C]  the model's class probabilities, row i for ids[i]
    class_names    str      [C]     what column j stands for (the run's classes.txt)
    tta            int64    []      how many views of each image the probabilities average
                                    (test-time augmentation, `corolla.scoring.tta`); 1 =
                                    none. Files written before it existed lack it and read
                                    as 1.

Readers ignore keys they do not know, so that later writers may add some.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla.errors import UserError
from corolla.scoring.tta import NO_TTA
from corolla.files import check_declared
from corolla.runs.paths import predictions_file

UNKNOWN = -1  # the label of an example whose class is not known (test)
KEYS = ("ids", "labels", "probabilities", "class_names")


@dataclass(frozen=True)
class Predictions:
    ids: tuple[str, ...]
    labels: np.ndarray  # int64 [N], UNKNOWN where the class is not known
    probabilities: np.ndarray  # float32 [N, C]
    class_names: tuple[str, ...]
    tta: int = NO_TTA  # views averaged per image (test-time augmentation); 1 = none

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def labelled(self) -> bool:
        """Every example has its true class (a val split, not a test split)."""
        return bool(len(self.labels)) and bool((self.labels != UNKNOWN).all())

    @property
    def predicted(self) -> np.ndarray:
        return self.probabilities.argmax(axis=1)

    def in_order(self, ids) -> Predictions:
        """The same predictions, rows in the order of `ids` (the same set of ids): files written
        by runs that read the split in another order still pair each row with its own id."""
        ids = tuple(ids)
        row = {example_id: i for i, example_id in enumerate(self.ids)}
        if len(ids) != len(row) or any(i not in row for i in ids):
            raise ValueError("in_order needs the same ids as the predictions hold")
        order = np.fromiter((row[i] for i in ids), dtype=np.int64, count=len(ids))
        return Predictions(ids, self.labels[order], self.probabilities[order], self.class_names,
                           self.tta)


def path_in(folder: str | Path, split: str) -> Path:
    """Where the predictions of `split` live in a run (or an evaluation or ensemble) folder."""
    return predictions_file(folder, split)


def make(ids, labels, probabilities, class_names, tta: int = NO_TTA) -> Predictions:
    """Predictions from plain values, checked (ValueError says what is wrong). `labels` None:
    no class is known (test)."""
    ids = tuple(str(i) for i in ids)
    probabilities = np.asarray(probabilities, dtype=np.float32)
    labels = (np.full(len(ids), UNKNOWN, np.int64) if labels is None
              else np.asarray(labels).astype(np.int64).reshape(-1))
    class_names = tuple(str(name) for name in class_names)
    problem = _problem(ids, labels, probabilities, class_names)
    if problem:
        raise ValueError(problem)
    if int(tta) < 1:
        raise ValueError(f"tta counts views and must be at least 1, got {tta}")
    return Predictions(ids, labels, probabilities, class_names, int(tta))


def _problem(ids, labels, probabilities, class_names) -> str | None:
    """The first thing that makes these arrays not one split's predictions, or None."""
    if probabilities.ndim != 2:
        return f"probabilities must be [examples, classes], got shape {probabilities.shape}"
    n, c = probabilities.shape
    if len(ids) != n or len(labels) != n:
        return f"{len(ids)} ids, {len(labels)} labels and {n} rows of probabilities disagree"
    if c != len(class_names) or c == 0:
        return f"{c} columns of probabilities but {len(class_names)} class names"
    if len(set(ids)) != n:
        seen, repeated = set(), []
        for i in ids:
            if i in seen and i not in repeated:
                repeated.append(i)
            seen.add(i)
        return f"{n - len(seen)} duplicate ids (e.g. {', '.join(map(repr, repeated[:5]))})"
    outside = labels[(labels < UNKNOWN) | (labels >= c)]
    if len(outside):
        return (f"{len(outside)} labels outside [0, {c}) and not {UNKNOWN} (unknown), e.g. "
                f"{int(outside[0])}")
    if not np.isfinite(probabilities).all():
        rows = int((~np.isfinite(probabilities)).any(axis=1).sum())
        return f"{rows} rows of probabilities hold NaN or infinity"
    return None


# How far a saved row's sum may be from 1: float32 softmax outputs, averaged over views or
# blended with weights, stay within a few units in the 6th decimal.
SUM_TOLERANCE = 1e-3


def _not_probabilities(probabilities: np.ndarray) -> str | None:
    """What makes finite rows not class probabilities (a negative one, a row not summing to 1:
    scores or logits saved by another tool, which a blend or a threshold would misread), or
    None."""
    negative = (probabilities < 0).any(axis=1)
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        return (f"{int(negative.sum())} rows of probabilities hold negative values (e.g. row "
                f"{row}: {float(probabilities[row].min()):g}); they must be probabilities")
    sums = probabilities.sum(axis=1, dtype=np.float64)
    off = np.abs(sums - 1) > SUM_TOLERANCE
    if off.any():
        row = int(np.flatnonzero(off)[0])
        return (f"{int(off.sum())} rows of probabilities do not sum to 1 (e.g. row {row}: "
                f"{sums[row]:.6g}); they must be probabilities, not scores or logits")
    return None


def load(path: str | Path) -> Predictions:
    """A predictions file, checked as `make` checks its arrays; a file that is not one is a user
    error naming the file (it is data on disk, perhaps from another tool or a damaged copy)."""
    path = Path(path)
    again = "write it again with `corolla evaluate RUN` (val) or `corolla predict RUN` (test)"
    if not path.is_file():
        raise UserError(f"no predictions file {path}; {again}")
    try:
        check_declared(path, again)
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in KEYS if key not in archive.files]
            if missing:
                raise UserError(f"{path} is not a predictions file: it lacks "
                                f"{', '.join(missing)}; {again}")
            arrays = {key: archive[key] for key in KEYS}
            tta = archive["tta"] if "tta" in archive.files else np.int64(1)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{path} is not a predictions file Corolla can read ({e}); "
                        f"{again}") from None
    ids, names = arrays["ids"], arrays["class_names"]
    kinds = (ids.dtype.kind, names.dtype.kind, arrays["labels"].dtype.kind,
             arrays["probabilities"].dtype.kind)
    if kinds[0] != "U" or kinds[1] != "U" or kinds[2] not in "iu" or kinds[3] != "f":
        raise UserError(f"{path} holds arrays of the wrong types (ids and class_names must be "
                        f"strings, labels integers, probabilities floats); {again}")
    ids, names = tuple(ids.reshape(-1).tolist()), tuple(names.reshape(-1).tolist())
    labels = arrays["labels"].astype(np.int64).reshape(-1)
    probabilities = arrays["probabilities"].astype(np.float32)
    problem = _problem(ids, labels, probabilities, names) or _not_probabilities(probabilities)
    if problem:
        raise UserError(f"{path} is not one split's predictions: {problem}; {again}")
    if tta.shape != () or tta.dtype.kind not in "iu" or int(tta) < 1:
        raise UserError(f"{path} records {tta!r} views (tta), not a count of at least 1; "
                        f"{again}")
    return Predictions(ids, labels, probabilities, names, int(tta))
