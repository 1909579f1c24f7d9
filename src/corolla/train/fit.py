"""Training: compile + fit + checkpoints + resume.

`run(config, plan)` is what `corolla train` and `corolla demo` call.
"""

from __future__ import annotations

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
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.errors import Interrupted, UserError
from corolla.runtime import Plan, collective
from corolla.train.schedule import learning_rate_schedule


@dataclass
class TrainResult:
    run_dir: Path | None  # None on a worker that is not the chief: it writes no run
    model: object
    history: dict


def resolve(config: config_lib.RunConfig, plan: Plan,
            resume: bool = False) -> tuple[config_lib.RunConfig, layout_lib.Layout]:
    """Checks the config against the registry and the data, and fills in everything that
    `0`/auto left open (image size, learning rate, global batch, steps per epoch, the data path
    made absolute), so that the saved config says exactly what ran and a resumed run keeps its
    schedule whatever hardware it resumes on."""
    from corolla import models

    spec = models.get(config.model.name)
    models.registry.check_weights(spec, config.model.weights)
    path = config.data.path
    if path and "://" not in path:
        path = os.path.abspath(path)
    layout = layout_lib.open_layout(path, config.data.image_size, spec.image_size)
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
    return config_lib.apply(config, {
        "data.path": path, "data.image_size": layout.image_size,
        "train.learning_rate": config.train.learning_rate or spec.learning_rate,
        "train.global_batch_size": plan.global_batch, "train.steps_per_epoch": steps,
        "output.run_id": config.output.run_id if resume else uuid.uuid4().hex[:12],
    }), layout


def compile_model(model, plan: Plan, schedule, steps_per_execution: int | None = None) -> None:
    import keras

    model.compile(optimizer=keras.optimizers.Adam(schedule),
                  loss="sparse_categorical_crossentropy",
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                  steps_per_execution=steps_per_execution or plan.steps_per_execution,
                  jit_compile=plan.jit_compile)


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
    config, from its last completed epoch). `callbacks` are added to Corolla's own."""
    import keras

    from corolla import models
    from corolla.runtime.hardware import worker_scratch
    from corolla.train.checkpoint import BackupState, Checkpoint, read_state, write_history

    config, layout = resolve(config, plan, resume=resume is not None)
    log = log if plan.is_chief else (lambda *args: None)
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
    size, t = layout.image_size, config.train
    steps, steps_per_execution = plan.fit_steps(t.steps_per_epoch)
    if steps != t.steps_per_epoch:
        log(f"{t.steps_per_epoch} steps per epoch rounded to {steps}, a multiple of the "
            f"{steps_per_execution} steps the accelerator runs per call")
    ordered = plan.identical_input or t.deterministic
    # Each process consumes its own share of every global batch (TensorFlow workers), or the
    # whole batch from an identical stream (JAX processes).
    per_process = plan.global_batch // plan.input_shard[0]
    train_ds = pipeline.train_dataset(
        layout.split("train"), size, plan.global_batch, epoch_examples=steps * per_process,
        first_epoch=state.epochs_done, seed=t.seed, augment=config.data.augment,
        cache=config.data.cache, shuffle_buffer=config.data.shuffle_buffer, ordered=ordered,
        shard=plan.input_shard, skip_bad_records=config.data.skip_bad_records)
    # Several processes (either backend) must all run the same number of validation steps.
    val_ds, val_steps = pipeline.validation_dataset(
        layout.split("val"), size, plan.global_batch,
        full_batches=plan.static_shapes or plan.replicas > 1, workers=plan.num_processes,
        skip_bad_records=config.data.skip_bad_records)
    # Data and model come first: a failure there (a split smaller than one batch, weights that
    # will not load) leaves no empty run behind.
    with plan.scope():
        model = models.create_model(config.model.name, len(layout.class_names), size,
                                    config.model.weights, config.model.train_backbone)
        schedule = learning_rate_schedule(t.learning_rate, steps * t.epochs,
                                          math.ceil(t.warmup_epochs * steps))
        compile_model(model, plan, schedule, steps_per_execution)
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

    checkpoint = Checkpoint(backup_dir, state, run_dir / rundir.HISTORY if plan.is_chief else None)
    with plan.scope():
        checkpoint.restore(model)
    own = [checkpoint]
    if plan.is_chief:
        own.append(keras.callbacks.TensorBoard(str(run_dir / "logs"), write_graph=False))
    log(f"training {config.model.name} at {size}x{size} on {plan.strategy_name} "
        f"({plan.replicas} replica(s), global batch {plan.global_batch}): "
        f"{t.epochs} epochs x {steps} steps")
    try:
        history = model.fit(train_ds, epochs=t.epochs, initial_epoch=state.epochs_done,
                            steps_per_epoch=steps, validation_data=val_ds,
                            validation_steps=val_steps, callbacks=own + list(callbacks),
                            shuffle=False,
                            verbose=(1 if sys.stdout.isatty() else 2) if plan.is_chief else 0)
    except KeyboardInterrupt:
        raise Interrupted(run_dir) from None
    # Every worker saves (saving may read mirrored variables collectively); only the chief's
    # copy is the run's. The backup goes only once the model is safely written.
    from corolla.files import atomic_path

    with atomic_path(model_path) as tmp:
        model.save(tmp)
    shutil.rmtree(backup_dir, ignore_errors=True)
    return TrainResult(run_dir=run_dir, model=model, history=history.history)
