"""Training: `run(config, plan)` is what `corolla train` and `corolla demo` call, a run's story
from its settings to its saved model. Each step is a module of this package: `preparing`
(settings, backup, epoch length), `trainer` (the model through its phases), `time_plan` (a
time budget), `run_folder`, `summary` (what the log says) and `saving`.
"""

from __future__ import annotations

import time
from pathlib import Path

from corolla import config as config_lib
from corolla.data import check, pipeline
from corolla.files import write_json
from corolla.runs import paths, tracking
from corolla.runtime import Plan
from corolla.training import lr_find as lr_find_lib
from corolla.training import refit, saving, summary
from corolla.training.preparing import Prepared, prepare
from corolla.training.run_folder import open_folder
from corolla.training.saving import TrainResult
from corolla.training.time_plan import plan_time, replan
from corolla.training.trainer import Trainer


def run(config: config_lib.RunConfig, plan: Plan, log=print, resume: Path | None = None,
        callbacks=(), lr_find: lr_find_lib.RangeSettings | None = None) -> TrainResult:
    """Trains into a new run directory, or continues the interrupted run `resume` (its
    config, from its last completed epoch). `callbacks` are added to Corolla's own.
    `lr_find`: a new run's peak learning rate is found first by the range test on its own
    model (`lr_find.find_rate`; in a time budget's time), which then trains from the weights it
    had before the test, at the rate suggested (config.toml's train.learning_rate; the test
    in lr_find.json).

    The run's model.keras is its best epoch by val macro F1; last.keras its last epoch."""
    began = time.monotonic()  # a time budget counts from here (`budget`)
    log = log if plan.is_chief else (lambda *args: None)
    if config.train.refit:
        refit.check_plan(plan)
    ready = prepare(config, plan, log, resume)
    # Data and model come first: a failure there (a split smaller than one batch, weights that
    # will not load) leaves no empty run behind.
    val_split, val_labels = _val_split(ready)
    trainer = Trainer(ready, plan, log, callbacks)
    found = None
    if lr_find is not None and resume is None:
        found = lr_find_lib.train_at_found_rate(trainer, lr_find, config.train, log)
        ready = trainer.ready
    if ready.to_plan:
        ready = plan_time(trainer, val_split, began, log)
        trainer.follow(ready)
    saved = trainer.saved_model()
    trainer.start()  # before the folder too: a pipeline that cannot be built leaves no run
    run_dir, backup_dir = open_folder(ready, plan, log, resume)
    if found is not None and plan.is_chief:  # its picture is drawn from it (`report`)
        write_json(found.to_dict(), run_dir / paths.LR_FIND)
    # Only the chief tracks; its tracked run stays open for the run's evaluation
    # (`tracking.finish` ends it).
    tracker = tracking.start(ready.config, run_dir, resume is not None, log) \
        if plan.is_chief else None
    checkpoint = trainer.callbacks(run_dir, backup_dir, saved, (val_split, val_labels), began,
                                   tracker)
    trainer.restore(checkpoint)
    if tracker is not None:  # committed epochs a kill kept from their tracked run
        tracker.log_epochs(checkpoint.state.history)
    summary.log_training(ready, plan, log)
    # A Ctrl-C raises `Interrupted`, whose message says how to continue the run; the tracked
    # run ends KILLED (FAILED on an error) here.
    with tracking.ended_on_error(run_dir, log):
        # A plan made in this session is made again from the pace of its first epoch trained
        # on images (`time_plan.replan`).
        if trainer.fit_phases(until=ready.deadline.replan_after if ready.deadline else 0):
            replan(trainer, run_dir, log)
            trainer.fit_phases()
        result = saving.save(trainer.model, saved, checkpoint.state, plan, run_dir, backup_dir,
                             ready.config.output.run_id, log)
        summary.log_time_spent(trainer.ready.config.train, checkpoint.spent(), log)
        if ready.config.train.refit and resume is None:  # a resumed one: `refit.train`
            refit.plan_in_time(run_dir, trainer.ready, checkpoint.state.history, began,
                               val_split.count, log)
        return result


def _val_split(ready: Prepared) -> tuple:
    """(the val split, checked against the run's classes, its labels)."""
    skip = ready.config.data.skip_bad_records
    split = check.check_split(ready.layout.split("val"), len(ready.layout.class_names),
                              skip_bad_records=skip)
    return split, pipeline.metadata(split, skip)["labels"]
