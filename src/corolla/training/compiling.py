"""Compiling a model for training: its optimizer, loss and metric, for the whole run or for one
phase (the backbone frozen or thawed as the phase says, the schedule from its first epoch).

Keras is imported in the functions: the backend is chosen first."""

from __future__ import annotations

import math

from corolla import config
from corolla.runtime import Plan
from corolla.training import phases
from corolla.training.schedule import for_training
from corolla.training.optimizer import make_optimizer


def keras_accuracy():
    """The accuracy metric every compiled model reports (one-hot labels)."""
    import keras

    return keras.metrics.CategoricalAccuracy(name="accuracy")


def compile_model(model, plan: Plan, schedule, steps_per_execution: int | None = None,
                  train: config.TrainConfig | None = None) -> None:
    """Compiles for one-hot labels (see pipeline.train_dataset) with the optimizer `train`
    asks for (Adam without it)."""
    import keras

    train = train or config.TrainConfig()
    model.compile(optimizer=make_optimizer(train, schedule, model),
                  loss=keras.losses.CategoricalCrossentropy(
                      label_smoothing=train.label_smoothing),
                  metrics=[keras_accuracy()],
                  steps_per_execution=steps_per_execution or plan.steps_per_execution,
                  jit_compile=plan.jit_compile)


def compile_phase(model, backbone, phase: phases.Phase, plan: Plan,
                  train: config.TrainConfig, steps: int, steps_per_execution: int,
                  frozen_bn: bool, schedule=None, later_steps: int = 0) -> None:
    """`model` with its `backbone` (None: nothing to freeze) frozen, or thawed as far as
    `train` says, and compiled for `phase`: a fresh optimizer whose schedule continues from
    the phase's first epoch, over epochs of `steps` steps (`later_steps` from
    train.time_steps_from; or on `schedule`, a Keras LearningRateSchedule of the optimizer's
    micro-steps: the range test's)."""
    if backbone is not None:
        phases.freeze(backbone, phase, train.unfreeze_fraction, frozen_bn)
    if schedule is None:
        schedule = phase_schedule(phase, train, steps, later_steps)
    compile_model(model, plan, schedule, steps_per_execution, train=train)


def phase_schedule(phase: phases.Phase, train: config.TrainConfig, steps: int,
                   later_steps: int = 0):
    """The learning-rate schedule of `phase` as its optimizer calls it: over epochs of `steps`
    steps (schedules count updates), or from train.time_steps_from on, of `later_steps` where
    given; from the phase's first epoch, x its rate's scale; a thawed phase after a frozen one
    rising over its first train.finetune_warmup_epochs."""
    updates = train.accumulation_steps
    epoch_updates = steps // updates
    later = (train.time_steps_from, later_steps // updates) \
        if later_steps and train.time_steps_from else None
    thawing = phase.start > 0 and not phase.frozen
    ramp = math.ceil(train.finetune_warmup_epochs * epoch_updates) if thawing else 0
    return for_training(train, epoch_updates, updates, first_epoch=phase.start,
                        scale=phase.lr_scale, later=later, ramp=ramp)


def compile_head(head, model, plan: Plan, steps_per_execution: int) -> None:
    """The head of `model` (`features.split_model`) compiled with the model's own optimizer
    and loss: training it trains the model."""
    head.compile(optimizer=model.optimizer, loss=model.loss, metrics=[keras_accuracy()],
                 steps_per_execution=steps_per_execution, jit_compile=plan.jit_compile)
