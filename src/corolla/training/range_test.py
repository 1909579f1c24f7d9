"""The learning-rate range test (`corolla lr-find`, `corolla train --lr find`), as fastai's
`lr_find` and Lightning's `LearningRateFinder` run it: the rate grows exponentially from `start`
to `end` over `steps` points while the training loss is recorded; the loss is smoothed by a
bias-corrected exponential moving average (beta 0.98) and the test stops once the smoothed loss
exceeds 4x its best (or is not a number). The suggestion:

- steepest (the default, Lightning's): the rate where the smoothed loss falls fastest against
  log(rate), its first SKIP_BEGIN points and last SKIP_END left out;
- minimum: a tenth of the rate where the smoothed loss is lowest (fastai's `minimum`).

`range_test` is the test on any compiled-by-callback Keras model and dataset (the tests' linear
model; the run's own model through `find_rate`): its variables are put back afterwards, the
optimizer it leaves is the test's (compile again to train). `find_rate` runs it on a run's own
model (`Trainer`), data stream, optimizer and global batch, in the phase the run starts with
(the backbone frozen when it starts frozen).

A point is one host call of the run's (`steps_per_execution` steps; with gradient accumulation
whole updates: `Prepared.unit`), at one rate: on CPUs and GPUs one step, as in fastai.

Keras and the modules that import it (`preparing`, `trainer`) are imported in the functions:
the backend is chosen first, and the commands read the settings without them."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from corolla.config import RunConfig, TrainConfig, derived_rate, with_settings
from corolla.config.range_test import (BETA, DIVERGED, RULES, SKIP_BEGIN, SKIP_END, SLOPE_SPAN,
                                       RangeSettings)
from corolla.errors import UserError
from corolla.runtime import Plan, collective
from corolla.training.preparing import prepare
from corolla.training.trainer import Trainer


@dataclass
class RangeResult:
    """A finished test: the rate and mean loss of each point run, the smoothed loss, why it
    stopped, and the rule's suggestion (None: the loss never fell)."""
    settings: RangeSettings
    rates: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    smoothed: list = field(default_factory=list)
    stopped: str = ""  # "diverged" (smoothed loss > 4x its best, or not a number) or "end"
    suggestion: float | None = None
    index: int | None = None  # the point the suggestion was read at
    seconds: float = 0.0
    unit: int = 1  # steps per point
    notes: dict = field(default_factory=dict)  # what ran: the run's model, batch, phase

    @property
    def rule_text(self) -> str:
        return RULES[self.settings.rule]

    def line(self) -> str:
        """The result as the log says it."""
        s = self.settings
        how = (f"stopped at step {len(self.rates)} of {s.steps} as the loss diverged"
               if self.stopped == "diverged" else f"all {s.steps} steps")
        if self.unit > 1:
            how += f", {self.unit} batches a step"
        sweep = f"range test {s.start:g} to {s.end:g}, {how}, {self.seconds:.0f} s"
        if self.suggestion is None:
            return f"learning rate: none suggested ({sweep})"
        return f"suggested learning rate {self.suggestion:.3g} ({self.rule_text}; {sweep})"

    def to_dict(self) -> dict:
        return {"suggestion": self.suggestion, "rule": self.settings.rule,
                "rule_text": self.rule_text, "index": self.index,
                "start": self.settings.start, "end": self.settings.end,
                "steps": self.settings.steps, "steps_run": len(self.rates),
                "stopped": self.stopped, "beta": BETA, "diverged_above": DIVERGED,
                "batches_per_step": self.unit, "seconds": round(self.seconds, 3),
                **self.notes, "rates": self.rates, "losses": _numbers(self.losses),
                "smoothed": _numbers(self.smoothed)}


def _numbers(values) -> list:
    """JSON's numbers: what is not one (a diverged loss) as null."""
    return [v if math.isfinite(v) else None for v in values]


def rates(settings: RangeSettings) -> np.ndarray:
    """The rate of each point: start * (end / start) ** (i / (steps - 1))."""
    return settings.start * (settings.end / settings.start) ** (
        np.arange(settings.steps) / (settings.steps - 1))


def smooth(losses, beta: float = BETA) -> list[float]:
    """The bias-corrected exponential moving average of `losses` (fastai's smooth_loss)."""
    out, average = [], 0.0
    for i, loss in enumerate(losses):
        average = beta * average + (1 - beta) * loss
        out.append(average / (1 - beta ** (i + 1)))
    return out


