"""Training for a time budget (`train.time_budget`, `--time 10m`): the recipe's
schedule fitted to the time, its epochs from measured time.

The recipe's epochs are the shape of the run, not its length: `shaped` scales the warm-up,
the frozen-head epochs, the sustain and the per-epoch decay of the `ramp` schedule to another
number of epochs (progressive resizing and the cosine are fractions of the run already), so
the schedule still ends at its floor when the time ends.

How long an epoch takes is measured by a short timed probe before the first epoch (`probe`),
not by timing the first epoch itself: a recipe's first epoch is unlike its others
(cpu-finetune's trains a head on cached features, cpu's runs at 96 px of a ramp to 176), and
its learning rate already depends on the number of epochs (a cosine without warm-up decays
from the first step), so a plan made after it would change an epoch already trained. The
probe trains a few steps of every kind of epoch the plan holds (frozen or not, each image
size; a kind's first step, which traces the step function, is timed apart: every phase pays it
again; a frozen phase whose features are cached, a few batches of the caching pass itself, a
`predict` slower per image than a frozen training step, so it is measured, not estimated from
one), one validation pass (its first
batch, which traces, timed apart: each phase's compile makes Keras trace its predict function
again) and one epoch's commit (at a smaller size a short budget may choose, the
costs are estimated by the pixels to choose it, then measured there); its own time, the
model's build and the data's opening count against the budget as time already spent.

Epochs come whole, so the most that fit can leave most of an epoch unused (in a short budget,
most of the time left): where one epoch more fits
at SHORTEST of its steps or more, the plan takes it with fewer steps each (`epochs_that_fit`).

A plan is a forecast: `pacing` keeps a run to it (its deadline, and the plan made again from
the pace of its first epochs).

This module is the arithmetic (plain Python): `probe` measures, `plan.TimePlan` applies,
`stop.StopInTime` stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from corolla.config import RunConfig, TrainConfig, format_duration, with_settings
from corolla.config.schema import MAX_EPOCHS
from corolla.errors import UserError

PROBE_STEPS = 4  # timed steps per kind of epoch, after its first (the tracing)
# The plan fills this share of the time left: epochs on a busy host run longer than the probe
# measured them, and what they add must stay inside the budget until the plan is made again
# from the run's own pace (figures: docs/benchmarks.md#figures-behind-the-defaults).
MARGIN = 0.8
SIZE_STEP = 16  # a short budget's input size steps down by this (`candidates`)
# One epoch more, each shorter, where the whole epochs that fit leave time unused (`shortened`),
# if an epoch keeps at least this share of its steps: a short budget's whole epochs can leave
# nearly half of it unused, where two shorter ones (a frozen head and a trained epoch) fit.
SHORTEST = 0.5
# Where the plan's first epoch on images is its last, nothing measures the run's pace in time
# for the plan to be made again (`pacing.replanned`), and the margin kept for the forecast stays
# unused (a third of a 6-minute budget, where the probe found the step slower than the epoch
# then ran). There, one epoch more is taken (`epochs_that_fit`) at this share of an epoch's
# steps or more, so that the first measures the pace and the plan is made again.
SHORTEST_TO_REPLAN = 0.25


@dataclass
class Costs:
    """Measured seconds: per training step, for a phase's first step beyond that (its
    tracing) and for every epoch's first step beyond that (its new pass over the data), by
    kind (frozen, size); per validation pass by size, and a phase's first pass beyond that
    (its tracing); per epoch's commit (`backup`: the checkpoint's files); per batch of the
    frozen features' caching pass (`Caching`) by size, and its tracing beyond that; the final
    save (`save`: last.keras and model.keras, each a whole model where a commit writes weights;
    0: as a commit, `final_save`). Where trained phases train the backbone's top on its lower
    part's cached outputs (`thawed.ThawedPath`), a trained step is the top's, and
    `thawed_cache` the seconds of caching them by size (every view of every training image),
    paid once by the first trained epoch at that size."""
    step: dict = field(default_factory=dict)
    first: dict = field(default_factory=dict)
    epoch: dict = field(default_factory=dict)
    val: dict = field(default_factory=dict)
    val_first: dict = field(default_factory=dict)
    backup: float = 0.0
    cache: dict = field(default_factory=dict)
    cache_first: dict = field(default_factory=dict)
    save: float = 0.0
    thawed_cache: dict = field(default_factory=dict)

    def final_save(self) -> float:
        """The final save's seconds: as measured, else as a commit's."""
        return self.save or self.backup

    def copy(self) -> Costs:
        """A copy whose tables can change without changing these."""
        return Costs(**{k: dict(v) if isinstance(v, dict) else v for k, v in vars(self).items()})


def cached_views(flips: bool, epochs: int) -> int:
    """The views of each training image a frozen phase of `epochs` epochs caches features of
    (`features.FrozenPath.fit`; trained phases at a size their backbone's lower part's
    outputs alike: `thawed.ThawedPath.fit`): with flips, the image and its mirror image, except
    in a phase of one epoch, which draws one view per image, and the image as it is serves as
    well as a mirror image drawn at random (half the caching, a large share of a short
    budget)."""
    return 2 if flips and epochs > 1 else 1


@dataclass(frozen=True)
class Caching:
    """How a run's frozen phases train on cached features (`features.FrozenPath.fit`): a pass
    over the training images per view (`cached_views`, `train` batches each) at the phase's
    size and one over the val images (`val` batches) at the final size, once; then a head epoch
    costs its backup (its steps and its validation on features are negligible beside it)."""
    flips: bool
    train: int
    val: int


def shaped(train: TrainConfig, epochs: int) -> dict:
    """The config updates that keep the recipe's schedule (`train`, with its own epochs) in
    shape over `epochs`: the warm-up, sustain and frozen epochs keep their share of the run
    (at least one frozen and one trained epoch where the recipe has both and `epochs` allows;
    one epoch is the frozen one: on cached features, a timed run fits its linear head there,
    its floor), and the ramp's decay per epoch its decay over the run."""
    r = epochs / train.epochs
    frozen = train.frozen_epochs and max(1, min(round(train.frozen_epochs * r), epochs - 1))
    if train.frozen_epochs >= train.epochs:  # a recipe that never thaws stays frozen
        frozen = epochs
    return {"train.epochs": epochs, "train.frozen_epochs": frozen,
            "train.warmup_epochs": train.warmup_epochs * r,
            "train.sustain_epochs": train.sustain_epochs * r,
            "train.lr_decay": train.lr_decay ** (1 / r) if train.lr_decay else 0.0}


