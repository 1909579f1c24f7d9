"""A run fitted to its time budget (`train.time_budget`, `--time`): measured by the probe
(`probe`), planned by `budget`'s arithmetic, at the largest input size that leaves the recipe
train.time_min_epochs (else the smallest it allows), and recorded in its config; planned again
after its first epoch trained on images, from that epoch's pace (`replan`)."""

from __future__ import annotations

import dataclasses

from corolla.config import duration_seconds, save_config, with_settings
from corolla.runs import paths
from corolla.runtime import collective
from corolla.training.timing import budget, pacing, probe
from corolla.training.phases import Phase, of_config, phases
from corolla.training.preparing import Prepared
from corolla.training.trainer import Trainer


def plan_time(trainer: Trainer, val_split, began: float, log) -> Prepared:
    """The trainer's preparation fitted to its time budget: the config's epochs, steps per
    epoch (`budget.epochs_that_fit`) and input size, with the plan's line in train.time_plan; a
    budget too short for one epoch is an error naming the least that would do. A recipe whose frozen
    phase trains on cached features plans it first whatever the budget (`budget.shaped`): its
    first epoch fits the linear head, so a budget that holds no thawed epoch still gives that
    model, and only one too short for the features is refused. `began`: when the run
    started (the budget counts from there)."""
    ready = trainer.ready
    config, steps = ready.config, ready.steps
    t = config.train
    costs = budget.Costs()
    total = duration_seconds(t.time_budget)
    fitted, caching = _fitting(trainer, val_split, began, costs, total)
    # Several processes must agree on the plan: they all probe (the probe's steps are
    # collective), at the recipe's size alone, and take the chief's epochs and steps.
    multi = trainer.plan.multi_worker
    sizes = [config.model.input_size] if multi else budget.candidates(config)
    sized, epochs, epoch_steps, estimate, why, share, after = fitted(sizes[0])
    size = sizes[0]
    # Fewer epochs than the recipe wants: the size where they fit, chosen on the costs
    # estimated by the pixels, then measured there.
    for size in sizes[1:] if epochs < t.time_min_epochs else ():
        if fitted(size, scaled_from=sizes[0])[1] >= t.time_min_epochs:
            break
    if size != sizes[0]:
        sized, epochs, epoch_steps, estimate, why, share, after = fitted(size)
    if multi:
        epochs, epoch_steps = (int(collective.chief_hex(trainer.plan, f"{n:x}"), 16)
                               for n in (epochs, epoch_steps))
    spent = trainer.clock.since(began)
    if not epochs:  # (a first epoch on cached features holds the linear head: its least)
        raise budget.TooShort(t.time_budget, spent, estimate, t.recipe, share,
                              budget.LINEAR_HEAD if caching else "one epoch", after)
    note = "" if size == sizes[0] else \
        f", at {size} px (at {sizes[0]} px fewer than the {t.time_min_epochs} epochs wanted)"
    if epoch_steps != steps:  # (a worker takes the chief's steps, and so its reason)
        note += f", {epoch_steps} steps each (of {steps}: one epoch more " \
            f"{why or budget.TIME_LEFT})"
    if caching and epochs <= budget.shaped(t, epochs)["train.frozen_epochs"] < t.epochs:
        note += ", the frozen one alone (no time for a thawed epoch): the model is the " \
            "linear head or its head epoch, the better on val"
    log(_probe_line(costs, trainer.plan.inference_batch))
    if share < 1:
        log(f"time {t.time_budget}: {share:.0%} of the time left for the validated training, "
            f"the rest for its refit on train + val (as the probe measured their epochs)")
    line = budget.plan_line(t.time_budget, epochs, estimate, spent, note, after)
    log(line)
    # train.time_steps: only a shortened epoch's (a resumed run reads it: `epoch_steps`).
    planned = with_settings(sized, {**budget.shaped(t, epochs),
                                    "train.time_steps": epoch_steps * (epoch_steps != steps),
                                    "train.time_plan": line.partition(": ")[2]})
    # The plan's epochs, each as measured, for the run to stop short of them where it falls
    # behind (`pacing.Deadline`).
    plan_phases = of_config(planned)
    each = budget.epoch_seconds(plan_phases, costs, size, epoch_steps, caching)
    # Where a refit follows, its epochs count in the deadline too (`pacing.Deadline`).
    refit = _refit(ready, val_split.count, costs, caching, epoch_steps) \
        if t.refit == "on" else None
    refit_each = () if refit is None else refit.each(plan_phases, size)
    # Its deadline: the budget less what follows training (`budget.after_training`).
    deadline = pacing.Deadline(total - after, tuple(each), spent, costs.final_save(), costs,
                               caching, epoch_steps,
                               _replan_after(trainer, plan_phases, epoch_steps), refit,
                               tuple(refit_each))
    return ready.planned(planned, epoch_steps, deadline)


