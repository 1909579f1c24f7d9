"""Experiment tracking (`--track mlflow|wandb`, output.track): a run also sent to MLflow or to
Weights & Biases: its resolved config as parameters, every epoch's row of history.csv as it is
committed, the final scores (macro F1 with its interval) and report.html, history.csv and the
confusion matrix as files. The tracked run is named after the run folder; its id is kept in
RUN/tracking.json, so a resumed run continues the same tracked run and `corolla evaluate` and
`corolla ensemble` join it.

Each library's client, not its Keras integration: `mlflow.keras.autolog` (documented up to
Keras 3.13) and W&B's `WandbMetricsLogger` log at Keras' epoch end, before Corolla's checkpoint
commits the epoch, so an epoch trained again after a kill would be logged twice (MLflow keeps
every value), and they know neither the epoch's learning rate as history.csv has it nor the
run's later evaluations. Here an epoch is logged once its backup is written
(`training.callbacks.TrackEpochs`), at step = its number, and a resumed run first logs the
committed epochs its tracked run lacks.

A k-fold run (`--folds K`) is tracked as a whole: its parent folder is a tracked run of its
own (the config, then the pooled out-of-fold scores as final/NAME and the parent's report) and
each fold's run is its child, in the parent's store: in MLflow nested under it (the tag
mlflow.parentRunId, by which MLflow's UI nests runs), in W&B in its group (the parent folder's
name; job_type "kfold" for the parent's run, "fold" for the folds', W&B's way of grouping
cross-validation).

Only the chief tracks. A tracker that fails mid-run (its server gone) says so once and stops;
the run goes on. A missing package or an unreachable server is one line before training
(`check`). mlflow and wandb are imported only where a tracker is used: with `none` (the
default) neither is ever imported.

Each library's tracker is a module of its own, implementing `base.Tracker`; this package keeps
the trackers open in this process and ends them.

    base: the interface every tracker implements (and the no-op tracker), the scores sent
    mlflow_tracker: MLflow through `MlflowClient`: its store, server probe and run
    wandb_tracker: Weights & Biases through its `Run` object, online or offline
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from corolla.config import flatten
from corolla.errors import UserError
from corolla.stopping import Interrupted
from corolla.files import read_json, regular_file_inside, write_json
from corolla.runs import paths
from corolla.runs.tracking.base import (FINAL, MLFLOW, NONE, PROJECT, WANDB, Tracker, said,
                                        scores)
from corolla.runs.tracking.mlflow_tracker import MLflowTracker
from corolla.runs.tracking.wandb_tracker import WandbTracker

__all__ = ["FINAL", "MLFLOW", "NONE", "PROJECT", "WANDB", "Tracker", "check", "ended_on_error",
           "finish", "for_run", "scores", "send_scored", "start"]

_TRACKERS: dict[str, type[Tracker]] = {MLFLOW: MLflowTracker, WANDB: WandbTracker}
_open: dict[Path, Tracker] = {}  # the tracked runs open in this process, by run folder


def check(kind: str, runs_dir: str | Path) -> None:
    """Before training (on the chief): the tracker's package importable and, for an MLflow
    server, the server answering, or one line saying what to do, within seconds."""
    if kind == NONE:
        return
    _TRACKERS[kind].library()
    _TRACKERS[kind].check(runs_dir)


def start(config, run_dir: Path, resume: bool, log=print) -> Tracker:
    """The tracker of a run about to train (or of a k-fold parent about to train its folds): a
    new tracked run, named after the run folder, with the config as parameters; or, for a
    continued run, the one RUN/tracking.json names. A fold of a k-fold run whose parent is
    tracked in this process is its child; once the parent's tracking has stopped, its folds
    are not tracked either, and a fold's run that cannot start stops it (one line: the k-fold
    run goes on)."""
    kind = config.output.track
    if kind == NONE:
        return Tracker()
    record = _read(run_dir) if resume else None
    parent = _open.get(run_dir.parent.resolve()) if config.data.fold else None
    if parent is not None and parent.kind == kind:
        tracker = parent._safely("starting a fold's run", _open_run, kind, config, run_dir,
                                 record, parent, log) or Tracker()
    else:
        tracker = _open_run(kind, config, run_dir, record, None, log)
    _open[run_dir.resolve()] = tracker
    return tracker


def for_run(run_dir: str | Path, log=print) -> Tracker:
    """The tracked run of a run folder, open in this process or joined again from its
    tracking.json (where `corolla evaluate` and `ensemble` log); a no-op tracker for a run that
    is not tracked. A tracker that cannot be joined says so and is a no-op: the command goes
    on."""
    run_dir = Path(run_dir)
    if run_dir.resolve() in _open:
        return _open[run_dir.resolve()]
    record = _read(run_dir)
    if record is None:
        return Tracker()
    try:
        tracker = _resume(record, run_dir, log)
    except Exception as e:  # a UserError too: scores are written whether or not they are sent
        log(f"not sent to {record.get('tracker')}: {said(e)}")
        return Tracker()
    _open[run_dir.resolve()] = tracker
    return tracker


def finish(run_dir: str | Path | None, log=print, files=(), status: str = "FINISHED") -> None:
    """Ends this process's session of the run's tracked run (if one is open), `files` sent
    first. `status`: FINISHED, FAILED or KILLED."""
    if run_dir is None:
        return
    tracker = _open.pop(Path(run_dir).resolve(), None)
    if tracker is not None:
        tracker.log_files([f for f in map(Path, files) if regular_file_inside(f.parent, f.name)],
                          Path(run_dir))
        tracker.close(status)


@contextlib.contextmanager
def ended_on_error(run_dir: Path, log=print, interrupted: bool = True):
    """`with tracking.ended_on_error(run_dir, log):` around a tracked run's work: a block that
    raises ends the run's tracked run, KILLED by a KeyboardInterrupt (Ctrl-C, SIGTERM, SIGHUP)
    and FAILED by any other exception, which goes on up. A block that returns leaves it open:
    its evaluation and report are sent before `finish` ends it FINISHED.

    `interrupted`: the KeyboardInterrupt raised again as `Interrupted(run_dir)`, whose message
    says how to continue the run; False: raised as it came (a k-fold run's fold loop names the
    run to continue itself)."""
    try:
        yield
    except KeyboardInterrupt:
        finish(run_dir, log, status="KILLED")
        if interrupted:
            raise Interrupted(run_dir) from None
        raise
    except BaseException:
        finish(run_dir, log, status="FAILED")
        raise


def send_scored(run_dir: str | Path, folder: str | Path, metrics: dict, log=print) -> None:
    """A scored folder's metrics and files into the run's tracked run, if it has one: the run's
    own (as final/NAME, with history.csv) or an eval-<data>/ or ensemble folder's (as
    <folder>/NAME, its files under <folder>/)."""
    tracker = for_run(run_dir, log)
    if tracker.kind == NONE:
        return
    folder = Path(folder)
    own = folder.resolve() == Path(run_dir).resolve()
    tracker.log_scores(metrics, FINAL if own else folder.name)
    files = [folder / name for name in (paths.METRICS, paths.CONFUSION, paths.CURVES,
                                        paths.REPORT)]
    files += [folder / paths.HISTORY] if own else []
    # A link is not sent: it would put the file it points to on the tracking server.
    tracker.log_files([f for f in files if regular_file_inside(f.parent, f.name)],
                      folder if own else folder.parent)


def _open_run(kind: str, config, run_dir: Path, record: dict | None, parent, log) -> Tracker:
    if record is not None:
        return _resume(record, run_dir, log)
    tracker = _new(kind, config, run_dir, parent, log)
    write_json(tracker.record, run_dir / paths.TRACKING)
    return tracker


def _new(kind: str, config, run_dir: Path, parent: Tracker | None, log) -> Tracker:
    """A new tracked run; `parent`: the k-fold parent's (open) tracker of a fold's run."""
    params = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v
              for k, v in flatten(config.to_dict()).items()}
    tags = {"corolla.run_dir": str(run_dir.resolve())}
    if config.output.run_id:  # (a k-fold parent has none: its folds do)
        tags["corolla.run_id"] = config.output.run_id
    return _TRACKERS[kind].new(config, run_dir, params, tags, parent, log)


def _resume(record: dict, run_dir: Path, log) -> Tracker:
    kind, run_id = record.get("tracker"), record.get("run_id")
    if kind not in (MLFLOW, WANDB) or not run_id:
        raise UserError(f"{run_dir / paths.TRACKING} names no tracked run; move it away to "
                        f"track the run anew")
    _TRACKERS[kind].library()
    return _TRACKERS[kind].resume(record, run_dir, log)


def _read(run_dir: Path) -> dict | None:
    path = Path(run_dir) / paths.TRACKING
    if not path.is_file():
        return None
    return read_json(path, "move it away to track the run anew")
