"""Run directories: one per run, never silently overwritten.

    runs/<model>-<YYYYmmdd-HHMMSS>/
        config.toml  model.keras  history.csv  metrics.json  submission.csv  *.png  logs/
"""

from __future__ import annotations

import time
from pathlib import Path

from corolla import config as config_lib
from corolla.errors import UserError

CONFIG = "config.toml"
MODEL = "model.keras"
HISTORY = "history.csv"
METRICS = "metrics.json"
SUBMISSION = "submission.csv"
CONFUSION = "confusion_matrix.png"
CURVES = "training_curves.png"
SAMPLES = "sample_predictions.png"
BACKUP = "backup"  # Keras BackupAndRestore state while training; gone once the run finishes


def create(runs_dir: str | Path, name: str, default_prefix: str) -> Path:
    """A new, empty run directory. An explicit name that exists is an error; a generated one
    gets a numeric suffix instead (two runs started in the same second)."""
    runs_dir = Path(runs_dir)
    if name:
        path = runs_dir / name
        if path.exists():
            raise UserError(f"run directory {str(path)!r} already exists; choose another --name "
                            f"or move the old run away")
        path.mkdir(parents=True)
        return path
    base = f"{default_prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    for suffix in ["", *(f"-{i}" for i in range(2, 1000))]:
        path = runs_dir / f"{base}{suffix}"
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise UserError(f"could not create a new run directory under {str(runs_dir)!r}")


def _open(run_dir: str | Path) -> tuple[Path, bool]:
    """(folder, finished?) of a run directory; anything else is a user error."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG).is_file():
        raise UserError(f"{str(run_dir)!r} is not a run directory (no {CONFIG}); pass a folder "
                        f"written by `corolla train`, e.g. runs/<run>")
    return run_dir, (run_dir / MODEL).is_file()


def load(run_dir: str | Path) -> tuple[Path, config_lib.RunConfig]:
    """The run's folder and resolved config; a folder that is not a finished run is an error."""
    run_dir, finished = _open(run_dir)
    if not finished:
        raise UserError(f"run {str(run_dir)!r} has no {MODEL}: its training did not finish; "
                        f"continue it with `corolla train --resume {run_dir}`")
    return run_dir, config_lib.load(run_dir / CONFIG)


def load_unfinished(run_dir: str | Path) -> tuple[Path, config_lib.RunConfig]:
    """An interrupted run to resume: its folder and config. A finished run is not trained
    again (that would overwrite its model)."""
    run_dir, finished = _open(run_dir)
    if finished:
        raise UserError(f"run {str(run_dir)!r} already finished (it has {MODEL}); evaluate or "
                        f"predict with it, or start a new run")
    return run_dir, config_lib.load(run_dir / CONFIG)