def _refit(ready: Prepared, val_count: int, costs: budget.Costs, caching, steps: int):
    """The refit's costs (`pacing.Refit`) for a validated training of `steps` steps an epoch."""
    counts = (ready.layout.split("train").count, val_count)
    refit_costs, refit_caching = budget.refit_costs(costs, caching, *counts)
    return pacing.Refit(refit_costs, refit_caching, budget.refit_steps(steps, counts))


def _replan_after(trainer: Trainer, plan_phases, steps: int) -> int:
    """The epoch (counted from 1) after which the plan is made again (`replan`): the first
    that trains on images (a frozen phase on cached features measures nothing of them), timed
    step by step (`callbacks.StopInTime.measured`), or where its `steps` are fewer than three
    executions, the phase's second, which traces nothing; unless it is the last; 0 where there
    is none. A phase's first epoch as a whole is no measure of the pace: its step is traced
    again, often in a fraction of the probe's first tracing (which set up what the run reuses),
    so a tiny run's took half its plan, and the plan made from it ran twice its pace."""
    timed = steps // trainer.ready.steps_per_execution >= 3
    for p in plan_phases:
        if trainer.frozen.usable(p, say=False) or (not timed and p.end - p.start < 2):
            continue
        after = p.start + (1 if timed else 2)
        return after if after < plan_phases[-1].end else 0
    return 0


def replan(trainer: Trainer, run_dir, log) -> None:
    """The trainer's plan made again after its epoch `replan_after` (`pacing.replanned`), from
    the pace that epoch measured (its steps' against the probe's, or where they were not
    timed, the epoch's against its plan): where its epochs or the steps of those after it
    change, recorded in the run's config (a resumed run continues the new plan) and the
    optimizer put on the new schedule. Every process takes the chief's epochs and steps."""
    ready = trainer.ready
    config, deadline, t = ready.config, ready.deadline, ready.config.train
    history = trainer.checkpoint.state.history
    done, spent = len(history), history[-1]["seconds"]
    costs, kind = deadline.costs, (trainer.current.frozen, trainer.current.size or
                                   config.model.input_size)
    measured = trainer.stop_in_time.measured()
    if measured is not None:  # the pace of its steps; the step's tracing as it took
        step, retrace = measured
        pace = step / max(costs.step[kind], 1e-9)
    else:
        pace, retrace = deadline.second_epoch_pace(history, kind, config.model.input_size)

    def phases_of(train, size):
        return phases(train, config.model.train_backbone, size)

    epochs, later = pacing.replanned(config, phases_of, deadline, done, pace, retrace, spent,
                                     ready.unit)
    if trainer.plan.multi_worker:
        epochs, later = (int(collective.chief_hex(trainer.plan, f"{n:x}"), 16)
                         for n in (epochs, later))
    after = pacing.remaining(config, phases_of, deadline, done, pace, retrace, epochs, later)
    made = deadline.remade(history, after, pace, [pace * s for s in pacing.refit_seconds(
        config, phases_of, deadline, epochs)])
    if (epochs, later) == (t.epochs, ready.steps):
        log(f"time {t.time_budget}: epoch {done} took {pace:.2f}x the probe's estimate; "
            f"the plan of {epochs} epochs stands")
        trainer.adopt_plan(ready.planned(config, ready.steps, made))
        return
    shorter = f" (those after it {later} steps each, of {ready.steps}: one epoch more in " \
        f"the time whole ones left)" if later != ready.steps else ""
    line = (f"made again after epoch {done}, which took {pace:.2f}x the probe's estimate: "
            f"{epochs} epoch{'s' * (epochs != 1)}{shorter}, ~{(spent + sum(after)) / 60:.1f} "
            f"min in all")
    log(f"time {t.time_budget}: plan {line}" + (" (none more fits)" if epochs == done else ""))
    planned = with_settings(config, {**pacing.reshaped(t, epochs),
                                     "train.time_steps_from": done * bool(shorter),
                                     "train.time_steps_later": later * bool(shorter),
                                     "train.time_plan": f"{t.time_plan}; {line}"})
    if run_dir is not None:
        save_config(planned, run_dir / paths.CONFIG)
    trainer.adopt_plan(ready.planned(planned, ready.steps, made))
    if epochs > done:
        trainer.reschedule()