def kinds(plan_phases, final: int) -> set:
    """The kinds of epoch (frozen, size) in a list of phases (`phases.phases`)."""
    return {(p.frozen, p.size or final) for p in plan_phases}


def seconds(plan_phases, costs: Costs, final: int, steps: int,
            caching: Caching | None = None) -> float:
    """The training time of phases (`epoch_seconds`) and the final save (about a commit)."""
    return costs.final_save() + sum(epoch_seconds(plan_phases, costs, final, steps, caching))


def epoch_seconds(plan_phases, costs: Costs, final: int, steps: int,
                  caching: Caching | None = None) -> list[float]:
    """Each epoch's training time: its steps, its start, a validation pass at the final size
    and its commit; a phase's first epoch also its first step's and its first validation's
    tracing.
    With `caching` (frozen phases on cached features), a frozen phase's first epoch costs its
    caching passes instead, and each epoch its backup. The probe has traced the caching at its
    size (the run predicts with the same model); the val pass at another final size traces
    again."""
    out, built = [], set()
    for p in plan_phases:
        kind, epochs = (p.frozen, p.size or final), p.end - p.start
        if p.frozen and caching:
            size = p.size or final
            at_final = costs.cache.get(final, costs.cache[size] * (final / size) ** 2)
            views = cached_views(caching.flips, epochs)
            first = views * caching.train * costs.cache[size] + caching.val * at_final + \
                (costs.cache_first[size] if size != final else 0.0)
            out += [first + costs.backup] + [costs.backup] * (epochs - 1)
            continue
        each = steps * costs.step[kind] + costs.epoch[kind] + costs.val[final] + costs.backup
        first = costs.first[kind] + costs.val_first[final]
        if not p.frozen and kind[1] not in built:  # the lower part's outputs, once a size
            first += costs.thawed_cache.get(kind[1], 0.0)
            built.add(kind[1])
        out += [first + each] + [each] * (epochs - 1)
    return out


