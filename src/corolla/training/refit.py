"""Refit (`train.refit`): once a run is validated, its model trained again from the same start on
train + val, the photos val held back included, and saved as refit.keras, which predicts the
test split (submission.csv); the run's val scores stay its validated model's (model.keras),
measured before the refit and only on photos that model never trained on.

The refit trains the epochs the validated run trained (`refit_epochs`), on the same schedule,
each epoch a pass over train + val (its steps scaled by their photos). With a time budget, the
plan gave the validated training its share (`budget.validated_share`: the two estimated on the
probe's costs); what is left when it ends decides how many of those epochs the refit can take at
the pace the validated ones kept, on the schedule reshaped to them (`budget.shaped`), or none
(then the validated model predicts); where all of them fit with time to spare, each is made
longer to use it (`LONGEST`). The plan is written once (refit.json), before the refit
trains: a refit killed midway continues from its own backup (refit-backup/) on that plan.

A timed run that kept its linear head (`linear_head`; linear_head.json says) repeats that
recipe instead: the logistic regression fit again on the frozen features of train + val, no
epoch trained. It was fit there when the head was, from the features at hand
(`saving.head_refit` writes it); a run folder without that fit extracts them again
(`linear_head_refit`).
"""

from __future__ import annotations

import itertools
import shutil
import time
from pathlib import Path

from corolla.config import RunConfig, TrainConfig, with_settings
from corolla.data import folds
from corolla.errors import UserError
from corolla.files import read_history, read_json, write_json
from corolla.runs import paths, rundir
from corolla.runtime import Plan
from corolla.training import saving
from corolla.training.timing import budget
from corolla.training.timing.plan import RefitRoom
from corolla.runtime.clock import default_clock
from corolla.training.backup import BackupState, read_state
from corolla.training.preparing import Prepared, epoch_steps, set_determinism
from corolla.training.settings import resolve
from corolla.training.trainer import Trainer


def check_plan(plan: Plan) -> None:
    """A refit trains in the chief's process alone: refused before anything is trained where
    several processes would train the run."""
    if plan.multi_worker:
        raise UserError("--refit (train.refit) trains in one process; a multi-worker run "
                        "predicts with its validated model: drop --refit, or train on one host")


def refit_epochs(history: list[dict], train: TrainConfig) -> int:
    """The epochs the refit trains: every epoch the validated run trained, its schedule to its
    end; where early stopping ended it (`stopped_early`), up to its best epoch by val macro F1
    (the first of the best, as the checkpoint keeps it). Not the best epoch otherwise: on a
    plateau it is the val split's noise (Caltech-101 at 10 photos a class, `--time 10m`: epoch
    6 of 12 was the best on val, 0.9038, and scored 0.8710 on the test photos, where the last
    scored 0.8858)."""
    from corolla.training.callbacks import VAL_F1

    scores = [row.get(VAL_F1) for row in history]
    if not stopped_early(history, train) or any(s is None for s in scores):
        return len(history)
    return scores.index(max(scores)) + 1


def stopped_early(history: list[dict], train: TrainConfig) -> bool:
    """Whether early stopping ended the validated run before its epochs."""
    return bool(train.early_stopping_patience) and len(history) < train.epochs


# A refit whose epochs all fit in the time left with room to spare trains each longer, at most
# this many times its pass over train + val, to use that room (a validated training of many
# classes at 10 photos each left a fifth of a 10-minute budget unused: an epoch more and its
# refit were a sixth of it, and did not fit; at 1.5 the bound held and 13% was left). Its
# epochs and their schedule stay the validated run's; the bound keeps the refit near the
# training val measured. Not where early stopping ended the validated run: more training is
# what val found worse.
LONGEST = 2.0


