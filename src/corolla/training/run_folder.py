"""The run's folder opened for training, once its data and model are known to work: a new
run's made and recorded, or a continued run's session recorded.

`checkpoint` (which imports Keras) is imported in the function: the backend is chosen
first."""

from __future__ import annotations

from pathlib import Path

from corolla import models
from corolla.runs import paths, rundir
from corolla.runtime import Plan
from corolla.training.preparing import Prepared


def open_folder(ready: Prepared, plan: Plan, log, resume) -> tuple[Path | None, Path]:
    """(run folder, backup folder): a new run's folder made and recorded by the chief, or the
    continued run's session recorded (with the history its backup holds: a kill may have come
    between the backup and history.csv)."""
    from corolla.training.backup import write_history

    config, run_dir, backup_dir = ready.config, ready.run_dir, ready.backup_dir
    if plan.is_chief and not resume:
        run_dir = rundir.create(config.output.runs_dir, config.output.name,
                                models.short_name(config.model.name))
        rundir.claim(run_dir, log)
        backup_dir = run_dir / paths.BACKUP
        rundir.record(run_dir, config, plan, ready.layout.class_names)
        log(f"run directory: {run_dir}")
    elif plan.is_chief:
        rundir.record_session(run_dir, plan)
        if ready.state.history:
            write_history(ready.state.history, run_dir / paths.HISTORY)
        log(f"resuming {run_dir} after epoch {ready.state.epochs_done} of "
            f"{config.train.epochs}")
        if config.train.time_plan:
            spent = ready.state.history[-1].get("seconds", 0.0) if ready.state.history else 0
            log(f"time {config.train.time_budget}: continuing its plan ({config.train.time_plan})"
                f"; {spent / 60:.1f} min spent before (up to the last completed epoch)")
    return run_dir, backup_dir