def diverged(smoothed: list[float]) -> bool:
    """Whether the last smoothed loss is not a number or above DIVERGED x the best before."""
    last = smoothed[-1]
    return not math.isfinite(last) or last > DIVERGED * min(smoothed)


def suggest(rate_list, smoothed, rule: str = "steepest",
            steps: int | None = None) -> tuple[float | None, int | None]:
    """(the rate `rule` reads from the curve, its point), or (None, None) when the smoothed
    loss never falls (its lowest not 1% below where it starts being read). The curve is read
    from point SKIP_BEGIN to the last SKIP_END before its end (or before its first point that
    is not a number). steepest: the slope against log(rate) at each point is measured across
    the `steps` // SLOPE_SPAN points (of the test's `steps`, default those recorded) around it:
    a point's own neighbours differ by their noise more than by the curve."""
    loss = np.asarray(smoothed, dtype=float)
    finite = np.isfinite(loss)
    end = (len(loss) if finite.all() else int(np.argmin(finite))) - SKIP_END
    if end - SKIP_BEGIN < 3:
        return None, None
    part = loss[SKIP_BEGIN:end]
    if not part.min() < part[0] - 0.01 * abs(part[0]):
        return None, None
    if rule == "minimum":
        i = SKIP_BEGIN + int(np.argmin(part))
        return float(rate_list[i]) / 10, i
    logs = np.log10(np.asarray(rate_list[SKIP_BEGIN:end], dtype=float))
    half = max((steps or len(loss)) // (2 * SLOPE_SPAN), 1)
    ahead = np.minimum(np.arange(len(part)) + half, len(part) - 1)
    behind = np.maximum(np.arange(len(part)) - half, 0)
    slope = (part[ahead] - part[behind]) / (logs[ahead] - logs[behind])
    if not slope.min() < 0:
        return None, None
    i = SKIP_BEGIN + int(np.argmin(slope))
    return float(rate_list[i]), i


@functools.cache
def _range_class():
    import keras
    from keras import ops

    class RangeRates(keras.optimizers.schedules.LearningRateSchedule):
        """start * (end / start) ** (point / (steps - 1)), point = step // unit (at most the
        last): the optimizer's micro-step counter."""

        def __init__(self, start, end, steps, unit=1):
            self.start, self.end, self.steps, self.unit = start, end, steps, unit

        def __call__(self, step):
            point = ops.minimum(ops.floor_divide(ops.cast(step, "int32"), self.unit),
                                self.steps - 1)
            exponent = ops.cast(point, "float32") / float(self.steps - 1)
            return self.start * ops.power(self.end / self.start, exponent)

        def get_config(self):
            return {"start": self.start, "end": self.end, "steps": self.steps,
                    "unit": self.unit}

    return RangeRates


def range_schedule(settings: RangeSettings, unit: int = 1):
    """The test's rates as a Keras LearningRateSchedule on the optimizer's step counter, each
    rate held for `unit` steps."""
    return _range_class()(settings.start, settings.end, settings.steps, unit)


def range_test(model, data, compile_with, settings: RangeSettings = RangeSettings(),
               unit: int = 1, log=print, scope=None, verbose: int = 0) -> RangeResult:
    """The range test of `model` on `data` (a dataset of training batches, long enough or
    repeating): `compile_with(schedule)` compiles `model` with its optimizer on the Keras
    LearningRateSchedule given (the test's rates); each point trains `unit` batches at one rate
    and records their mean loss. `scope()`: a context (a distribution plan's) in which the
    model's variables are put back afterwards. A line every tenth of the steps."""
    import keras

    settings = settings.checked()
    scope = scope or contextlib.nullcontext
    kept = [keras.ops.convert_to_numpy(v) for v in model.variables]
    planned = rates(settings)
    result = RangeResult(settings, unit=unit)
    every = max(settings.steps // 10, 1)
    began = time.monotonic()

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            loss = float((logs or {}).get("loss", float("nan")))
            result.rates.append(float(planned[epoch]))
            result.losses.append(loss)
            result.smoothed = smooth(result.losses)
            stop = diverged(result.smoothed)
            if stop:
                result.stopped = "diverged"
                self.model.stop_training = True
            if stop or (epoch + 1) % every == 0:
                log(f"lr-find: step {epoch + 1}/{settings.steps}, rate {planned[epoch]:.3g}, "
                    f"loss {loss:.4g} (smoothed {result.smoothed[-1]:.4g})"
                    + (": diverged, stopping" if stop else ""))

    try:
        with scope():
            compile_with(range_schedule(settings, unit))
        # One epoch a point: Keras's loss is the mean over an epoch, reset at the next.
        model.fit(data, epochs=settings.steps, steps_per_epoch=unit, callbacks=[Record()],
                  shuffle=False, verbose=verbose)
    finally:
        with scope():
            for variable, value in zip(model.variables, kept):
                variable.assign(value)
    result.stopped = result.stopped or "end"
    result.seconds = time.monotonic() - began
    result.suggestion, result.index = suggest(result.rates, result.smoothed, settings.rule,
                                              settings.steps)
    if result.suggestion is not None:
        result.suggestion = float(f"{result.suggestion:.3g}")  # as said: a rate people type
    return result


def find(config: RunConfig, plan: Plan, settings: RangeSettings,
         log=print) -> RangeResult:
    """`corolla lr-find`: the range test of a new run of `config` (its settings resolved, its
    model built, as `training.run` does), with no run folder made."""
    log = log if plan.is_chief else (lambda *args: None)
    trainer = Trainer(prepare(config, plan, log, None), plan, log)
    return find_rate(trainer, settings, log)


def find_rate(trainer: Trainer, settings: RangeSettings, log=print) -> RangeResult:
    """The range test on a run's own model (`trainer`: built in its plan's scope), training
    stream and global batch, and its optimizer (its weight decay and accumulation; EMA off) on
    the test's rates, in the phase the run starts with. The model's variables are put back; the
    trainer compiles a fresh optimizer when it starts (`Trainer.start`). Several processes
    take the chief's suggestion."""
    ready, plan = trainer.ready, trainer.plan
    first = ready.phases[0]
    plain = dataclasses.replace(ready.config.train, ema=False)
    frozen = first.frozen and trainer.backbone is not None
    size = first.size or ready.config.model.input_size
    log(f"lr-find: rate from {settings.start:g} to {settings.end:g} over {settings.steps} "
        f"steps of {plan.global_batch} images at {size} px"
        + (", backbone frozen (the run's first phase)" if frozen else ""))
    result = range_test(trainer.model, trainer.data(0, first.size),
                        lambda schedule: trainer.configure(first, schedule=schedule, train=plain),
                        settings, unit=ready.unit, log=log, scope=plan.scope)
    trainer.current = None  # the test's optimizer: `start` compiles the run's own
    result.notes = {"model": ready.config.model.name, "global_batch": plan.global_batch,
                    "image_size": size, "optimizer": plain.optimizer,
                    "weight_decay": plain.weight_decay, "backbone_frozen": frozen}
    if plan.multi_worker:
        index = int(collective.chief_hex(plan, f"{(result.index or 0) + 1:x}"), 16) - 1
        result.index = index if index >= 0 else None
        result.suggestion = None if result.index is None else \
            float(f"{result.rates[result.index] / (10 if settings.rule == 'minimum' else 1):.3g}")
    return result


def train_at_found_rate(trainer: Trainer, settings: RangeSettings,
                        asked: TrainConfig, log=print) -> RangeResult:
    """`train --lr find`: the range test on the run's own model (`find_rate`), then the trainer
    follows the run's config at the rate suggested (`with_rate`; `asked`: the train settings
    before resolving). A loss that never fell is one line, before the run's folder is made."""
    found = find_rate(trainer, settings, log)
    if found.suggestion is None:
        raise no_suggestion(found)
    log(f"{found.line()}: the run trains at it")
    ready = trainer.ready
    trainer.adopt_plan(ready.planned(with_rate(ready.config, asked, found.suggestion), ready.steps))
    return found


def no_suggestion(result: RangeResult, flag: str = "--lr") -> UserError:
    """The error of a test whose loss never fell: what to do instead."""
    s = result.settings
    return UserError(f"the range test's loss never fell between rates {s.start:g} and "
                     f"{s.end:g} ({len(result.rates)} steps): no rate to suggest; pass "
                     f"{flag} RATE, or test other rates (corolla lr-find --start/--end/--steps)")


def with_rate(config: RunConfig, asked: TrainConfig,
              rate: float) -> RunConfig:
    """A resolved run config training at the found peak `rate`: its warm-up start and its
    minimum a tenth and a hundredth of it unless `asked` (the config before resolving) set
    them, and then at most the rate."""
    return with_settings(config, {
        "train.learning_rate": rate, "train.scale_lr": "none",
        "train.start_learning_rate": derived_rate(min(asked.start_learning_rate, rate)
                                                  if asked.start_learning_rate else rate / 10),
        "train.min_learning_rate": derived_rate(min(asked.min_learning_rate, rate)
                                                if asked.min_learning_rate else rate / 100)})