def refit_steps(steps: int, counts: tuple[int, int]) -> int:
    """A refit epoch's steps (`training.refit`): the validated epoch's `steps` over train +
    val (`counts`: their photos)."""
    return math.ceil(steps * sum(counts) / counts[0])


def refit_costs(costs: Costs, caching: Caching | None, train: int,
                val: int) -> tuple[Costs, Caching | None]:
    """The costs of a refit's epochs (`training.refit`), from the validated run's: no
    validation pass; frozen features cached of train + val (`train`, `val` photos) alike."""
    out = costs.copy()
    out.val = {size: 0.0 for size in costs.val}
    out.val_first = {size: 0.0 for size in costs.val_first}
    out.thawed_cache = {size: s * (train + val) / train for size, s in costs.thawed_cache.items()}
    if caching is None:
        return out, None
    batches = math.ceil(caching.train * (train + val) / train)
    return out, Caching(caching.flips, batches, 0)


def validated_share(config: RunConfig, phases_of, costs: Costs, steps: int,
                    caching: Caching | None, train: int, val: int) -> float:
    """The share of a budget's time left that a run refit afterwards (`train.refit`) gives its
    validated training, so that its refit fits in the rest: their estimated seconds over the
    recipe's epochs, the refit's epochs a pass over train + val (`train` + `val` photos, steps
    scaled alike) with no validation (`refit_costs`). Arguments as in `most_epochs`."""
    final = config.model.input_size
    plan_phases = phases_of(config.train, final)
    validated = seconds(plan_phases, costs, final, steps, caching)
    costs_r, caching_r = refit_costs(costs, caching, train, val)
    refit = seconds(plan_phases, costs_r, final, refit_steps(steps, (train, val)), caching_r)
    return validated / (validated + refit)


def scaled(costs: Costs, measured: int, size: int) -> Costs:
    """`costs` with those missing at `size` px estimated from those at `measured` px, by the
    pixels (what a convolution's work scales with): only to choose the size to measure."""
    ratio = (size / measured) ** 2
    out = costs.copy()
    for frozen, at in list(costs.step):
        if at == measured:  # the tracing and an epoch's start kept: not only the pixels' work
            out.step.setdefault((frozen, size), costs.step[(frozen, at)] * ratio)
            out.first.setdefault((frozen, size), costs.first[(frozen, at)])
            out.epoch.setdefault((frozen, size), costs.epoch[(frozen, at)])
    if measured in costs.cache:
        out.cache.setdefault(size, costs.cache[measured] * ratio)
        out.cache_first.setdefault(size, costs.cache_first[measured])
    if measured in costs.thawed_cache:
        out.thawed_cache.setdefault(size, costs.thawed_cache[measured] * ratio)
    out.val.setdefault(size, costs.val[measured] * ratio)
    out.val_first.setdefault(size, costs.val_first[measured])
    return out


def phases_at(config: RunConfig, phases_of, epochs: int, shape=None) -> list:
    """The run's phases (`phases_of(train, size)`, as in `most_epochs`) at its final size, its
    schedule reshaped to `epochs` by `shape(train, epochs)`: `shaped`, unless told (a plan
    made again mid-run: `pacing.reshaped`)."""
    settings = (shape or shaped)(config.train, epochs)
    return phases_of(with_settings(config, settings).train, config.model.input_size)


def most_epochs(config: RunConfig, phases_of, costs: Costs, left: float,
                steps: int, caching: Caching | None = None) -> tuple[int, float]:
    """(the most epochs whose training fits in `left` seconds, their estimated seconds); (0,
    seconds of one epoch) when not even one does. `phases_of(train, size)`: the run's phases
    (`phases.phases`) of a train config at a final size; `caching` as in `seconds`."""
    final = config.model.input_size

    def cost(epochs):
        return seconds(phases_at(config, phases_of, epochs), costs, final, steps, caching)

    one = cost(1)
    if one > left:
        return 0, one
    epochs = most(lambda n: cost(n) <= left, 1, MAX_EPOCHS)
    return epochs, cost(epochs)


