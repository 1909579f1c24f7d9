"""Ensembles: a weighted average of several runs' saved class probabilities.

The best public "Petals to the Metal" notebooks blend two backbones' probabilities with a weight
chosen on val. Here the members are folders holding saved predictions
(`corolla.evaluation.predictions`: a run after `corolla evaluate` and `corolla predict`, a
RUN/eval-<data>/ folder, or another ensemble), so no model runs again. `auto` weights maximise
the blend's val macro F1, the competition's metric: every point of a grid over the simplex (step
0.05) for two or three members, coordinate ascent from the best of equal weights and each member
alone for more. The members alone are candidates, so the blend never scores below its best
member on val; equal weights win every tie, since the weights that score best on val by a hair
are the least likely to score best on test. The blend's val scores are then optimistic (the
weights were fitted on val), which metrics.json says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla.errors import UserError
from corolla.scoring.metrics import classification_metrics, macro_f1_interval
from corolla.evaluation import predictions
from corolla.scoring.metrics import macro_f1
from corolla.evaluation.predictions import Predictions
from corolla.files import read_json
from corolla.runs import paths

STEP = 0.05  # weight resolution of the search
GRID_MEMBERS = 3  # up to this many members, every point of the grid is tried (231 for three)
MAX_SWEEPS = 50  # coordinate ascent stops earlier, after a sweep that improves nothing


@dataclass
class Member:
    folder: Path
    val: Predictions
    test: Predictions | None


@dataclass
class Ensemble:
    members: list[Member]
    weights: np.ndarray  # one per member, summing to 1
    search: str  # how the weights were chosen, for people
    member_f1: list[float]  # each member's val macro F1
    val: Predictions  # the blend
    test: Predictions | None


def load_member(folder: str | Path) -> Member:
    """A folder's saved val (required) and test (if saved) predictions."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder; pass run folders, e.g. runs/<run>")
    val, test = (predictions.path_in(folder, split) for split in ("val", "test"))
    if not val.is_file():
        raise UserError(f"{folder} has no saved predictions ({val} is missing); run "
                        f"`corolla evaluate {folder}` and `corolla predict {folder}` first")
    member = Member(folder, predictions.load(val),
                    predictions.load(test) if test.is_file() else None)
    if not member.val.labelled:
        raise UserError(f"{val} holds no true labels for some ids; an ensemble is weighted "
                        f"and scored on a labelled val split: run `corolla evaluate {folder}`")
    if member.test is not None and member.test.class_names != member.val.class_names:
        raise UserError(f"{folder}'s val and test predictions name other classes; run "
                        f"`corolla evaluate {folder}` and `corolla predict {folder}` again")
    return member


def _same_classes(first: Member, other: Member) -> None:
    a, b = first.val.class_names, other.val.class_names
    if a == b:
        return
    if len(a) != len(b):
        differ = f"{len(b)} classes, not {len(a)}"
    else:
        j = next(j for j, (x, y) in enumerate(zip(a, b)) if x != y)
        differ = f"class {j} is {b[j]!r}, not {a[j]!r}"
    raise UserError(f"{other.folder} predicts other classes than {first.folder} ({differ}); "
                    f"ensemble runs trained on the same classes")


def _aligned(first: Predictions, other: Predictions, what: str) -> Predictions:
    """`other` in the order of `first`'s ids; other ids (a run evaluated on other data) are an
    error, since averaging would pair one example's probabilities with another's."""
    if other.ids == first.ids:
        return other
    theirs, ours = set(other.ids), set(first.ids)
    missing = [i for i in first.ids if i not in theirs]
    extra = [i for i in other.ids if i not in ours]
    if missing or extra:
        example = repr((missing or extra)[0])
        raise UserError(f"{what} cover other ids ({len(missing)} missing, {len(extra)} extra, "
                        f"e.g. {example}); ensemble runs scored on the same data (pass "
                        f"RUN/eval-<data> folders for runs evaluated on other data)")
    return other.in_order(first.ids)


