"""Refit (`train.refit`): once a run is validated, its model trained again from the same start
on train + val, the photos val held back included, and saved as refit.keras, which predicts
the test split (submission.csv); the run's val scores stay its validated model's (model.keras),
measured before the refit and only on photos that model never trained on.

The refit trains as many epochs as the validated model took (its best epoch by val macro F1),
on the same schedule, each epoch a pass over train + val (its steps scaled by their photos).
With a time budget, the plan gave the validated training its share (`budget.validated_share`);
what is left when it ends decides how many of those epochs the refit can take in the same
pace, on the schedule reshaped to them (`budget.shaped`), or none (then the validated model
predicts). The plan is written once (refit.json), before the refit trains: a refit killed
midway continues from its own backup (refit-backup/) on that plan.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

from corolla import config as config_lib
from corolla.data import folds
from corolla.errors import UserError
from corolla.files import read_history, read_json, write_json
from corolla.runs import paths, rundir
from corolla.runtime import Plan
from corolla.training import budget, saving
from corolla.training.determinism import set_determinism
from corolla.training.preparing import Prepared, epoch_steps
from corolla.training.settings import resolve
from corolla.training.trainer import Trainer


def check_plan(plan: Plan) -> None:
    """A refit trains in the chief's process alone: refused before anything is trained where
    several processes would train the run."""
    if plan.multi_worker:
        raise UserError("--refit (train.refit) trains in one process; a multi-worker run "
                        "predicts with its validated model: drop --refit, or train on one host")


def validated_epochs(history: list[dict]) -> int:
    """The epochs the validated model (model.keras) took: up to its best by val macro F1 (the
    first of the best, as the checkpoint keeps it), or all of them without val scores."""
    from corolla.training.callbacks import VAL_F1

    scores = [row.get(VAL_F1) for row in history]
    if not history or any(s is None for s in scores):
        return len(history)
    return scores.index(max(scores)) + 1


def make_plan(run_dir: Path, config: config_lib.RunConfig, steps: int, counts: tuple[int, int],
              log, room=None) -> dict:
    """The refit's plan, written to refit.json: its `epochs` (trained), the config `settings`
    it trains with, its `steps` per epoch, and the `photos` it trains on. `steps`: the validated
    run's per epoch; `counts`: (train, val) photos. `room`: (seconds left, each validated
    epoch's seconds, the step's tracing) under a time budget: the epochs that fit at the
    validated epochs' pace."""
    history = read_history(run_dir / paths.HISTORY)
    train, val = counts
    scale = (train + val) / train
    epochs = validated_epochs(history)
    settings = {"train.early_stopping_patience": 0,
                "train.time_steps": math.ceil(steps * scale)}
    if room is not None:
        left, each, tracing = room
        fit, spent = 0, tracing
        for seconds in each[:epochs]:
            spent += seconds * scale
            if spent > left:
                break
            fit += 1
        if fit < epochs:
            log(f"time {config.train.time_budget}: {left:.0f} s left, room for {fit} of the "
                f"{epochs} epochs in the refit" + ("" if fit else
                                                   ": the validated model predicts the test "
                                                   "split"))
            if fit:  # a fresh start: its whole schedule fitted to the epochs it has
                settings.update(budget.shaped(config.train, fit))
            epochs = fit
    record = {"epochs": epochs, "settings": settings, "photos": train + val,
              "validated_epochs": validated_epochs(history)}
    write_json(record, run_dir / paths.REFIT_PLAN)
    return record


def plan_in_time(run_dir: Path, ready: Prepared, history: list[dict], began: float,
                 val_count: int, log) -> None:
    """The refit's plan, right after the validated training of this session (`ready`, with its
    time plan's deadline where it made one), in the time its budget has left."""
    deadline, t = ready.deadline, ready.config.train
    room = None
    if deadline is not None:
        total = config_lib.duration_seconds(t.time_budget)
        left = budget.REPLAN_SHARE * total - (time.monotonic() - began) - deadline.save
        tracing = max(deadline.costs.first.values(), default=0.0)
        room = (left, deadline.took(history), tracing)
    make_plan(run_dir, ready.config, ready.steps,
              (ready.layout.split("train").count, val_count), log, room)


def train(run_dir: Path, plan: Plan, log) -> Path | None:
    """Trains the refit of the trained run `run_dir` on its plan (refit.json; made now, with
    no time budget's room, where a run was stopped before it was written): returns refit.keras,
    or None where the plan has no epoch. Continues a refit killed midway from its backup."""
    from corolla.training.checkpoint import read_state

    check_plan(plan)
    config, layout = resolve(rundir.read(run_dir)[1], plan, resume=True, log=lambda *args: None)
    record_path = run_dir / paths.REFIT_PLAN
    record = read_json(record_path, "remove it to plan the refit again") \
        if record_path.is_file() else \
        make_plan(run_dir, config, epoch_steps(config.train, plan, lambda *a: None)[0],
                  (layout.split("train").count, layout.split("val").count), log)
    epochs = int(record["epochs"])
    if epochs < 1:
        return None
    config = config_lib.apply(config, record["settings"])
    set_determinism(config, plan)
    steps, steps_per_execution = epoch_steps(config.train, plan, log)
    backup_dir = run_dir / paths.REFIT_BACKUP
    state = read_state(backup_dir)
    ready = Prepared(config, folds.with_val_in_train(layout), run_dir, backup_dir, state, steps,
                     steps_per_execution, None)
    log(f"refit: the model trained again from the start on train + val ({record['photos']} "
        f"photos), {epochs} epoch{'s' * (epochs != 1)} of {steps} steps"
        + (f", continuing after epoch {state.epochs_done}" if state.epochs_done else ""))
    began = time.monotonic()
    trainer = Trainer(ready, plan, log)
    saved = trainer.saved_model()
    trainer.start()
    checkpoint = trainer.callbacks(run_dir, backup_dir, saved, None, began,
                                   history=run_dir / paths.REFIT_HISTORY)
    trainer.restore(checkpoint)
    trainer.fit_phases(until=epochs)
    path = run_dir / paths.REFIT
    saving.write_final(trainer.model, saved, path, config.output.run_id)
    shutil.rmtree(backup_dir, ignore_errors=True)
    log(f"refit: {path} written ({(time.monotonic() - began) / 60:.1f} min); it predicts the "
        f"test split, model.keras (validated) keeps the val scores")
    return path
