"""Learning-rate schedules: Keras LearningRateSchedule objects evaluated on the optimizer's own
step counter, so a resumed run (whose optimizer state is restored) continues exactly, and no
callback holds state of its own.

- cosine: linear warm-up from `start` to `peak`, then cosine decay to `minimum`, per step
  (Keras' CosineDecay).
- ramp: the Kaggle tutorial's, per epoch: `start + (peak - start) * e / rampup` while
  e < rampup, `peak` while e < rampup + sustain, then `(peak - minimum) * decay ** (e - rampup
  - sustain) + minimum` (e = the epoch, counted from 0).

Both count optimizer updates: with gradient accumulation Keras calls the schedule with its
micro-step counter, which `OnUpdates` divides back into updates (and shifts, for the second
phase of a two-phase fine-tuning, whose fresh optimizer starts at step 0).

Beside them, the size schedule of progressive resizing (`size_at`: the image size of an
epoch), which `phases.phases` turns into phases.
"""

from __future__ import annotations

import functools
import math


def ramp_value(epoch: float, start: float, peak: float, minimum: float, rampup: float,
               sustain: float, decay: float) -> float:
    """The tutorial's formula in plain Python (the reference the Keras schedule is tested on)."""
    if epoch < rampup:
        return start + (peak - start) * epoch / rampup
    if epoch < rampup + sustain:
        return peak
    return (peak - minimum) * decay ** (epoch - rampup - sustain) + minimum


@functools.cache
def _classes():
    # Defined on first use: importing corolla.training must not import Keras (the backend is
    # chosen later).
    import keras
    from keras import ops

    base = keras.optimizers.schedules.LearningRateSchedule

    @keras.saving.register_keras_serializable(package="corolla")
    class Ramp(base):
        def __init__(self, start, peak, minimum, rampup_epochs, sustain_epochs, decay,
                     steps_per_epoch):
            self.start, self.peak, self.minimum = start, peak, minimum
            self.rampup_epochs, self.sustain_epochs = rampup_epochs, sustain_epochs
            self.decay, self.steps_per_epoch = decay, steps_per_epoch

        def __call__(self, step):
            epoch = ops.floor(ops.cast(step, "float32") / self.steps_per_epoch)
            rampup, sustain = float(self.rampup_epochs), float(self.sustain_epochs)
            ramp = self.start + (self.peak - self.start) * epoch / max(rampup, 1e-9)
            decayed = (self.peak - self.minimum) * ops.power(
                self.decay, ops.maximum(epoch - rampup - sustain, 0.0)) + self.minimum
            return ops.where(epoch < rampup, ramp,
                             ops.where(epoch < rampup + sustain, self.peak, decayed))

        def get_config(self):
            return {"start": self.start, "peak": self.peak, "minimum": self.minimum,
                    "rampup_epochs": self.rampup_epochs, "sustain_epochs": self.sustain_epochs,
                    "decay": self.decay, "steps_per_epoch": self.steps_per_epoch}

    @keras.saving.register_keras_serializable(package="corolla")
    class OnUpdates(base):
        """scale * schedule(u + offset), u = step // accumulation; past `boundary` updates
        (-1: none), each counts `stretch` (later epochs of other steps: `later`); over the
        first `ramp` updates (0: none) x (u + 1) / ramp, a linear rise from near 0."""

        def __init__(self, schedule, accumulation=1, offset=0, scale=1.0, boundary=-1,
                     stretch=1.0, ramp=0):
            if isinstance(schedule, dict):
                schedule = keras.optimizers.schedules.deserialize(schedule)
            self.schedule, self.accumulation = schedule, accumulation
            self.offset, self.scale = offset, scale
            self.boundary, self.stretch, self.ramp = boundary, stretch, ramp

        def __call__(self, step):
            update = ops.floor_divide(ops.cast(step, "int32"), self.accumulation)
            rising = 1.0 if not self.ramp else \
                ops.minimum(ops.cast(update + 1, "float32") / float(self.ramp), 1.0)
            if self.boundary < 0:
                return self.scale * rising * self.schedule(update + self.offset)
            update = ops.cast(update, "float32")
            at = float(self.boundary)
            update = ops.minimum(update, at) + ops.maximum(update - at, 0.0) * self.stretch
            return self.scale * rising * self.schedule(update + float(self.offset))

        def get_config(self):
            return {"schedule": keras.optimizers.schedules.serialize(self.schedule),
                    "accumulation": self.accumulation, "offset": self.offset,
                    "scale": self.scale, "boundary": self.boundary, "stretch": self.stretch,
                    "ramp": self.ramp}

    return Ramp, OnUpdates