def _runs_in(folder: Path, within: frozenset = frozenset()) -> set[Path]:
    """The runs whose predictions a member's hold: itself, or an ensemble's members (its
    metrics.json names them), recursively; `within`: the ensembles on the way here (a
    metrics.json naming one of them, or its own folder, names no further run)."""
    folder = Path(folder).resolve()
    path = folder / paths.METRICS
    if folder in within or not path.is_file():
        return {folder}
    record = read_json(path, f"run `corolla evaluate {folder}` again")
    members = record.get("members") if isinstance(record, dict) else None
    if not isinstance(members, list):
        return {folder}
    return set().union(*(_runs_in(Path(m["folder"]), within | {folder}) for m in members
                         if isinstance(m, dict) and isinstance(m.get("folder"), str))) or {folder}


def load_members(folders) -> list[Member]:
    """The members, each aligned by id to the first one's order, all checked to hold the same
    classes and ids (and the same true val labels); either all or none hold test predictions."""
    odd = [f for f in folders if not isinstance(f, (str, os.PathLike))]
    if odd:
        raise UserError(f"an ensemble's members are run folders (paths), got {odd[0]!r} "
                        f"({type(odd[0]).__name__}); give each run's folder")
    folders = [Path(f) for f in folders]
    if len(folders) < 2:
        raise UserError(f"an ensemble needs at least two runs, got {len(folders)}")
    seen: dict[Path, Path] = {}
    for folder in folders:
        if folder.resolve() in seen:
            raise UserError(f"{folder} is given twice (as {seen[folder.resolve()]}); give each "
                            f"run once and weight it with --weights")
        seen[folder.resolve()] = folder
    within: dict[Path, Path] = {}  # each run -> the member holding it (itself, or an ensemble)
    for folder in folders:
        for run in _runs_in(folder):
            if run in within:
                raise UserError(f"{run} is in both {within[run]} and {folder} (an ensemble "
                                f"holding it), so the blend would count it twice; give each "
                                f"run once and weight it with --weights")
            within[run] = folder
    members = [load_member(f) for f in folders]
    first = members[0]
    for member in members[1:]:
        _same_classes(first, member)
        member.val = _aligned(first.val, member.val,
                              f"{member.folder}'s val predictions and {first.folder}'s")
        differ = np.flatnonzero(member.val.labels != first.val.labels)
        if len(differ):
            raise UserError(f"{member.folder} and {first.folder} disagree on the true class of "
                            f"{len(differ)} val ids (e.g. {first.val.ids[differ[0]]!r}); "
                            f"ensemble runs scored on the same data")
    with_test = [m.folder for m in members if m.test is not None]
    if with_test and len(with_test) != len(members):
        lacking = next(m.folder for m in members if m.test is None)
        raise UserError(f"{lacking} has no saved test predictions "
                        f"({predictions.path_in(lacking, 'test')}) while {with_test[0]} "
                        f"has; run `corolla predict {lacking}` first")
    for member in members[1:]:
        if member.test is not None:
            member.test = _aligned(first.test, member.test,
                                   f"{member.folder}'s test predictions and {first.folder}'s")
    return members


def parse_weights(text: str, members: int) -> np.ndarray | None:
    """None for "auto", else the given weights (w1,w2,...), one per member, normalised to sum
    to 1 (so 2,1 means 2/3, 1/3)."""
    if text.strip() == "auto":
        return None
    try:
        weights = np.array([float(w) for w in text.split(",")])
    except ValueError:
        raise UserError(f"--weights takes auto or one number per run, e.g. 0.6,0.4; got "
                        f"{text!r}") from None
    if len(weights) != members:
        raise UserError(f"--weights has {len(weights)} numbers for {members} runs ({text!r}); "
                        f"give one per run, in the order of the runs")
    if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise UserError(f"--weights must be numbers >= 0, not all 0; got {text!r}")
    return weights / weights.sum()


