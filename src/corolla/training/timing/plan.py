"""A run fitted to its time budget (`train.time_budget`, `--time`), in one object (`TimePlan`):
measured by the probe (`probe`), planned by `budget`'s arithmetic at the largest input size that
leaves the recipe train.time_min_epochs (else the smallest it allows), recorded in the run's
time_plan.json (`runs.time_plan_file`), planned again after its first epoch trained on images
from that epoch's pace (`pacing`), kept to its deadline after every epoch (`stop.StopInTime`),
and where a refit follows, the refit's room in the time left (`RefitRoom`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from corolla.config import RunConfig, duration_seconds, with_settings
from corolla.runs import rundir
from corolla.runtime import collective
from corolla.runtime.clock import SYSTEM_CLOCK, Clock
from corolla.training.timing import budget, pacing, probe
from corolla.training.phases import Phase, of_config, phases
from corolla.training.preparing import Prepared
from corolla.training.trainer import Trainer


@dataclass(frozen=True)
class Fit:
    """The plan at one input size, in the time left (`TimePlan.fit`): the run's `config` at
    that size; `budget.epochs_that_fit`'s `epochs`, `steps` per epoch, `estimate` (seconds) and
    `why` its epochs are shorter; the `share` of the time left the validated training has (1,
    or with a refit `budget.validated_share`); the seconds kept `after` training
    (`budget.after_training`)."""
    config: RunConfig
    epochs: int
    steps: int
    estimate: float
    why: str
    share: float
    after: float


@dataclass(frozen=True)
class RefitRoom:
    """The time a validated training leaves its refit (`TimePlan.refit_room`): `left` seconds
    for its epochs, each planned epoch's estimated seconds by steps (`each_at`, at the
    validated epochs' pace), the monotonic time on `clock` the budget (less what follows
    training) `ends` and the final save's seconds (`save`). `training.refit.make_plan` takes
    the epochs that fit; a refit fills the time left, so a host that turns busier during it
    would end it past the budget without its deadline (`deadline`; in the session that planned
    it alone)."""
    left: float
    each_at: Callable[[int], list]
    ends: float = math.inf
    save: float = 0.0
    clock: Clock = SYSTEM_CLOCK  # what `ends` is read on

    def deadline(self, began: float, epochs: int, steps: int) -> pacing.Deadline:
        """The `pacing.Deadline` of a refit of `epochs` epochs of `steps` steps that starts
        at monotonic time `began` (its history counts from there)."""
        return pacing.Deadline(total=self.ends - began,
                               planned=tuple(self.each_at(steps)[:epochs]), planned_at=0.0,
                               save=self.save)


class TimePlan:
    """A run's time budget: its plan made (`make`), made again after its first epoch trained
    on images (`replan`, after `replan_after`), its deadline (`deadline`, which the trainer's
    `stop.StopInTime` keeps after every epoch) and its refit's room (`refit_room`). It reads
    the trainer's clock (`Trainer.clock`), from `began`: when the run started (the budget counts
    from there). Only the session that made the plan has this: a resumed run continues the
    plan as it was made (its time_plan.json)."""

    def __init__(self, trainer: Trainer, val_split, began: float, log):
        self.trainer, self.val_split, self.began, self.log = trainer, val_split, began, log
        self.clock = trainer.clock
        t = trainer.ready.config.train
        self.budget_text, self.total = t.time_budget, duration_seconds(t.time_budget)
        self.costs = budget.Costs()  # what the probe measured, added to at each size
        self.caching = self._caching()

    @property
    def deadline(self) -> pacing.Deadline | None:
        """The plan's deadline, as the trainer trains by it (the latest plan's)."""
        return self.trainer.ready.deadline

    @property
    def replan_after(self) -> int:
        """The epoch (counted from 1) after which the plan is made again; 0: never."""
        return self.deadline.replan_after if self.deadline is not None else 0

    def _phases_of(self, train, size):
        """The run's phases (`phases.phases`) of a train config at a final size (its frozen
        epochs as `_frozen_epochs` says)."""
        train = dataclasses.replace(train, frozen_epochs=self._frozen_epochs(
            train.thaw_from_head, train.frozen_epochs, train.epochs))
        return phases(train, self.trainer.ready.config.model.train_backbone, size)

    def _frozen_epochs(self, thaw_from_head: bool, frozen: int, epochs: int) -> int:
        """The frozen epochs of `frozen` of `epochs` as this run plans them: one where it
        thaws from the linear head it fits there (`train.thaw_from_head`, the frozen phase on
        cached features: `Trainer.thaw_from_head`), whose later frozen epochs would be undone
        at the thaw; `frozen` otherwise."""
        if thaw_from_head and self.caching and 1 < frozen < epochs:
            return 1
        return frozen

    def _caching(self) -> budget.Caching | None:
        """How the run's frozen phases train on cached features (`features.FrozenPath`: passes
        over the training images), or None where they do not."""
        trainer = self.trainer
        config, t = trainer.ready.config, trainer.ready.config.train
        if not ((t.frozen_epochs or not config.model.train_backbone) and
                trainer.frozen.usable(Phase(0, 1, True), say=False)):
            return None
        batch = trainer.plan.inference_batch
        return budget.Caching("flip" in config.data.augment,
                              -(-trainer.ready.layout.split("train").count // batch),
                              -(-self.val_split.count // batch))

    def make(self) -> Prepared:
        """The trainer's preparation fitted to its time budget, adopted by the trainer: the
        config's epochs, steps per epoch (`budget.epochs_that_fit`) and input size, with the
        plan's line in train.time_plan; a budget too short for one epoch is an error naming
        the least that would do. A recipe whose frozen phase trains on cached features plans
        it first whatever the budget (`budget.shaped`): its first epoch fits the linear head,
        so a budget that holds no thawed epoch still gives that model, and only one too short
        for the features is refused."""
        trainer, log = self.trainer, self.log
        ready = trainer.ready
        config, steps, t = ready.config, ready.steps, ready.config.train
        # Several processes must agree on the plan: they all probe (the probe's steps are
        # collective), at the recipe's size alone, and take the chief's epochs and steps.
        multi = trainer.plan.multi_worker
        sizes = [config.model.input_size] if multi else budget.candidates(config)
        fit, size = self.fit(sizes[0]), sizes[0]
        # Fewer epochs than the recipe wants: the size where they fit, chosen on the costs
        # estimated by the pixels, then measured there.
        for size in sizes[1:] if fit.epochs < t.time_min_epochs else ():
            if self.fit(size, scaled_from=sizes[0]).epochs >= t.time_min_epochs:
                break
        if size != sizes[0]:
            fit = self.fit(size)
        epochs, epoch_steps = fit.epochs, fit.steps
        if multi:
            epochs, epoch_steps = (int(collective.chief_hex(trainer.plan, f"{n:x}"), 16)
                                   for n in (epochs, epoch_steps))
        spent = self.clock.since(self.began)
        if not epochs:  # (a first epoch on cached features holds the linear head: its least)
            raise budget.TooShort(t.time_budget, spent, fit.estimate, t.recipe, fit.share,
                                  budget.LINEAR_HEAD if self.caching else "one epoch",
                                  fit.after)
        note = "" if size == sizes[0] else \
            f", at {size} px (at {sizes[0]} px fewer than the {t.time_min_epochs} epochs wanted)"
        if epoch_steps != steps:  # (a worker takes the chief's steps, and so its reason)
            note += f", {epoch_steps} steps each (of {steps}: one epoch more " \
                f"{fit.why or budget.TIME_LEFT})"
        if self.caching and epochs <= budget.shaped(t, epochs)["train.frozen_epochs"] < t.epochs:
            note += ", the frozen one alone (no time for a thawed epoch): the model is the " \
                "linear head"
        log(probe_line(self.costs, trainer.plan.inference_batch))
        if fit.share < 1:
            log(f"time {t.time_budget}: {fit.share:.0%} of the time left for the validated "
                f"training, the rest for its refit on train + val (as the probe measured their "
                f"epochs)")
        line = budget.plan_line(t.time_budget, epochs, fit.estimate, spent, note, fit.after)
        log(line)
        # train.time_steps: only a shortened epoch's (a resumed run reads it: `epoch_steps`).
        shortened = epoch_steps * (epoch_steps != steps)
        shape = budget.shaped(t, epochs)
        shape["train.frozen_epochs"] = self._frozen_epochs(
            t.thaw_from_head, shape["train.frozen_epochs"], epochs)
        planned = with_settings(fit.config, {**shape, "train.time_steps": shortened,
                                             "train.time_plan": line.partition(": ")[2]})
        # The plan's epochs, each as measured, for the run to stop short of them where it falls
        # behind (`pacing.Deadline`); where a refit follows, its epochs count there too.
        plan_phases = of_config(planned)
        refit = self._refit(epoch_steps) if t.refit == "on" else None
        deadline = pacing.Deadline(
            total=self.total - fit.after,  # (the budget less what follows training)
            planned=tuple(budget.epoch_seconds(plan_phases, self.costs, size, epoch_steps,
                                               self.caching)),
            planned_at=spent, save=self.costs.final_save(), costs=self.costs,
            caching=self.caching, steps=epoch_steps,
            replan_after=self._replan_after(plan_phases, epoch_steps), refit=refit,
            refit_each=() if refit is None else tuple(refit.each(plan_phases, size)))
        made = ready.planned(planned, epoch_steps, deadline)
        trainer.adopt_plan(made)
        return made

    def fit(self, size: int, scaled_from: int | None = None) -> Fit:
        """The plan at `size` px in the time left before the budget, less what follows
        training, on costs the probe adds to `costs` at that size, or, `scaled_from` another
        size measured, estimated from those (`budget.scaled`)."""
        trainer = self.trainer
        ready = trainer.ready
        config, steps, t = ready.config, ready.steps, ready.config.train
        counts = (ready.layout.split("train").count, self.val_split.count)
        test = ready.layout.split("test").count if ready.layout.has_split("test") else 0
        sized = with_settings(config, {"model.input_size": size})
        if scaled_from is None:
            # Every kind any number of epochs may hold: each size of the ramp, frozen or not.
            ramp = (size - t.start_size) // budget.SIZE_STEP + 2 if t.start_size else 1
            every = dataclasses.replace(sized.train, epochs=max(t.epochs, ramp),
                                        size_ramp_start=0.0, size_ramp_end=1.0)
            probe.measure(trainer, budget.kinds(self._phases_of(every, size), size), self.costs,
                          size, self.val_split, cached=bool(self.caching))
        known = self.costs if scaled_from is None else \
            budget.scaled(self.costs, scaled_from, size)
        share = budget.validated_share(sized, self._phases_of, known, steps, self.caching,
                                       *counts) if t.refit == "on" else 1.0
        after = budget.after_training(known, size, trainer.plan.inference_batch,
                                      self.val_split.count, test, t.refit == "on")
        left = budget.MARGIN * share * (self.total - after - self.clock.since(self.began))
        # A shortened epoch's steps stay whole units (`preparing.epoch_steps`).
        fits = budget.epochs_that_fit(
            sized, self._phases_of, known, left, steps, self.caching, ready.unit,
            lambda plan_phases, n: bool(self._replan_after(plan_phases, n)))
        if not fits.epochs and self.caching and share < 1:
            # The linear head alone needs no share for a refit: the frozen epoch never
            # replaces it (`Checkpoint.may_keep`), and its refit is the head fit on train + val
            # from the features at hand, in seconds (`saving.head_refit`).
            share = 1.0
            if fits.estimate <= budget.MARGIN * (self.total - after -
                                                 self.clock.since(self.began)):
                fits = budget.EpochsFit(1, fits.steps, fits.estimate, "")
        return Fit(sized, fits.epochs, fits.steps, fits.estimate, fits.why, share, after)

    def _refit(self, steps: int) -> pacing.Refit:
        """The refit's costs (`pacing.Refit`) for a validated training of `steps` steps an
        epoch."""
        counts = (self.trainer.ready.layout.split("train").count, self.val_split.count)
        refit_costs, refit_caching = budget.refit_costs(self.costs, self.caching, *counts)
        return pacing.Refit(refit_costs, refit_caching, budget.refit_steps(steps, counts))

    def _replan_after(self, plan_phases, steps: int) -> int:
        """The epoch (counted from 1) after which the plan is made again (`replan`): the first
        that trains on images (a frozen phase on cached features measures nothing of them),
        timed step by step (`stop.StopInTime.measured`), or where its `steps` are fewer than
        three executions, the phase's second, which traces nothing; unless it is the last; 0
        where there is none. A phase's first epoch as a whole is no measure of the pace: its
        step is traced again, often in a fraction of the probe's first tracing (which set up
        what the run reuses), so a tiny run's took half its plan, and the plan made from it
        ran twice its pace."""
        trainer = self.trainer
        timed = steps // trainer.ready.steps_per_execution >= 3
        for p in plan_phases:
            if trainer.frozen.usable(p, say=False) or (not timed and p.end - p.start < 2):
                continue
            after = p.start + (1 if timed else 2)
            return after if after < plan_phases[-1].end else 0
        return 0

    def replan(self, run_dir) -> None:
        """The trainer's plan made again after its epoch `replan_after` (`pacing.replanned`),
        from the pace that epoch measured (its steps' against the probe's, or where they were
        not timed, the epoch's against its plan): where its epochs or the steps of those after
        it change, recorded in the run's time_plan.json and config (a resumed run continues the
        new plan) and the optimizer put on the new schedule. Every process takes the chief's
        epochs and steps."""
        trainer, log = self.trainer, self.log
        ready = trainer.ready
        config, deadline, t = ready.config, ready.deadline, ready.config.train
        history = trainer.checkpoint.state.history
        done, spent = len(history), history[-1]["seconds"]
        kind = (trainer.current.frozen, trainer.current.size or config.model.input_size)
        measured = trainer.stop_in_time.measured()
        if measured is not None:  # the pace of its steps; the step's tracing as it took
            step, retrace = measured
            pace = step / max(deadline.costs.step[kind], 1e-9)
        else:
            pace, retrace = deadline.second_epoch_pace(history, kind, config.model.input_size)
        epochs, later = pacing.replanned(config, self._phases_of, deadline, done, pace, retrace,
                                         spent, ready.unit)
        if trainer.plan.multi_worker:
            epochs, later = (int(collective.chief_hex(trainer.plan, f"{n:x}"), 16)
                             for n in (epochs, later))
        after = pacing.remaining(config, self._phases_of, deadline, done, pace, retrace, epochs,
                                 later)
        made = deadline.remade(history, after, pace, [pace * s for s in pacing.refit_seconds(
            config, self._phases_of, deadline, epochs)])
        if (epochs, later) == (t.epochs, ready.steps):
            log(f"time {t.time_budget}: epoch {done} took {pace:.2f}x the probe's estimate; "
                f"the plan of {epochs} epochs stands")
            trainer.adopt_plan(ready.planned(config, ready.steps, made))
            return
        shorter = f" (those after it {later} steps each, of {ready.steps}: one epoch more in " \
            f"the time whole ones left)" if later != ready.steps else ""
        line = (f"made again after epoch {done}, which took {pace:.2f}x the probe's estimate: "
                f"{epochs} epoch{'s' * (epochs != 1)}{shorter}, "
                f"~{(spent + sum(after)) / 60:.1f} min in all")
        log(f"time {t.time_budget}: plan {line}" + (" (none more fits)" if epochs == done else ""))
        planned = with_settings(config, {**pacing.reshaped(t, epochs),
                                         "train.time_steps_from": done * bool(shorter),
                                         "train.time_steps_later": later * bool(shorter),
                                         "train.time_plan": f"{t.time_plan}; {line}"})
        if run_dir is not None:
            rundir.save(run_dir, planned)  # (its time_plan.json: a resumed run continues it)
        trainer.adopt_plan(ready.planned(planned, ready.steps, made))
        if epochs > done:
            trainer.reschedule()

    def refit_room(self, history: list[dict]) -> RefitRoom | None:
        """The room the validated training of this session (its `history`) leaves its refit
        (None where the plan has no refit): the refit's epochs estimated on the probe's costs
        (`budget.refit_costs`) at the pace the validated epochs kept (`Deadline.refit_pace`: a
        plan made again at 0.81x the probe's estimates, its refit estimated at 1x, left room
        for 5 of its 6 epochs and 16% of a 10-minute budget unused), in the time the budget has
        left."""
        deadline, config = self.deadline, self.trainer.ready.config
        if deadline is None or deadline.refit is None:
            return None
        total = deadline.total  # (the budget less what follows training)
        pace, refit = deadline.refit_pace(history), deadline.refit
        left = pacing.REPLAN_SHARE * total - self.clock.since(self.began) - pace * deadline.save

        def each_at(steps):
            return [pace * s for s in refit.each(of_config(config), config.model.input_size,
                                                 steps)]

        return RefitRoom(left, each_at, self.began + total, pace * deadline.save, self.clock)


def probe_line(costs: budget.Costs, batch: int) -> str:
    """What the probe measured, as the log says it."""
    return "time probe: " + ", ".join(
        [f"frozen features cached at {at} px {costs.cache[at]:.3g} s a batch of {batch}"
         f" (+{costs.cache_first[at]:.0f} s tracing)" for at in sorted(costs.cache)] +
        [f"the backbone's lower part's outputs cached at {at} px in "
         f"{costs.thawed_cache[at]:.0f} s" for at in sorted(costs.thawed_cache)] +
        [f"{'frozen' if frozen else 'trained'} {at} px {costs.step[(frozen, at)]:.3g} s a step"
         f" (+{costs.first[(frozen, at)]:.0f} s tracing, +{costs.epoch[(frozen, at)]:.2g} s an "
         f"epoch's start)" for frozen, at in sorted(costs.step)]) \
        + ", validation " + ", ".join(f"{v:.2g} s at {at} px (+{costs.val_first[at]:.0f} s "
                                      f"tracing)" for at, v in costs.val.items()) \
        + f", an epoch's commit {costs.backup:.2f} s, the final save {costs.final_save():.2f} s"