def make_plan(run_dir: Path, config: RunConfig, steps: int, counts: tuple[int, int],
              log, room: RefitRoom | None = None) -> dict:
    """The refit's plan, written to refit.json: its `epochs` (trained), the config `settings`
    it trains with, its `steps` per epoch, and the `photos` it trains on; where the run kept
    its linear head, no epoch and `linear_head` (`linear_head_refit`). `steps`: the validated
    run's per epoch; `counts`: (train, val) photos. `room`: under a time budget, the time the
    validated training left (`timing.plan.RefitRoom`): the epochs that fit, or where all fit
    with time to spare, their steps lengthened (`longer`)."""
    history = read_history(run_dir / paths.HISTORY)
    train, val = counts
    if kept_linear_head(run_dir):
        record = {"epochs": 0, "settings": {}, "photos": train + val,
                  "validated_epochs": len(history), "linear_head": True}
        write_json(record, run_dir / paths.REFIT_PLAN)
        return record
    epochs = refit_epochs(history, config.train)
    each_steps = budget.refit_steps(steps, counts)
    settings = {"train.early_stopping_patience": 0, "train.time_steps": each_steps}
    if room is not None:
        left, each_at = room.left, room.each_at
        fit = sum(1 for end in itertools.accumulate(each_at(each_steps)[:epochs])
                  if end <= left)
        if fit < epochs:
            log(f"time {config.train.time_budget}: {left:.0f} s left, room for {fit} of the "
                f"{epochs} epochs in the refit" + ("" if fit else
                                                   ": the validated model predicts the test "
                                                   "split"))
            if fit:  # a fresh start: its whole schedule fitted to the epochs it has
                settings.update(budget.shaped(config.train, fit))
            epochs = fit
        elif epochs and not stopped_early(history, config.train):
            longer = _longer(each_at, each_steps, epochs, left)
            if longer > each_steps:
                log(f"time {config.train.time_budget}: {left:.0f} s left, room for the refit's "
                    f"{epochs} epochs at {longer} steps each (of {each_steps}, a pass over "
                    f"train + val)")
                settings["train.time_steps"] = longer
    record = {"epochs": epochs, "settings": settings, "photos": train + val,
              "validated_epochs": len(history)}
    write_json(record, run_dir / paths.REFIT_PLAN)
    return record


def _longer(each_at, steps: int, epochs: int, left: float) -> int:
    """The most steps an epoch, from `steps` up to LONGEST times them, whose `epochs` epochs
    (`each_at(steps)`: their seconds) end within `left` seconds."""
    return budget.most(lambda n: sum(each_at(n)[:epochs]) <= left, steps, int(LONGEST * steps))


def train(run_dir: Path, plan: Plan, log, timed: RefitRoom | None = None) -> Path | None:
    """Trains the refit of the trained run `run_dir` on its plan (refit.json; made now, with
    no time budget's room, where a run was stopped before it was written): returns refit.keras,
    or None where the plan has no epoch. Continues a refit killed midway from its backup.
    `timed`: the room its time plan gave it, where it stops short of its plan to end inside the
    budget (`timing.plan.TimePlan.refit_room`, in the session that planned it)."""
    check_plan(plan)
    config, layout = resolve(rundir.read(run_dir)[1], plan, resume=True, log=lambda *args: None)
    record_path = run_dir / paths.REFIT_PLAN
    record = _read_plan(record_path, config) if record_path.is_file() else \
        make_plan(run_dir, config, epoch_steps(config.train, plan, lambda *a: None)[0],
                  (layout.split("train").count, layout.split("val").count), log)
    if record.get("linear_head"):
        return linear_head_refit(run_dir, config, layout, plan, log, record["photos"])
    epochs = record["epochs"]
    if epochs < 1:
        return None
    # Its epochs all of one length (the plan's steps), whatever the validated run's were.
    config = with_settings(config, {"train.time_steps_from": 0,
                                    "train.time_steps_later": 0,
                                    **record["settings"]})
    set_determinism(config, plan)
    steps, steps_per_execution = epoch_steps(config.train, plan, log)
    backup_dir = run_dir / paths.REFIT_BACKUP
    state = read_state(backup_dir)
    clock = default_clock() if timed is None else timed.clock
    began = clock.now()
    ready = Prepared(config, folds.with_val_in_train(layout), run_dir, backup_dir, state, steps,
                     steps_per_execution, None,
                     None if timed is None else timed.deadline(began, epochs, steps))
    log(f"refit: the model trained again from the start on train + val ({record['photos']} "
        f"photos), {epochs} epoch{'s' * (epochs != 1)} of {steps} steps"
        + (f", continuing after epoch {state.epochs_done}" if state.epochs_done else ""))
    trainer = Trainer(ready, plan, log, clock=clock)
    saved = trainer.saved_model()
    trainer.start()
    checkpoint = trainer.callbacks(run_dir, backup_dir, saved, None, began,
                                   history=run_dir / paths.REFIT_HISTORY)
    trainer.restore(checkpoint)
    trainer.fit_phases(until=epochs)
    path = run_dir / paths.REFIT
    saving.write_final(trainer.model, saved, path, config.output.run_id)
    shutil.rmtree(backup_dir, ignore_errors=True)
    log(f"refit: {path} written ({clock.since(began) / 60:.1f} min); it predicts the "
        f"test split, model.keras (validated) keeps the val scores")
    return path