def _mix(weights: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """The weighted average of [members, N, C] probabilities, as float32: the search scores
    exactly the probabilities that are saved (a float64 blend could argmax otherwise)."""
    return np.tensordot(weights, stack, axes=1).astype(np.float32)


def blend(parts: list[Predictions], weights) -> Predictions:
    """The weighted average of aligned predictions (same ids, order and classes)."""
    stack = np.stack([p.probabilities for p in parts])
    first = parts[0]
    return Predictions(first.ids, first.labels, _mix(np.asarray(weights, np.float64), stack),
                       first.class_names)


def _simplex(members: int, step: float) -> list[np.ndarray]:
    """Every weight vector with entries in multiples of `step` that sum to 1."""
    parts = round(1 / step)

    def compositions(n: int, total: int):
        if n == 1:
            yield (total,)
            return
        for first in range(total, -1, -1):
            for rest in compositions(n - 1, total - first):
                yield (first, *rest)

    return [np.array(c, np.float64) / parts for c in compositions(members, parts)]


def search_weights(val: list[Predictions], step: float = STEP) -> tuple[np.ndarray, str]:
    """(weights, how they were found) maximising the blend's val macro F1; see the module."""
    # float64 once (exactly the float32 values): `_mix` would convert them at every score.
    stack = np.stack([p.probabilities for p in val]).astype(np.float64)
    labels, n = val[0].labels, len(val)
    equal = np.full(n, 1 / n)

    def score(w) -> float:
        return macro_f1(labels, _mix(w, stack).argmax(axis=1))

    def nearest_equal(candidates):  # ties go to the weights nearest equal ones
        return min(candidates, key=lambda c: float(((c[0] - equal) ** 2).sum()))

    if n <= GRID_MEMBERS:
        scored = [(w, score(w)) for w in [equal, *_simplex(n, step)]]
        best = max(s for _, s in scored)
        return (nearest_equal([c for c in scored if c[1] == best])[0],
                f"auto: every point of a grid over the simplex (step {step:g}) and equal "
                f"weights, by val macro F1, ties to the weights nearest equal ones")
    alone = [np.eye(n)[i] for i in range(n)]
    scored = [(w, score(w)) for w in [equal, *alone]]
    best_score = max(s for _, s in scored)
    weights, best_score = nearest_equal([c for c in scored if c[1] == best_score])
    steps = np.arange(round(1 / step) + 1) * step
    for _ in range(MAX_SWEEPS):
        improved = False
        for i in range(n):
            rest = weights.copy()
            rest[i] = 0.0
            share = rest / rest.sum() if rest.sum() > 0 else (1 - np.eye(n)[i]) / (n - 1)
            for t in steps:
                candidate = share * (1 - t)
                candidate[i] = t
                s = score(candidate)
                if s > best_score:  # only a strict gain moves away from the weights held
                    weights, best_score, improved = candidate, s, True
        if not improved:
            break
    return (weights / weights.sum(), f"auto: coordinate ascent (step {step:g}) by val macro "
                                     f"F1, from the best of equal weights and each member alone")


def build(folders, weights: str | list[float] | None = "auto") -> Ensemble:
    """Loads, checks and blends the members' predictions (nothing is written). `weights`:
    "auto", "w1,w2,..." or a list of numbers, one per member."""
    members = load_members(folders)
    if isinstance(weights, str):
        given = parse_weights(weights, len(members))
    elif weights is None:
        given = None
    else:
        given = parse_weights(",".join(str(w) for w in weights), len(members))
    vals = [m.val for m in members]
    if given is None:
        given, search = search_weights(vals)
    else:
        search = "given (--weights), normalised to sum to 1"
    tests = [m.test for m in members]
    return Ensemble(
        members, given, search,
        member_f1=[macro_f1(v.labels, v.predicted) for v in vals],
        val=blend(vals, given),
        test=blend(tests, given) if tests[0] is not None else None)


def metrics(ensemble: Ensemble) -> dict:
    """The blend's val metrics (as `corolla evaluate` reports a run's) with its members, their
    val macro F1 and weights, and how the weights were chosen."""
    val = ensemble.val
    result = classification_metrics(val.labels, val.predicted, val.class_names)
    result["split"] = "val"
    result["members"] = [{"folder": str(m.folder.resolve()), "weight": float(w),
                          "f1_macro": f1, "f1_macro_ci95": list(macro_f1_interval(
                              m.val.labels, m.val.predicted))}
                         for m, w, f1 in zip(ensemble.members, ensemble.weights,
                                             ensemble.member_f1)]
    result["weights"] = [float(w) for w in ensemble.weights]
    result["weights_search"] = ensemble.search
    if ensemble.search.startswith("auto"):
        result["note"] = ("the weights were chosen on this val split, so these val scores "
                          "are optimistic; test scores are the honest figure")
    return result