def most(fits, low: int, high: int) -> int:
    """The most n from `low` (which fits) to `high` for which `fits(n)`, where `fits` holds up
    to some n and not beyond it: the step doubled from `low` while it fits, then the gap
    halved; a few calls of `fits`, each a plan's arithmetic. The one search of a time budget:
    its epochs (`most_epochs`), a plan made again (`pacing.replanned`), a refit's longer
    epochs (`training.refit`)."""
    top = low + 1
    while top <= high and fits(top):
        low, top = top, min(2 * top, high + 1)
    while top - low > 1:  # `low` fits; `top` does not, or is past `high`
        mid = (low + top) // 2
        low, top = (mid, top) if fits(mid) else (low, mid)
    return low


def shortened(config: RunConfig, phases_of, costs: Costs, left: float, steps: int,
              epochs: int, caching: Caching | None = None, unit: int = 1,
              shortest: float = SHORTEST) -> int:
    """The most steps per epoch (a multiple of `unit`, fewer than `steps`, at least `shortest`
    of them) at which `epochs` + 1 epochs fit in `left` seconds, else 0: the time whole epochs
    leave is a part of an epoch, and an epoch more (shorter ones) uses it. The arguments as in
    `most_epochs`; `unit`: what an epoch's steps are a multiple of (`preparing.epoch_unit`)."""
    if epochs < 1 or epochs + 1 > MAX_EPOCHS:
        return 0
    final = config.model.input_size
    plan_phases = phases_at(config, phases_of, epochs + 1)
    return most_steps(left, lambda each: seconds(plan_phases, costs, final, each, caching),
                      steps, unit, shortest)