def kept_linear_head(run_dir: Path) -> bool:
    """Whether the trained run `run_dir` kept its linear head (linear_head.json, which a timed
    run that fit one writes when its training ends)."""
    path = run_dir / paths.LINEAR_HEAD
    if not path.is_file():
        return False
    record = read_json(path, "train the run again")
    kept = record.get("kept") if isinstance(record, dict) else None
    if not isinstance(kept, bool):
        raise UserError(f"{path} is not a linear head's record Corolla wrote; train the run "
                        f"again")
    return kept


def linear_head_refit(run_dir: Path, config: RunConfig, layout, plan: Plan, log,
                      photos: int) -> Path:
    """refit.keras of a run that kept its linear head: the model built as the run's, its
    classifier the logistic regression fit on the frozen features of train + val
    (`features.FrozenPath.fit_linear_head`). Seconds beyond the features: nothing to back up,
    a kill starts it over."""
    began = time.monotonic()
    set_determinism(config, plan)
    steps, steps_per_execution = epoch_steps(config.train, plan, lambda *a: None)
    ready = Prepared(config, folds.with_val_in_train(layout), run_dir, None, BackupState(),
                     steps, steps_per_execution, None)
    log(f"refit: the run kept its linear head: the logistic regression fit again on the "
        f"frozen features of train + val ({photos} photos)")
    trainer = Trainer(ready, plan, log)
    saved = trainer.saved_model()
    trainer.frozen.cache(config.model.input_size, ready, None, False)
    trainer.frozen.fit_linear_head(ready, None, None, trainer.stream.class_weights)
    path = run_dir / paths.REFIT
    saving.write_final(trainer.model, saved, path, config.output.run_id)
    log(f"refit: {path} written ({(time.monotonic() - began) / 60:.1f} min); it predicts the "
        f"test split, model.keras (validated) keeps the val scores")
    return path


def _read_plan(path: Path, config: RunConfig) -> dict:
    """refit.json as `make_plan` wrote it, checked (a run folder comes from anywhere): its
    epochs a count, its settings only those a plan sets."""
    record = read_json(path, "remove it to plan the refit again")
    # (the rates: the plan of one trained epoch, as older refit.json files hold it)
    allowed = {"train.early_stopping_patience", "train.time_steps", "train.learning_rate",
               "train.start_learning_rate", "train.min_learning_rate",
               *budget.shaped(config.train, 1)}
    settings = record.get("settings") if isinstance(record, dict) else None
    epochs = record.get("epochs") if isinstance(record, dict) else None
    if type(epochs) is not int or not 0 <= epochs <= budget.MAX_EPOCHS or \
            not isinstance(settings, dict) or not set(settings) <= allowed or \
            "photos" not in record:
        raise UserError(f"{path} is not a refit plan Corolla wrote; remove it to plan the "
                        f"refit again")
    return record
