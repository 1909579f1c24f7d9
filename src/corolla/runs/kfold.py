"""The k-fold parent: a run folder (`corolla train --folds K`) that holds K fold runs and their
pooled scores, not a model of its own."""

from __future__ import annotations

from pathlib import Path

from corolla.config import RunConfig
from corolla.errors import UserError
from corolla.runs.paths import METRICS, SUBMISSION, fold_name


def is_parent(config: RunConfig) -> bool:
    """Whether a run of this config is a k-fold parent (a fold's own run is not)."""
    return bool(config.train.folds) and not config.data.fold


def refuse_parent(run_dir: str | Path, config: RunConfig) -> None:
    """A k-fold parent (`run_dir`, its `config`) holds no model of its own: evaluate and
    predict take one of its folds."""
    if is_parent(config):
        submission = Path(run_dir) / SUBMISSION
        averaged = f", its averaged test predictions in {submission}" if submission.is_file() \
            else " (the data has no test split: no averaged test predictions)"
        raise UserError(f"{run_dir} is a k-fold run: it has no model of its own; evaluate or "
                        f"predict one of its folds ({Path(run_dir) / fold_name(1)} ...). Its "
                        f"out-of-fold scores are in {Path(run_dir) / METRICS}{averaged}")
