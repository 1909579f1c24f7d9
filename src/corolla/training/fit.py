"""Training: `run(config, plan)` is what `corolla train` and `corolla demo` call, a run's story
from its settings to its saved model. Each step is a module of this package: `preparing`
(settings, backup, epoch length), `trainer` (the model through its phases), `timing` (a time
budget: `timing.plan.TimePlan`) and `saving`; the run's folder and what the log says of the
training are this module's, below `run`. A timed run that fit the linear head (`linear_head`)
ends with it where training does not beat it on val, or fails.
"""

from __future__ import annotations

from pathlib import Path

from corolla.config import RunConfig, TrainConfig, duration_seconds
from corolla import models
from corolla.data import check, pipeline
from corolla.errors import UserError, first_line
from corolla.files import write_json
from corolla.runs import paths, rundir, tracking
from corolla.runtime import Plan
from corolla.training import range_test
from corolla.training import backup, linear_head, refit, saving
from corolla.runtime.clock import Clock, default_clock
from corolla.training.phases import epochs_text
from corolla.training.preparing import Prepared, prepare
from corolla.training.saving import TrainResult
from corolla.training.timing.plan import TimePlan
from corolla.training.trainer import Trainer


def run(config: RunConfig, plan: Plan, log=print, resume: Path | None = None,
        callbacks=(), lr_find: range_test.RangeSettings | None = None,
        clock: Clock | None = None, began: float | None = None) -> TrainResult:
    """Trains into a new run directory, or continues the interrupted run `resume` (its
    config, from its last completed epoch). `callbacks` are added to Corolla's own.
    `lr_find`: a new run's peak learning rate is found first by the range test on its own
    model (`lr_find.find_rate`; in a time budget's time), which then trains from the weights it
    had before the test, at the rate suggested (config.toml's train.learning_rate; the test
    in lr_find.json).

    The run's model.keras is its best epoch by val macro F1 (or a timed run's linear head,
    where no epoch beat it); last.keras its last epoch. Where training fails (raises, or its
    loss becomes NaN) after the linear head was fit, the run ends with its best so far, and
    says so. `clock`: what a time budget reads (`clock.Clock`; the host's by default);
    `began`: when the command started on it, where a time budget counts from (`budget`: the
    whole command's; now by default)."""
    clock = clock or default_clock()
    began = clock.now() if began is None else began
    log = log if plan.is_chief else (lambda *args: None)
    if config.train.refit == "on":
        refit.check_plan(plan)
    ready = prepare(config, plan, log, resume)
    # Data and model come first: a failure there (a split smaller than one batch, weights that
    # will not load) leaves no empty run behind.
    val_split, val_labels = _val_split(ready)
    trainer = Trainer(ready, plan, log, callbacks, clock)
    found = None
    if lr_find is not None and resume is None:
        found = range_test.train_at_found_rate(trainer, lr_find, config.train, log)
        ready = trainer.ready
    timed = None  # the time plan, where this session makes it
    if ready.to_plan:
        timed = TimePlan(trainer, val_split, began, log)
        ready = timed.make()
    saved = trainer.saved_model()
    trainer.start()  # before the folder too: a pipeline that cannot be built leaves no run
    run_dir, backup_dir = _open_folder(ready, plan, log, resume)
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
    _log_training(ready, plan, log)
    # A Ctrl-C raises `Interrupted`, whose message says how to continue the run; the tracked
    # run ends KILLED (FAILED on an error) here.
    with tracking.ended_on_error(run_dir, log):
        # A plan made in this session is made again from the pace of its first epoch trained
        # on images (`TimePlan.replan`).
        try:
            if trainer.fit_phases(until=timed.replan_after if timed else 0):
                timed.replan(run_dir)
                trainer.fit_phases()
        except Exception as e:  # (a Ctrl-C is no Exception: it stops the run as ever)
            if checkpoint.state.linear_head is None:
                raise
            log(f"training failed after epoch {checkpoint.state.epochs_done} "
                f"({first_line(e, typed=not isinstance(e, UserError))}): the run ends with "
                f"its best so far")
            _recover(trainer, saved, checkpoint)
        _end_linear_head(checkpoint, run_dir, plan, log)
        result = saving.save(trainer.model, saved, checkpoint.state, plan, run_dir, backup_dir,
                             ready.config.output.run_id, log)
        _log_time_spent(trainer.ready.config.train, checkpoint.spent(), log)
        result.refit = ready.config.train.refit == "on"
        if result.refit and resume is None:  # a resumed one: `refit.train`
            # Planned right after the validated training, in the time it left (the room its
            # time plan gives it, where this session made one).
            room = timed.refit_room(checkpoint.state.history) if timed else None
            ready = trainer.ready
            refit.make_plan(run_dir, ready.config, ready.steps,
                            (ready.layout.split("train").count, val_split.count), log, room)
            result.refit_deadline = room
        return result


