"""Training: compile + fit + callbacks + checkpoints, then the run's evaluation and submission.

`run(config, plan)` is what `corolla train` and `corolla demo` call.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from corolla import config as config_lib
from corolla import rundir
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.runtime import Plan


@dataclass
class TrainResult:
    run_dir: Path | None  # None on a worker that is not the chief: it writes no run
    model: object
    history: dict


def resolve(config: config_lib.RunConfig) -> tuple[config_lib.RunConfig, layout_lib.Layout]:
    """Checks the config against the registry and the data, and fills in what `0`/auto left
    open (image size, learning rate): the saved config says exactly what was run."""
    from corolla import models

    spec = models.get(config.model.name)
    models.registry.check_weights(spec, config.model.weights)
    layout = layout_lib.open_layout(config.data.path, config.data.image_size, spec.image_size)
    layout.split("train"), layout.split("val")  # both must exist before anything starts
    config = config_lib.apply(config, {
        "data.image_size": layout.image_size,
        "train.learning_rate": config.train.learning_rate or spec.learning_rate,
    })
    return config, layout


def learning_rate_schedule(peak: float, total_steps: int, warmup_steps: int):
    """Linear ramp-up to `peak`, then cosine decay to 1% of it: the tutorial's ramp-up /
    sustain / decay, per step instead of per epoch, from Keras' own schedule."""
    import keras

    warmup_steps = min(warmup_steps, max(total_steps - 1, 0))
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=peak / 10 if warmup_steps else peak,
        decay_steps=max(total_steps - warmup_steps, 1), alpha=0.01,
        warmup_target=peak if warmup_steps else None, warmup_steps=warmup_steps)


def compile_model(model, plan: Plan, schedule) -> None:
    import keras

    model.compile(optimizer=keras.optimizers.Adam(schedule),
                  loss="sparse_categorical_crossentropy",
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                  steps_per_execution=plan.steps_per_execution, jit_compile="auto")


def run(config: config_lib.RunConfig, plan: Plan, log=print, resume: Path | None = None,
        callbacks=()) -> TrainResult:
    """Trains into a new run directory, or continues the interrupted run `resume` (its
    config, from its last completed epoch). `callbacks` are added to Corolla's own."""
    import keras

    from corolla import models

    config, layout = resolve(config)
    train_split, val_split = layout.split("train"), layout.split("val")
    keras.utils.set_random_seed(config.train.seed)
    size = layout.image_size
    steps = config.train.steps_per_epoch or train_split.count // plan.global_batch
    total = steps * config.train.epochs
    train_ds = pipeline.train_dataset(
        train_split, size, plan.global_batch, seed=config.train.seed,
        augment=config.data.augment, cache=config.data.cache,
        shuffle_buffer=config.data.shuffle_buffer, ordered=plan.identical_input,
        shard=plan.input_shard)
    # Several processes (either backend) must all run the same number of validation steps.
    val_ds, val_steps = pipeline.validation_dataset(val_split, size, plan.global_batch,
                                                    full_batches=plan.static_shapes,
                                                    workers=plan.num_processes)
    # Data and model come first: a failure there (a split smaller than one batch, weights that
    # will not load) leaves no empty run behind.
    with plan.scope():
        model = models.create_model(config.model.name, len(layout.class_names), size,
                                    config.model.weights, config.model.train_backbone)
        schedule = learning_rate_schedule(config.train.learning_rate, total,
                                          math.ceil(config.train.warmup_epochs * steps))
        compile_model(model, plan, schedule)
    if not plan.is_chief:
        from corolla.runtime.hardware import worker_scratch

        run_dir = None
        scratch = worker_scratch(resume.name if resume else config.output.name, plan.process_id)
        backup_dir, model_path = scratch / rundir.BACKUP, scratch / rundir.MODEL
    else:
        if resume:
            run_dir = Path(resume)
            log(f"resuming {run_dir}")
        else:
            run_dir = rundir.create(config.output.runs_dir, config.output.name,
                                    config.model.name)
            config_lib.save(config, run_dir / rundir.CONFIG)
            log(f"run directory: {run_dir}")
        backup_dir, model_path = run_dir / rundir.BACKUP, run_dir / rundir.MODEL

    # BackupAndRestore first: it must have saved an epoch before any later callback can fail.
    own = [keras.callbacks.BackupAndRestore(str(backup_dir))]
    if plan.is_chief:
        own += [keras.callbacks.CSVLogger(str(run_dir / rundir.HISTORY), append=bool(resume)),
                keras.callbacks.TensorBoard(str(run_dir / "logs"), write_graph=False)]
    log = log if plan.is_chief else (lambda *args: None)
    log(f"training {config.model.name} at {size}x{size} on {plan.strategy_name} "
        f"({plan.replicas} replica(s), global batch {plan.global_batch}): "
        f"{config.train.epochs} epochs x {steps} steps")
    history = model.fit(train_ds, epochs=config.train.epochs, steps_per_epoch=steps,
                        validation_data=val_ds, validation_steps=val_steps,
                        callbacks=own + list(callbacks), shuffle=False,
                        verbose=(1 if sys.stdout.isatty() else 2) if plan.is_chief else 0)
    # Every worker saves (saving may read mirrored variables collectively); only the chief's
    # copy is the run's.
    model.save(model_path)
    return TrainResult(run_dir=run_dir, model=model, history=history.history)
