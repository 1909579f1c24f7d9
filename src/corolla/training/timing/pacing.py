"""A timed run kept to its plan (`budget`'s arithmetic, in plain Python): where it stops short
of it (`Deadline`), and the plan made again mid-run from the pace of its epochs (`replanned`).

A plan is a forecast, and the margin it keeps for that leaves part of the budget unused on an
idle host. So the plan is made again after the first
epoch that trains on images (`replanned`), from the pace of its steps (`plan.TimePlan.replan`), to
fill REPLAN_SHARE of the budget: more epochs on a host faster than the probe found, fewer on a
busier one, the schedule's shape kept, so that its learning rate still ends at its floor;
where whole epochs leave part of one, one more, the epochs after it shorter. A run
that falls behind after that (a host that turned busier) stops short of its plan where the next
epoch would end past the budget (`Deadline`; `stop.StopInTime` stops it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

from corolla.config import RunConfig, TrainConfig
from corolla.config.schema import MAX_EPOCHS
from corolla.training.timing.budget import (
    Caching, Costs, epoch_seconds, most, most_steps, phases_at, shaped)

# What a plan made again from a trained epoch's measured pace fills (`replanned`): the pace is
# known then, and `Deadline` stops a run that falls behind it; its check of the next epoch with
# a tenth more still passes on pace at this share.
REPLAN_SHARE = 0.95


@dataclass(frozen=True)
class Refit:
    """What the refit after a validated training costs (`training.refit`): its epochs' costs
    from the probe's (`budget.refit_costs`: no validation), its frozen phases' caching of
    train + val, and its steps per epoch."""
    costs: Costs
    caching: Caching | None
    steps: int

    def each(self, plan_phases, final: int, steps: int = 0) -> list[float]:
        """Each refit epoch's estimated seconds over `plan_phases` (the validated training's)
        at `final` px, in epochs of `steps` steps (0: its own)."""
        return epoch_seconds(plan_phases, self.costs, final, steps or self.steps, self.caching)


@dataclass(frozen=True, kw_only=True)
class Deadline:
    """Where a timed run stops short of its plan to end inside its budget: on a host busier
    than the probe found, the plan's margin is not enough. After each epoch, the next one's
    planned seconds, stretched by how far behind its plan the run has fallen (`behind`: never
    shrunk, so a run ahead of its plan keeps the margin; the latest epochs' lag where it is
    more than the whole run's, which a host that turns busy late hides), must end with the final
    save inside the budget (`next_end`).

    `total`: the budget in seconds; `planned`: each epoch's planned seconds
    (`epoch_seconds`), from `planned_at` seconds spent when the plan was made; `save`: the
    final save's. Only the session that made the plan has it: a resumed run continues its
    plan as it was made. For the plan to be made again (`replanned`), what it was made of:
    the probe's `costs`, the `caching` of frozen phases, the `steps` of an epoch, and the
    epoch (counted from 1) after which it is made again (`replan_after`; 0: never).

    Where a refit follows (`refit`), it retrains every epoch the validated training trains,
    so an epoch more is only trained where its refit fits too: `refit_each`, the refit's
    seconds for each of the plan's epochs, counts in `next_end`, and `total` is the whole
    budget. (A fixed share for the validated training left a fifth of a 10-minute budget
    unused, the refit taking no more epochs than the validated training had, and on a host
    busier than the probe found it stopped a run before its first trained epoch.) `pace`: the
    pace the plan was made at, in times the probe's estimates (1 until it is made again), which
    the refit's plan scales the probe's costs by (`plan.TimePlan.refit_room`)."""
    total: float
    planned: tuple
    planned_at: float
    save: float
    costs: Costs = field(default_factory=Costs)
    caching: Caching | None = None
    steps: int = 0
    replan_after: int = 0
    refit: Refit | None = None
    refit_each: tuple = ()
    pace: float = 1.0

    def took(self, history: list[dict]) -> tuple:
        """The seconds each epoch of `history` took."""
        ends = [self.planned_at] + [row["seconds"] for row in history]
        return tuple(b - a for a, b in zip(ends, ends[1:]))

    def remade(self, history: list[dict], planned: list[float], pace: float,
               refit_each: tuple = ()) -> Deadline:
        """This deadline for the plan made again after the epochs of `history` at `pace`:
        those epochs as they took (the new plan's pace is theirs: their lag is not counted
        again), the new plan's `planned` seconds after them, and its refit's seconds for each
        of its epochs (`refit_each`, at that pace)."""
        return dataclasses.replace(self, planned=self.took(history) + tuple(planned),
                                   replan_after=0, refit_each=tuple(refit_each), pace=pace)

    def refit_pace(self, history: list[dict]) -> float:
        """The pace of the epochs of `history` in times the probe's estimates, as the refit's
        plan takes it: the plan's own pace, stretched by how far behind it they fell."""
        return self.pace * self.behind(history)

    def second_epoch_pace(self, history: list[dict], kind: tuple, final: int) -> tuple:
        """(pace, seconds of tracing) from the last epoch of `history`, a phase's second, of
        `kind` (frozen, size): its seconds over its plan's; the training step's tracing as long
        as the phase's first epoch took beyond it, by the share of the step's in the tracings
        the probe found there (the rest is validation's, at the `final` size)."""
        took, done = self.took(history), len(history)
        pace = took[-1] / max(self.planned[done - 1], 1e-9)
        first = self.costs.first[kind]
        share = first / max(first + self.costs.val_first[final], 1e-9)
        return pace, max(took[-2] - took[-1], 0.0) * share

    def behind(self, history: list[dict]) -> float:
        """How many times their planned seconds the epochs of `history` took: on the whole or
        in either of the last two, whichever is more (a host that turned busier lately; a
        phase's first epoch whose tracing took less than the probe's hides it on the whole);
        at least 1."""
        done = len(history)
        planned = self.planned[:done]
        if not history or sum(planned) <= 0:
            return 1.0
        took = self.took(history)
        ratios = [sum(took) / sum(planned)]
        ratios += [took[k] / planned[k] for k in range(max(0, done - 2), done) if planned[k] > 0]
        return max(1.0, *ratios)

    def next_end(self, history: list[dict]) -> float | None:
        """When the epoch after those of `history` (history.csv's rows: `seconds` is the
        training time up to each epoch's commit) would end, its final save included (both as
        far behind as the epochs: a tiny run on a busy host ended at 101% of its budget with
        the save as planned), in seconds of the budget, with a tenth more for the epoch (the
        epochs of a tiny run on a busy host vary by that much); with a refit, that of its
        epochs up to this one and its save after it; None after the last epoch."""
        done = len(history)
        if not history or done >= len(self.planned):
            return None
        behind = self.behind(history)
        refit = sum(self.refit_each[:done + 1]) + self.save if self.refit_each else 0.0
        return history[-1]["seconds"] + (1.1 * self.planned[done] + self.save + refit) * behind


def reshaped(train: TrainConfig, epochs: int) -> dict:
    """`shaped` for a plan made again mid-run: the frozen epochs of a run that thaws are
    trained already, and stay as they were."""
    out = shaped(train, epochs)
    if train.frozen_epochs < train.epochs:
        out["train.frozen_epochs"] = train.frozen_epochs
    return out


def remaining(config: RunConfig, phases_of, deadline: Deadline, done: int,
              pace: float, retrace: float, epochs: int, steps: int | None = None) -> list[float]:
    """The planned seconds of each epoch after the first `done` of the run's plan made again
    for `epochs` epochs of `steps` steps after `done` (None: the plan's), at `pace` times the
    probe's estimates. Another schedule than the plan's (other epochs or steps) traces the
    training step again (its rates are constants of the compiled step), in `retrace` seconds:
    the epoch after `done` pays them, unless it starts a phase, which traces anyway."""
    final, t = config.model.input_size, config.train
    steps = deadline.steps if steps is None else steps
    plan_phases = phases_at(config, phases_of, epochs, reshaped)
    each = [pace * s for s in epoch_seconds(plan_phases, deadline.costs, final, steps,
                                            deadline.caching)[done:]]
    other = epochs != t.epochs or steps != deadline.steps
    if other and each and next(p for p in plan_phases if p.end > done).start < done:
        each[0] += retrace
    return each


def refit_seconds(config: RunConfig, phases_of, deadline: Deadline,
                  epochs: int) -> list[float]:
    """The refit's estimated seconds for each epoch of the run's plan made again for `epochs`
    epochs (the probe's costs; none without a refit)."""
    if deadline.refit is None:
        return []
    return deadline.refit.each(phases_at(config, phases_of, epochs, reshaped),
                               config.model.input_size)


class Replanned(NamedTuple):
    """A plan made again (`replanned`): its `epochs`, and the `steps` of those after the
    epochs it was made after."""
    epochs: int
    steps: int


def replanned(config: RunConfig, phases_of, deadline: Deadline, done: int,
              pace: float, retrace: float, spent: float, unit: int = 1) -> Replanned:
    """(epochs, steps of those after `done`) of the run's plan made again after its first
    `done` epochs, `spent` seconds into the budget, at `pace` times the probe's estimates (as
    measured: `plan.TimePlan.replan`) with `retrace` seconds of tracing for another schedule than
    the plan's (`remaining`): the most epochs of the plan's steps whose epochs after `done` and
    the final save (and with a refit, its epochs and save) end by REPLAN_SHARE of the budget
    (`done`: the run ends, where not one more does); then, as `budget.epochs_that_fit` does, one
    epoch more where the epochs after `done` shortened to fewer steps (a multiple of `unit`, at
    least budget.SHORTEST of the plan's) make room for it: whole epochs leave up to one of them
    unused, a fifth of a short budget. `phases_of` as in `most_epochs`."""
    saves = 2 if deadline.refit is not None else 1
    left = REPLAN_SHARE * deadline.total - spent - saves * pace * deadline.save
    epochs = _most_replanned(config, phases_of, deadline, done, pace, retrace, left)
    return _shortened(config, phases_of, deadline, done, pace, retrace, left, epochs, unit) \
        or Replanned(epochs, deadline.steps)


def _after(config, phases_of, deadline: Deadline, done: int, pace: float, retrace: float,
           epochs: int, steps: int | None = None) -> float:
    """The seconds after `done` of a plan made again for `epochs` epochs of `steps`
    (`remaining`), with its refit's."""
    return sum(remaining(config, phases_of, deadline, done, pace, retrace, epochs, steps)) + \
        pace * sum(refit_seconds(config, phases_of, deadline, epochs))


def _shortened(config, phases_of, deadline: Deadline, done: int, pace: float, retrace: float,
               left: float, epochs: int, unit: int) -> Replanned | None:
    """(`epochs` + 1, the most steps below the plan's at which the epochs after `done` fit in
    `left` seconds), where those are at least budget.SHORTEST of the plan's and train more steps in
    all than `epochs`; else None."""
    more, steps = epochs + 1, deadline.steps
    if more > MAX_EPOCHS:
        return None
    fits = most_steps(
        left, lambda each: _after(config, phases_of, deadline, done, pace, retrace, more, each),
        steps, unit)
    # (Not where the epoch more's own start and validation would take what it adds.)
    trains_more = (more - done) * fits > (epochs - done) * steps
    return Replanned(more, fits) if fits and trains_more else None


def _most_replanned(config, phases_of, deadline: Deadline, done: int, pace: float,
                    retrace: float, left: float) -> int:
    """The most epochs of the plan's steps whose seconds after `done` fit in `left`."""
    planned = config.train.epochs

    def fits(epochs):
        return _after(config, phases_of, deadline, done, pace, retrace, epochs) <= left

    # Leaving the plan's own epochs aside (they need no new tracing), the time grows with
    # the epochs.
    low = most(fits, done, MAX_EPOCHS)
    return planned if low < planned and fits(planned) else low