def most_steps(left: float, cost, steps: int, unit: int = 1, shortest: float = SHORTEST) -> int:
    """The most steps per epoch (a multiple of `unit`, fewer than `steps`, at least `shortest`
    of them) at which `cost(steps per epoch)`, seconds linear in them, is within `left`, else 0.
    The one rule for shortening epochs, in a plan (`shortened`) and one made again mid-run."""
    fixed = cost(0)
    per_step = cost(1) - fixed
    fits = int((left - fixed) // per_step) if per_step > 0 else 0
    fits = min(fits, steps - 1) // unit * unit
    return fits if fits >= math.ceil(shortest * steps) else 0


# Why `epochs_that_fit` took an epoch more of fewer steps (the plan's line says it).
TIME_LEFT = "in the time whole ones left"
TO_REPLAN = "so that the plan is made again from the first trained epoch's pace"


class EpochsFit(NamedTuple):
    """The epochs a plan takes (`epochs_that_fit`): how many, their `steps` each, their
    `estimate`d seconds and `why` they are shorter than the steps asked for ("" where they are
    not)."""
    epochs: int
    steps: int
    estimate: float
    why: str


def epochs_that_fit(config: RunConfig, phases_of, costs: Costs, left: float, steps: int,
                    caching: Caching | None = None, unit: int = 1,
                    replans=None) -> EpochsFit:
    """(epochs, steps per epoch, their estimated seconds, why the epochs are shorter than
    `steps`): the most whole epochs of `steps` that fit in `left` seconds, or one more of fewer
    steps where that fits (`shortened`; TIME_LEFT); (0, `steps`, one epoch's seconds, "")
    where not even one does. `replans(plan_phases, steps)`: whether a plan of those phases and
    steps an epoch is made again mid-run; where the plan found is not, one epoch more of
    SHORTEST_TO_REPLAN of the steps or more, where that fits and is (TO_REPLAN). Other
    arguments as in `shortened`."""
    epochs, estimate = most_epochs(config, phases_of, costs, left, steps, caching)
    each, why = steps, ""
    short = shortened(config, phases_of, costs, left, steps, epochs, caching, unit)
    if short:
        epochs, each, why = epochs + 1, short, TIME_LEFT
    if epochs and replans is not None and not replans(phases_at(config, phases_of, epochs), each):
        short = shortened(config, phases_of, costs, left, steps, epochs, caching, unit,
                          SHORTEST_TO_REPLAN)
        if short and replans(phases_at(config, phases_of, epochs + 1), short):
            epochs, each, why = epochs + 1, short, TO_REPLAN
    if each == steps:
        return EpochsFit(epochs, steps, estimate, why)
    return EpochsFit(epochs, each, seconds(phases_at(config, phases_of, epochs), costs,
                                           config.model.input_size, each, caching), why)


def candidates(config: RunConfig) -> list[int]:
    """The input sizes a budget may train at, largest first: model.input_size, then (with
    train.time_min_epochs) down by SIZE_STEP to train.time_min_size."""
    size, t = config.model.input_size, config.train
    if not t.time_min_epochs or not t.time_min_size or t.time_min_size >= size:
        return [size]
    return list(range(size, t.time_min_size - 1, -SIZE_STEP))


def least_budget(spent: float, one: float, share: float = 1.0, after: float = 0.0) -> int:
    """The least budget that holds one epoch of `one` s after `spent` s of start-up and probe
    in the `share` of its time left the run has (`validated_share`), with `after` s for what
    follows training (`after_training`), rounded up to 10 s."""
    return math.ceil((spent + after + one / (MARGIN * share)) / 10) * 10


# A time budget is the whole command's: what follows training is kept out of the time the
# plan fills (`after_training`). The report's plots, pages and files beyond its predictions are
# bounded by this; its explanations (`report.scored.EXPLAINED` right and as many wrong), a
# forward and a backward pass each, count as three predictions of an image.
REPORT_SECONDS = 8.0
EXPLAINED_IMAGES = 12


def after_training(costs: Costs, final: int, batch: int, val: int, test: int,
                   refit: bool) -> float:
    """The seconds a command spends after training, at `final` px in batches of `batch`: the
    `val` images scored and the `test` images predicted, each batch at the probe's cost of a
    val batch, each pass traced again (the test split's predicted by the refit where there is
    one, loaded first: about half the final save's two models); the report's explanations
    and REPORT_SECONDS."""
    val_batches = max(-(-val // batch), 1)
    batches = val_batches + -(-test // batch) + -(-3 * EXPLAINED_IMAGES // batch)
    tracings = 2 + bool(test)
    return batches * costs.val[final] / val_batches + tracings * costs.val_first[final] + \
        (costs.final_save() / 2 if refit else 0.0) + REPORT_SECONDS


class TooShort(UserError):
    """A budget that holds no epoch (`what`: or where the first is the linear head's, not its
    frozen features) with `after` s kept for what follows training, naming the least that
    would (`least`, in seconds). `budget`, `measured`:
    the budget, and what the probe found in words (a k-fold run words its own error with
    them)."""

    def __init__(self, budget: str, spent: float, one: float, recipe: str, share: float = 1.0,
                 what: str = "one epoch", after: float = 0.0):
        self.budget, self.least = budget, least_budget(spent, one, share, after)
        kept = f", {after:.0f} s are kept for the evaluation and predictions after training" \
            if after else ""
        self.measured = (f"{spent:.0f} s went on starting and measuring{kept}, and {what} would "
                         f"take ~{one:.0f} s more" + ("" if share == 1 else
                                                      f" in the {share:.0%} of the time left "
                                                      f"before the refit"))
        super().__init__(
            f"--time {budget} (train.time_budget) is too short for {what} of recipe "
            f"{recipe} here: {self.measured}; give at least --time "
            f"{format_duration(self.least)}")


# TooShort's `what` where a run's first epoch fits the linear head on cached frozen features.
LINEAR_HEAD = "the frozen features and the linear head"


def plan_line(budget: str, epochs: int, estimate: float, spent: float, note: str,
              after: float = 0.0) -> str:
    """The one line that says the plan: `time 10m: 14 epochs of ~38 s (measured), ...`;
    `after`: the seconds kept for what follows training (`after_training`)."""
    epoch = estimate / epochs
    return (f"time {budget}: {epochs} epoch{'s' * (epochs != 1)} of "
            f"~{epoch:.{0 if epoch >= 10 else 1}f} s "
            f"(measured by a "
            f"probe, validation and backups included){note}, ~{estimate / 60:.1f} min "
            f"planned after {spent:.0f} s of start-up and probe"
            + (f", ~{after:.0f} s kept for the evaluation and predictions after it"
               if after else ""))