def learning_rate_schedule(peak: float, total_steps: int, warmup_steps: int,
                           start: float | None = None, minimum: float | None = None):
    """cosine: linear ramp-up from `start` (default peak/10) to `peak`, then cosine decay to
    `minimum` (default 1% of the peak) at `total_steps`."""
    import keras

    start = peak / 10 if start is None else start
    minimum = peak / 100 if minimum is None else minimum
    warmup_steps = min(warmup_steps, max(total_steps - 1, 0))
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=start if warmup_steps else peak,
        decay_steps=max(total_steps - warmup_steps, 1), alpha=minimum / peak,
        warmup_target=peak if warmup_steps else None, warmup_steps=warmup_steps)


def ramp_schedule(start: float, peak: float, minimum: float, rampup_epochs: float,
                  sustain_epochs: float, decay: float, steps_per_epoch: int):
    """ramp (see the module), on optimizer updates: epoch = update // steps_per_epoch."""
    ramp, _ = _classes()
    return ramp(start, peak, minimum, rampup_epochs, sustain_epochs, decay, steps_per_epoch)


def for_training(train, updates_per_epoch: int, accumulation: int = 1, first_epoch: int = 0,
                 scale: float = 1.0, later: tuple[int, int] | None = None, ramp: int = 0):
    """The schedule a resolved TrainConfig asks for, as the optimizer calls it: on micro-steps
    (`accumulation` per update), for an optimizer that starts at `first_epoch` (the second phase
    of a two-phase fine-tuning), times `scale`. `later`: (epoch, updates): the epochs from that
    one (from 0) have that many updates each, and the schedule follows them epoch by epoch (a
    time plan made again mid-run: its epochs' shape kept, its rate still ending at its floor).
    `ramp`: over this optimizer's first that many updates its rate rises linearly from near 0
    (a thawed phase's warm-up: counted on the optimizer's own updates, so a resumed run
    continues it)."""
    if train.schedule == "ramp":
        schedule = ramp_schedule(train.start_learning_rate, train.learning_rate,
                                 train.min_learning_rate, train.warmup_epochs,
                                 train.sustain_epochs, train.lr_decay, updates_per_epoch)
    else:
        schedule = learning_rate_schedule(
            train.learning_rate, updates_per_epoch * train.epochs,
            math.ceil(train.warmup_epochs * updates_per_epoch), train.start_learning_rate,
            train.min_learning_rate)
    boundary, stretch = -1, 1.0
    if later is not None and later[1] != updates_per_epoch:
        # This optimizer's updates before the later epochs start, then each of theirs as a
        # share of one of the schedule's epochs.
        boundary = max(later[0] - first_epoch, 0) * updates_per_epoch
        stretch = updates_per_epoch / later[1]
    if (accumulation, first_epoch, scale, boundary, ramp) == (1, 0, 1.0, -1, 0):
        return schedule
    _, on_updates = _classes()
    return on_updates(schedule, accumulation, first_epoch * updates_per_epoch, scale, boundary,
                      stretch, ramp)


SIZE_STEP = 16  # progressive resizing's sizes are multiples of this (below the final size)


def size_at(train, final: int, epoch: int) -> int:
    """Progressive resizing (FFCV's ramp, by fractions of the epochs): the input size of
    `epoch` (from 0), train.start_size until the ramp, growing linearly over epochs
    [size_ramp_start, size_ramp_end) x train.epochs, rounded down to a multiple of SIZE_STEP,
    then `final` (the last epoch at least: the model is validated and kept at `final`).
    `final` throughout when train.start_size is 0 or not below it."""
    start = train.start_size
    if not start or start >= final:
        return final
    last = min(train.size_ramp_end * train.epochs, train.epochs - 1)
    first = min(train.size_ramp_start * train.epochs, last)
    if epoch >= last:
        return final
    if epoch < first:
        return start
    size = start + (final - start) * (epoch - first) / (last - first)
    return min(max(start, int(size) // SIZE_STEP * SIZE_STEP), final)