def _fitting(trainer: Trainer, val_split, began: float, costs: budget.Costs, total: float):
    """(`fitted`, the run's `budget.Caching` or None). `fitted(size)`: (the run's config at
    `size` px, and `budget.epochs_that_fit`'s epochs, steps per epoch, estimated seconds and
    reason in the time left before `total` seconds from `began`, less what follows training;
    the share of that time the run trains in: 1, or where a refit follows, the validated training's
    `budget.validated_share`; and the seconds after training, `budget.after_training`), on
    costs the probe adds to `costs` at that size, or, `scaled_from` another size measured,
    estimated from those (`budget.scaled`)."""
    ready = trainer.ready
    config, steps = ready.config, ready.steps
    t = config.train

    def phases_of(train, size):
        return phases(train, config.model.train_backbone, size)

    # Frozen phases on cached features (`features.FrozenPath`): passes over the training images.
    fast = (t.frozen_epochs or not config.model.train_backbone) and \
        trainer.frozen.usable(Phase(0, 1, True), say=False)
    batch = trainer.plan.inference_batch
    counts = (ready.layout.split("train").count, val_split.count)
    test = ready.layout.split("test").count if ready.layout.has_split("test") else 0
    caching = budget.Caching("flip" in config.data.augment, -(-counts[0] // batch),
                             -(-val_split.count // batch)) if fast else None

    def fitted(size: int, scaled_from: int | None = None):
        sized = with_settings(config, {"model.input_size": size})
        if scaled_from is None:
            # Every kind any number of epochs may hold: each size of the ramp, frozen or not.
            ramp = (size - t.start_size) // budget.SIZE_STEP + 2 if t.start_size else 1
            every = dataclasses.replace(sized.train, epochs=max(t.epochs, ramp),
                                        size_ramp_start=0.0, size_ramp_end=1.0)
            probe.measure(trainer, budget.kinds(phases_of(every, size), size), costs, size,
                          val_split, cached=bool(caching))
        known = costs if scaled_from is None else budget.scaled(costs, scaled_from, size)
        share = budget.validated_share(sized, phases_of, known, steps, caching,
                                       *counts) if t.refit == "on" else 1.0
        after = budget.after_training(known, size, batch, val_split.count, test,
                                      t.refit == "on")
        left = budget.MARGIN * share * (total - after - trainer.clock.since(began))
        # A shortened epoch's steps stay whole units (`preparing.epoch_steps`).
        return (sized, *budget.epochs_that_fit(
            sized, phases_of, known, left, steps, caching, ready.unit,
            lambda plan_phases, each: bool(_replan_after(trainer, plan_phases, each))),
            share, after)

    return fitted, caching


def _probe_line(costs: budget.Costs, batch: int) -> str:
    """What the probe measured, as the log says it."""
    return "time probe: " + ", ".join(
        [f"frozen features cached at {at} px {costs.cache[at]:.3g} s a batch of {batch}"
         f" (+{costs.cache_first[at]:.0f} s tracing)" for at in sorted(costs.cache)] +
        [f"the backbone's lower part's outputs cached at {at} px in {costs.thawed_cache[at]:.0f} s"
         for at in sorted(costs.thawed_cache)] +
        [f"{'frozen' if frozen else 'trained'} {at} px {costs.step[(frozen, at)]:.3g} s a step"
         f" (+{costs.first[(frozen, at)]:.0f} s tracing, +{costs.epoch[(frozen, at)]:.2g} s an "
         f"epoch's start)" for frozen, at in sorted(costs.step)]) \
        + ", validation " + ", ".join(f"{v:.2g} s at {at} px (+{costs.val_first[at]:.0f} s "
                                      f"tracing)" for at, v in costs.val.items()) \
        + f", an epoch's commit {costs.backup:.2f} s, the final save {costs.final_save():.2f} s"