def _recover(trainer: Trainer, saved, checkpoint) -> None:
    """The model's weights after a training that failed midway: its last committed epoch's
    (the backup's model part: the optimizer may be another phase's by now), or with none, the
    best so far's (the linear head); last.keras is written from them."""
    state, folder = checkpoint.state, checkpoint.backup_dir
    with trainer.plan.scope():
        if state.weights and not state.weights.endswith(".h5"):
            weights = trainer.model.weights
            for variable, value in zip(weights, backup.read_arrays(folder / state.weights)):
                variable.assign(value)
        else:
            backup.load_model_weights(saved, folder / state.best)


def _end_linear_head(checkpoint, run_dir: Path | None, plan: Plan, log) -> None:
    """Where the run fit the linear head: which of it and the trained epochs the run keeps,
    and why (`linear_head.verdict`), in the log and in linear_head.json (its record; the
    refit repeats the winner's recipe)."""
    from corolla.training.callbacks import VAL_F1

    state = checkpoint.state
    if state.linear_head is None:
        return
    kept, why = linear_head.verdict(state.linear_head["val_f1"],
                                    [row.get(VAL_F1) for row in state.history],
                                    checkpoint.frozen_epochs)
    log(why)
    if plan.is_chief:
        write_json({**state.linear_head, "kept": kept}, run_dir / paths.LINEAR_HEAD)


def _val_split(ready: Prepared) -> tuple:
    """(the val split, checked against the run's classes, its labels)."""
    skip = ready.config.data.skip_bad_records
    split = check.check_split(ready.layout.split("val"), len(ready.layout.class_names),
                              skip_bad_records=skip)
    return split, pipeline.metadata(split, skip)["labels"]


def _open_folder(ready: Prepared, plan: Plan, log, resume) -> tuple[Path | None, Path]:
    """(run folder, backup folder): a new run's folder made and recorded by the chief, or the
    continued run's session recorded (with the history its backup holds: a kill may have come
    between the backup and history.csv)."""
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
            backup.write_history(ready.state.history, run_dir / paths.HISTORY)
        log(f"resuming {run_dir} after epoch {ready.state.epochs_done} of "
            f"{config.train.epochs}")
        if config.train.time_plan:
            spent = ready.state.history[-1].get("seconds", 0.0) if ready.state.history else 0
            log(f"time {config.train.time_budget}: continuing its plan ({config.train.time_plan})"
                f"; {spent / 60:.1f} min spent before (up to the last completed epoch)")
    return run_dir, backup_dir


def _log_training(ready: Prepared, plan: Plan, log) -> None:
    """What the run trains, before its first epoch: its recipe, model, hardware and phases."""
    config = ready.config
    t, size = config.train, config.model.input_size
    _log_optimizer(config, log)
    data_size = ready.layout.image_size
    scaled = f" (scaled from the data's {data_size})" if size != data_size else ""
    log(f"training {config.model.name} at {size}x{size}{scaled} on {plan.strategy_name} "
        f"({plan.replicas} replica(s), global batch {plan.global_batch}): "
        f"{t.epochs} epoch{'s' * (t.epochs != 1)} x {ready.steps} steps")
    if ready.progressive:
        log("progressive resizing: " + ", ".join(f"{p.size} px in {epochs_text(p)}"
                                                 for p in ready.phases))
    elif t.start_size:
        log(f"no progressive resizing: train.start_size {t.start_size} is not below the input "
            f"size {size}, or {t.epochs} epoch(s) leave no room for a ramp")


def _log_optimizer(config: RunConfig, log) -> None:
    """The training's line: its optimizer, schedule and the settings the config turns on (the
    recipe's own line, its description, is said before: `config.recipe.Recipe.line`)."""
    t = config.train
    log(f"training with {t.optimizer}, a {t.schedule} schedule, peak learning rate "
        f"{t.learning_rate:g}"
        + (f", weight decay {t.weight_decay:g}" if t.weight_decay else "")
        + (f", dropout {config.model.dropout:g}" if config.model.dropout else "")
        + (f", EMA {t.ema_momentum:g}" if t.ema else "")
        + (f", label smoothing {t.label_smoothing:g}" if t.label_smoothing else "")
        + (f", {t.accumulation_steps} batches per update" if t.accumulation_steps > 1 else "")
        + (f", class weight {t.class_weight}" if t.class_weight != "none" else ""))


def _log_time_spent(t: TrainConfig, spent: float, log) -> None:
    """With a time budget: the training's `spent` seconds, against it."""
    if t.time_budget:
        log(f"time {t.time_budget}: trained in {spent / 60:.1f} min "
            f"({spent / duration_seconds(t.time_budget):.0%} of the budget)")
