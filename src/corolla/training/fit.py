"""Training: compile + fit + checkpoints + resume.

`run(config, plan)` is what `corolla train` and `corolla demo` call.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from corolla import config as config_lib
from corolla import rundir
from corolla.data import check
from corolla.data import folds
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.errors import Interrupted, UserError
from corolla.runtime import Plan, collective
from corolla.training import schedule as schedule_lib


@dataclass
class TrainResult:
    run_dir: Path | None  # None on a worker that is not the chief: it writes no run
    model: object
    history: dict


def resolve(config: config_lib.RunConfig, plan: Plan, resume: bool = False,
            log=print) -> tuple[config_lib.RunConfig, layout_lib.Layout]:
    """Checks the config against the registry and the data, and fills in everything that
    `0`/auto left open (image size, global batch, steps per epoch, the learning rates: the peak
    scaled with the replicas when train.scale_lr asks, start and minimum; the data path made
    absolute), so that the saved config says exactly what ran and a resumed run keeps its
    schedule whatever hardware it resumes on. A config that never went through a recipe
    (`corolla.recipes.compose`; built in Python) records train.recipe = "none". An image folder
    or CSV is converted (once, into the cache; see `sources.open_data`): the config keeps it as
    data.path, and records the converted copy as data.converted."""
    from corolla import models
    from corolla.data import sources

    spec = models.get(config.model.name)
    models.registry.check_weights(spec, config.model.weights)
    path = config.data.path
    if path and "://" not in path:
        path = os.path.abspath(path)
    layout = sources.open_data(path, config.data.image_size, spec.image_size,
                               features=sources.features_of(config.data), log=log)
    layout = folds.restrict(layout, config.data)  # a k-fold run's fold of train+val
    splits = [layout.split("train"), layout.split("val")]  # both must exist before anything
    if layout.has_split("test"):
        splits.append(layout.split("test"))
    # The checked train split counts what training will draw (less any skipped records).
    train_split = [check.check_split(split, len(layout.class_names),
                                     skip_bad_records=config.data.skip_bad_records)
                   for split in splits][0]
    steps = config.train.steps_per_epoch or train_split.count // plan.global_batch
    if steps < 1:
        raise UserError(f"the train split has {train_split.count} examples, fewer than one "
                        f"global batch ({plan.global_batch}); use a smaller --batch-size")
    t = config.train
    peak = t.learning_rate * (plan.replicas if t.scale_lr == "replicas" else 1)
    return config_lib.apply(config, {
        "data.path": path, "data.image_size": layout.image_size,
        "model.input_size": min(config.model.input_size or layout.image_size, layout.image_size),
        "data.converted": layout.root if layout.source else "",
        "train.recipe": "none" if t.recipe == "auto" else t.recipe,
        # Scaled once, here: the saved config holds the peak that ran (scale_lr "none"), so a
        # rerun or a resume on other hardware keeps it, as it keeps the global batch.
        "train.learning_rate": peak, "train.scale_lr": "none",
        "train.start_learning_rate": t.start_learning_rate or peak / 10,
        "train.min_learning_rate": t.min_learning_rate or peak / 100,
        "train.global_batch_size": plan.global_batch, "train.steps_per_epoch": steps,
        "output.run_id": config.output.run_id if resume else uuid.uuid4().hex[:12],
    }), layout


def compile_model(model, plan: Plan, schedule, steps_per_execution: int | None = None,
                  train: config_lib.TrainConfig | None = None) -> None:
    """Compiles for one-hot labels (see pipeline.train_dataset) with the optimizer `train`
    asks for (Adam without it)."""
    import keras

    from corolla.training.optimizer import make_optimizer

    train = train or config_lib.TrainConfig()
    model.compile(optimizer=make_optimizer(train, schedule),
                  loss=keras.losses.CategoricalCrossentropy(
                      label_smoothing=train.label_smoothing),
                  metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")],
                  steps_per_execution=steps_per_execution or plan.steps_per_execution,
                  jit_compile=plan.jit_compile)


@dataclass(frozen=True)
class Phase:
    """Epochs [start, end) trained with the backbone frozen or not, at the schedule x lr_scale,
    on `size` px images (0: the model's input size)."""
    start: int
    end: int
    frozen: bool
    lr_scale: float = 1.0
    size: int = 0

    def same_optimizer(self, other: Phase) -> bool:
        """Whether `other` trains with this phase's compiled model (only its images' size
        differs), so that moving on needs no new optimizer."""
        return (self.frozen, self.lr_scale) == (other.frozen, other.lr_scale)


def phases(train: config_lib.TrainConfig, train_backbone: bool, size: int = 0) -> list[Phase]:
    """Two-phase fine-tuning: the head alone for train.frozen_epochs, then everything at the
    schedule's rate x train.finetune_lr_scale; one phase otherwise. With progressive resizing
    (train.start_size, for a model of `size` px), each is split where the image size changes."""
    n = min(train.frozen_epochs, train.epochs) if train_backbone else 0
    if not n:
        split = [Phase(0, train.epochs, frozen=not train_backbone)]
    else:
        split = [Phase(0, n, frozen=True), Phase(n, train.epochs, False, train.finetune_lr_scale)]
    out = []
    for p in split:
        for epoch in range(p.start, p.end):
            at = schedule_lib.size_at(train, size, epoch)
            if out and out[-1].end == epoch and out[-1].size == at and p.same_optimizer(out[-1]):
                out[-1] = dataclasses.replace(out[-1], end=epoch + 1)
            else:
                out.append(dataclasses.replace(p, start=epoch, end=epoch + 1, size=at))
    return out


def backbone_of(model):
    """The backbone inside a model from models.create_model: its one nested model."""
    import keras

    nested = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    if len(nested) != 1:
        raise UserError(f"model {model.name!r} has no single backbone to freeze "
                        f"(train.frozen_epochs); set train.frozen_epochs = 0")
    return nested[0]


def _set_determinism(config: config_lib.RunConfig, plan: Plan) -> None:
    import keras

    keras.utils.set_random_seed(config.train.seed)
    if config.train.deterministic and plan.backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()


def _check_same_epoch(plan: Plan, epochs_done: int) -> None:
    """Every process must continue from the same epoch: a worker that lost its backup would
    otherwise silently train from scratch beside the others."""
    done = collective.gather(plan, [epochs_done])[:, 0].tolist()
    if len(set(done)) > 1:
        raise UserError(f"the processes restored different epochs ({done} completed, by "
                        f"process); every worker must resume from its own backup of this run "
                        f"(the same command, the same TMPDIR on each host)")


def run(config: config_lib.RunConfig, plan: Plan, log=print, resume: Path | None = None,
        callbacks=()) -> TrainResult:
    """Trains into a new run directory, or continues the interrupted run `resume` (its
    config, from its last completed epoch). `callbacks` are added to Corolla's own.

    The run's model.keras is its best epoch by val macro F1; last.keras its last epoch."""
    import keras

    from corolla import models
    from corolla.runtime.hardware import worker_scratch
    from corolla.training.callbacks import ValMacroF1
    from corolla.training.checkpoint import (BackupState, Checkpoint, read_state, stops_early,
                                          write_history)
    from corolla.training.optimizer import finalize_ema

    asked = config.train
    config, layout = resolve(config, plan, resume=resume is not None,
                             log=log if plan.is_chief else (lambda *args: None))
    log = log if plan.is_chief else (lambda *args: None)
    if asked.scale_lr == "replicas":
        log(f"peak learning rate {asked.learning_rate:g} x {plan.replicas} replica(s) = "
            f"{config.train.learning_rate:g} (train.scale_lr = replicas)")
    # Every process trains the chief's run: its id keys the workers' scratch folders, so a
    # resumed worker finds its own backup and a new run never meets an old one's.
    run_id = collective.chief_hex(plan, config.output.run_id)
    config = config_lib.apply(config, {"output.run_id": run_id})
    run_dir = Path(resume) if resume and plan.is_chief else None
    if run_dir:
        rundir.claim(run_dir, log)  # before its backup is read: one writer per run
    backup_dir = (run_dir / rundir.BACKUP if run_dir else None) if plan.is_chief else \
        worker_scratch(run_id, plan.process_id) / rundir.BACKUP
    state = read_state(backup_dir) if resume else BackupState()
    _check_same_epoch(plan, state.epochs_done)

    _set_determinism(config, plan)
    size, t = config.model.input_size, config.train  # resolved above: never 0 here
    num_classes = len(layout.class_names)
    steps, steps_per_execution = plan.fit_steps(t.steps_per_epoch)
    if t.accumulation_steps > 1:
        # Every epoch ends on an optimizer update: whole executions of whole accumulations.
        unit = math.lcm(steps_per_execution, t.accumulation_steps)
        if steps < unit:
            raise UserError(f"an epoch of {steps} steps is shorter than one accumulation of "
                            f"{t.accumulation_steps} batches; lower train.accumulation_steps "
                            f"or raise --steps-per-epoch")
        steps -= steps % unit
    if steps != t.steps_per_epoch:
        log(f"{t.steps_per_epoch} steps per epoch rounded to {steps}, a multiple of the "
            f"{steps_per_execution} steps the accelerator runs per call"
            + (f" and of the {t.accumulation_steps} accumulated batches per update"
               if t.accumulation_steps > 1 else ""))
    updates = steps // t.accumulation_steps  # optimizer updates per epoch: what schedules count
    ordered = plan.identical_input or t.deterministic
    # Each process consumes its own share of every global batch (TensorFlow workers), or the
    # whole batch from an identical stream (JAX processes).
    per_process = plan.global_batch // plan.input_shard[0]

    def train_data(first_epoch: int, phase_size: int):
        # One per `fit` (each iterates its dataset from the start): epoch k is drawn as k.
        return pipeline.train_dataset(
            layout.split("train"), phase_size, plan.global_batch,
            epoch_examples=steps * per_process,
            first_epoch=first_epoch, seed=t.seed, augment=config.data.augment,
            cache=config.data.cache, shuffle_buffer=config.data.shuffle_buffer,
            ordered=ordered, shard=plan.input_shard,
            skip_bad_records=config.data.skip_bad_records, num_classes=num_classes)

    plan_phases = phases(t, config.model.train_backbone, size)
    progressive = any(p.size != size for p in plan_phases)
    resumed = next((p for p in plan_phases if p.end > state.epochs_done), plan_phases[-1])
    train_ds = train_data(state.epochs_done, resumed.size)
    # The whole val split, for the val figures after every epoch (one padded pass, see
    # ValMacroF1: Keras' own validation would be a second pass over the same images).
    val_split = check.check_split(layout.split("val"), num_classes,
                                  skip_bad_records=config.data.skip_bad_records)
    val_labels = pipeline.metadata(val_split, config.data.skip_bad_records)["labels"]
    # Data and model come first: a failure there (a split smaller than one batch, weights that
    # will not load) leaves no empty run behind.
    with plan.scope():
        model = models.create_model(config.model.name, num_classes, size,
                                    config.model.weights, config.model.train_backbone,
                                    dropout=config.model.dropout, any_size=progressive)
        # What the run saves: the model at its input size (the same layers and weights).
        saved = models.at_size(model, size) if progressive else model
        backbone = backbone_of(model) if t.frozen_epochs and config.model.train_backbone \
            else None

    def configure(phase: Phase) -> None:
        """The model compiled for `phase`: backbone frozen or not, a fresh optimizer whose
        schedule continues from the phase's first epoch."""
        if backbone is not None:
            backbone.trainable = not phase.frozen
        with plan.scope():
            schedule = schedule_lib.for_training(t, updates, t.accumulation_steps,
                                                 first_epoch=phase.start, scale=phase.lr_scale)
            compile_model(model, plan, schedule, steps_per_execution, train=t)

    # The phase that saved the backup: its optimizer holds the backed-up state.
    current = next(p for p in plan_phases if p.end > max(state.epochs_done - 1, 0))
    configure(current)
    if plan.is_chief and not resume:
        run_dir = rundir.create(config.output.runs_dir, config.output.name,
                                 models.registry.short_name(config.model.name))
        rundir.claim(run_dir, log)
        backup_dir = run_dir / rundir.BACKUP
        rundir.record(run_dir, config, plan, layout.class_names)
        log(f"run directory: {run_dir}")
    elif plan.is_chief:
        rundir.record_session(run_dir, plan)
        if state.history:  # a kill may have come between the backup and the history
            write_history(state.history, run_dir / rundir.HISTORY)
        log(f"resuming {run_dir} after epoch {state.epochs_done} of {t.epochs}")
    model_path = run_dir / rundir.MODEL if plan.is_chief else backup_dir.parent / rundir.MODEL
    last_path = model_path.with_name(LAST)

    # Validation and the best model use the EMA weights.
    swap = keras.callbacks.SwapEMAWeights() if t.ema else None
    checkpoint = Checkpoint(backup_dir, state, run_dir / rundir.HISTORY if plan.is_chief else None,
                            swap=swap, patience=t.early_stopping_patience, log=log, saved=saved)
    with plan.scope():
        checkpoint.restore(model)
    own = [ValMacroF1(val_split, size, val_labels, plan, swap, config.data.skip_bad_records),
           checkpoint]  # F1 first: the checkpoint records it and keeps the best epoch
    if swap is not None:
        own.insert(0, swap)
    if plan.is_chief:
        own.append(keras.callbacks.TensorBoard(str(run_dir / "logs"), write_graph=False))
    _log_recipe(config, log)
    scaled = f" (scaled from the data's {layout.image_size})" if size != layout.image_size else ""
    log(f"training {config.model.name} at {size}x{size}{scaled} on {plan.strategy_name} "
        f"({plan.replicas} replica(s), global batch {plan.global_batch}): "
        f"{t.epochs} epochs x {steps} steps")
    if progressive:
        log("progressive resizing: " + ", ".join(f"{p.size} px in {_epochs(p)}"
                                                 for p in plan_phases))
    elif t.start_size:
        log(f"no progressive resizing: train.start_size {t.start_size} is not below the input "
            f"size {size}, or {t.epochs} epoch(s) leave no room for a ramp")
    verbose = (1 if sys.stdout.isatty() else 2) if plan.is_chief else 0
    try:
        for phase in plan_phases:
            done = checkpoint.state.epochs_done
            if phase.end <= done or stops_early(checkpoint.state, t.early_stopping_patience):
                continue
            if not phase.same_optimizer(current):
                # The model enters the phase as a finished one leaves it: on its EMA weights.
                finalize_ema(model)
                configure(phase)
            current = phase
            if backbone is not None:
                log(f"{_epochs(phase)}: backbone "
                    f"{'frozen' if phase.frozen else 'trained'}, learning rate x "
                    f"{phase.lr_scale:g}" + (f", {phase.size} px" if progressive else ""))
            elif progressive:
                log(f"{_epochs(phase)} at {phase.size} px")
            first = max(done, phase.start)
            if first != state.epochs_done:
                train_ds = train_data(first, phase.size)
            model.fit(train_ds, epochs=phase.end, initial_epoch=first,
                      steps_per_epoch=steps, callbacks=own + list(callbacks),
                      shuffle=False, verbose=verbose)
            if model.stop_training:
                break
    except KeyboardInterrupt:
        raise Interrupted(run_dir) from None
    finalize_ema(model)  # (what fit did already, unless no epoch was left to train)
    # Every worker saves (saving may read mirrored variables collectively); only the chief's
    # copy is the run's. The backup goes only once the model is safely written; model.keras
    # last of all (it marks the run trained).
    from corolla.files import atomic_path

    final = checkpoint.state
    with atomic_path(last_path) as tmp:
        saved.save(tmp)
    last_epoch = final.epochs_done - 1
    if final.best is not None and final.best_epoch != last_epoch:
        log(f"model.keras: epoch {final.best_epoch + 1} (val macro F1 {final.best_f1:.4f}, "
            f"the best); last.keras: epoch {last_epoch + 1}")
        with atomic_path(model_path) as tmp:
            shutil.copyfile(backup_dir / final.best, tmp)
        model = None  # the caller loads the best model from the run
    else:
        model = saved
        with atomic_path(model_path) as tmp:
            model.save(tmp)
    shutil.rmtree(backup_dir, ignore_errors=True)
    history = {k: [row.get(k) for row in final.history] for row in final.history for k in row}
    return TrainResult(run_dir=run_dir, model=model, history=history)


LAST = "last.keras"  # the last epoch's model, beside model.keras (the best epoch's)


def _epochs(phase: Phase) -> str:
    """A phase's epochs as the log counts them (from 1): "epoch 3" or "epochs 3-5"."""
    if phase.end - phase.start == 1:
        return f"epoch {phase.end}"
    return f"epochs {phase.start + 1}-{phase.end}"


def _log_recipe(config: config_lib.RunConfig, log) -> None:
    t = config.train
    log(f"recipe {t.recipe}: {t.optimizer}, {t.schedule} schedule, peak learning rate "
        f"{t.learning_rate:g}"
        + (f", weight decay {t.weight_decay:g}" if t.weight_decay else "")
        + (f", dropout {config.model.dropout:g}" if config.model.dropout else "")
        + (f", EMA {t.ema_momentum:g}" if t.ema else "")
        + (f", label smoothing {t.label_smoothing:g}" if t.label_smoothing else "")
        + (f", {t.accumulation_steps} batches per update" if t.accumulation_steps > 1 else ""))
