"""Training for a time budget (`--time`): durations read and refused, the recipe's schedule
scaled to the epochs that fit, the plan repeated from a saved config (tiny real runs:
end_to_end/test_time_budget.py)."""

import dataclasses

import pytest

from corolla import config
from corolla.errors import UserError
from corolla.training import phases
from corolla.training.timing import budget, pacing


def _phases_of(train, size):
    """A run's phases (`phases.phases`), its backbone trained."""
    return phases.phases(train, True, size)


def test_durations_are_read_in_seconds_and_a_bad_one_is_one_line_naming_the_flag():
    assert [config.duration_seconds(d) for d in ("90s", "10m", "1.5h", " 2M ")] == \
        [90, 600, 5400, 120]
    assert [config.format_duration(s) for s in (90, 600, 5400, 59.2)] == \
        ["90s", "10m", "90m", "1m"]
    for bad in ("10", "m", "-5m", "0s", "1.5d", "inf h", "ten minutes"):
        with pytest.raises(UserError) as e:
            config.load_config(overrides={"train.time_budget": bad},
                               labels={"train.time_budget": "--time"})
        assert str(e.value).startswith("--time must be a duration") and "90s, 10m, 1.5h" in \
            str(e.value) and "\n" not in str(e.value)


def test_epochs_and_time_together_are_refused_in_one_line():
    from corolla.config.flags import Given
    from corolla.flows.train import train_config

    with pytest.raises(UserError, match=r"^epochs= and time= both set how long to train"):
        train_config(given=Given({"train.epochs": 3, "train.time_budget": "1m"},
                                 {"train.epochs": "epochs=", "train.time_budget": "time="}))


def test_a_saved_configs_budget_is_planned_anew_and_the_steps_asked_for_stay(tmp_path):
    """A timed run's config.toml holds what the user asked for, not its plan (in its
    time_plan.json): as --config it plans its budget anew, whatever budget is given."""
    from corolla.config.flags import Given
    from corolla.flows.train import train_config
    from corolla.runs import paths, rundir

    rundir.save(tmp_path, config.load_config(overrides={
        "train.time_budget": "10m", "train.epochs": 14, "train.time_plan": "14 epochs of ~38 s",
        "train.steps_per_epoch": 40, "train.time_steps": 31}))
    saved = tmp_path / paths.CONFIG
    kept = train_config(str(saved))[0].train
    assert (kept.time_budget, kept.time_plan, kept.time_steps) == ("10m", "", 0)
    again, _ = train_config(str(saved), Given({"train.time_budget": "5m"}))
    assert again.train.time_budget == "5m" and again.train.time_plan == ""
    assert (again.train.time_steps, again.train.steps_per_epoch) == (0, 40)


def test_a_killed_run_whose_plan_shortened_its_epochs_continues_with_its_command(tmp_path):
    from corolla.config.flags import Given
    from corolla.flows.train import train_config
    from corolla.runs import rundir

    flags = {"train.time_budget": "10m", "train.steps_per_epoch": 40,
             "output.runs_dir": str(tmp_path), "output.name": "r"}
    run = tmp_path / "r"
    run.mkdir()
    # What a killed run holds: the steps asked for (config.toml), and the plan's own
    # (time_plan.json).
    rundir.save(run, config.load_config(overrides={**flags, "train.time_plan": "5 epochs of ~9 s",
                                                   "train.epochs": 5, "train.time_steps": 31}))
    cfg, resume = train_config(given=Given(flags), log=lambda *a: None)
    assert resume == run and (cfg.train.time_steps, cfg.train.steps_per_epoch) == (31, 40)
    assert cfg.train.time_plan == "5 epochs of ~9 s" and cfg.train.epochs == 5


def test_the_recipes_schedule_keeps_its_shape_over_any_number_of_epochs():
    t = config.load_config(overrides={"train.epochs": 11, "train.frozen_epochs": 2,
                                      "train.warmup_epochs": 1, "train.sustain_epochs": 2,
                                      "train.lr_decay": 0.8}).train
    twice = budget.shaped(t, 22)
    assert twice["train.frozen_epochs"] == 4 and twice["train.warmup_epochs"] == 2
    assert twice["train.sustain_epochs"] == 4
    # The ramp's decay over the run is the recipe's: 0.8 ** 8 over 8 epochs, over 16 now.
    assert twice["train.lr_decay"] ** 16 == pytest.approx(0.8 ** 8)
    # At least one frozen and one trained epoch where both fit.
    assert budget.shaped(t, 3)["train.frozen_epochs"] == 1
    assert budget.shaped(t, 2)["train.frozen_epochs"] == 1


def test_a_budget_of_one_epoch_keeps_the_frozen_one_where_a_timed_run_fits_its_linear_head():
    t = config.load_config(overrides={"train.epochs": 11, "train.frozen_epochs": 2,
                                      "train.learning_rate": 3e-3}).train
    one = budget.shaped(t, 1)
    # Not one thawed epoch from an untrained head: the frozen one, the recipe's own rates.
    assert one["train.frozen_epochs"] == 1 and "train.learning_rate" not in one
    assert [p.frozen for p in _phases_of(config.with_settings(config.load_config(), {
        f"train.{k}": getattr(t, k) for k in ("epochs", "frozen_epochs")} | one).train, 64)] \
        == [True]


def test_the_plan_takes_the_most_epochs_that_fit_the_time_left():
    cfg = config.load_config(overrides={"train.epochs": 10, "model.input_size": 64,
                                        "train.start_size": 32, "train.size_ramp_start": 0.5,
                                        "train.size_ramp_end": 0.8})
    costs = budget.Costs(step={(False, 32): 0.1, (False, 48): 0.2, (False, 64): 0.3},
                         first={(False, 32): 1.0, (False, 48): 1.0, (False, 64): 1.0},
                         epoch={(False, 32): 0.1, (False, 48): 0.1, (False, 64): 0.1},
                         val={64: 0.5}, val_first={64: 0.7}, backup=0.1)

    epochs, estimate = budget.most_epochs(cfg, _phases_of, costs, 60.0, steps=10)
    assert estimate <= 60.0
    more = config.with_settings(cfg, budget.shaped(cfg.train, epochs + 1)).train
    assert budget.seconds(_phases_of(more, 64), costs, 64, 10) > 60.0
    assert budget.most_epochs(cfg, _phases_of, costs, 3.0, steps=10)[0] == 0


def test_the_time_whole_epochs_leave_goes_to_one_epoch_more_of_fewer_steps():
    cfg = config.load_config(overrides={"train.epochs": 10, "model.input_size": 64})
    costs = budget.Costs(step={(False, 64): 0.1}, first={(False, 64): 1.0},
                         epoch={(False, 64): 0.0}, val={64: 0.5}, val_first={64: 0.0},
                         backup=0.1)

    # An epoch of 10 steps costs 1.6 s (steps, validation, backup), once 1.1 s (tracing, the
    # final save): 3 whole epochs take 5.9 s of 6; 4 epochs of 6 steps take 3.5 + 4 x 6 x 0.1.
    assert budget.most_epochs(cfg, _phases_of, costs, 6.0, 10) == (3, pytest.approx(5.9))
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 6.0, 10) == (
        4, 6, pytest.approx(5.9), budget.TIME_LEFT)
    # Whole executions of 4 steps: 4 steps would be fewer than half an epoch; whole epochs.
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 6.0, 10, unit=4) == (
        3, 10, pytest.approx(5.9), "")
    # 1 whole epoch in 3 s; 2 of 3 steps would fit, fewer than half: 1 epoch of 10 steps.
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 3.0, 10) == (
        1, 10, pytest.approx(2.7), "")
    # Not even one whole epoch: none, whatever a shorter one would do.
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 2.0, 10)[0] == 0


def test_a_plan_never_made_again_takes_one_epoch_more_of_a_quarter_of_the_steps_or_more():
    """Where the plan's first epoch on images is its last, its pace is never measured in time
    to plan again: one epoch more of fewer steps (down to SHORTEST_TO_REPLAN of them) lets it."""
    cfg = config.load_config(overrides={"train.epochs": 10, "model.input_size": 64})
    costs = budget.Costs(step={(False, 64): 0.1}, first={(False, 64): 1.0},
                         epoch={(False, 64): 0.0}, val={64: 0.5}, val_first={64: 0.0},
                         backup=0.1)
    seen = []

    def after_the_first(plan_phases, steps):  # made again after epoch 1, unless it is the last
        seen.append((plan_phases[-1].end, steps))
        return plan_phases[-1].end > 1

    # 1 whole epoch in 3 s, never made again; 2 epochs of 3 steps (of 10) fit: 2.9 s.
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 3.0, 10, replans=after_the_first) == \
        (2, 3, pytest.approx(2.9), budget.TO_REPLAN)
    assert seen == [(1, 10), (2, 3)]
    # Where that would not be made again either, or is already, the plan stays as fill made it.
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 3.0, 10, replans=lambda *_: False) == \
        (1, 10, pytest.approx(2.7), "")
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 6.0, 10, replans=after_the_first) == \
        (4, 6, pytest.approx(5.9), budget.TIME_LEFT)
    # 2 epochs of 2 steps would be fewer than a quarter of 10 each: 1 whole epoch stays.
    assert budget.epochs_that_fit(cfg, _phases_of, costs, 2.75, 10, replans=after_the_first) == \
        (1, 10, pytest.approx(2.7), "")


def test_a_phase_pays_its_tracings_once_and_every_epoch_its_start_and_a_warm_val_pass():
    """A GPU's compile of the predict function can be 40 warm val passes: charged every epoch
    (as the probe's first pass measures it), a minute's plan would hold 2 epochs, not 22."""
    cfg = config.load_config(overrides={"train.epochs": 10, "model.input_size": 64})
    costs = budget.Costs(step={(False, 64): 0.1}, first={(False, 64): 1.0},
                         epoch={(False, 64): 0.1}, val={64: 0.5}, val_first={64: 20.0},
                         backup=0.1)

    # The final save 0.1, the phase's tracings 1.0 + 20.0, each epoch 10 x 0.1 + 0.1 + 0.5
    # + 0.1.
    assert budget.seconds(_phases_of(cfg.train, 64), costs, 64, 10) == pytest.approx(38.1)
    assert budget.most_epochs(cfg, _phases_of, costs, 60.0, 10) == (22, pytest.approx(58.5))
    # Two phases (frozen, then trained) compile twice: each pays the tracings again.
    two = config.load_config(overrides={"train.epochs": 4, "train.frozen_epochs": 2,
                                        "model.input_size": 64}).train
    costs.step[(True, 64)], costs.first[(True, 64)], costs.epoch[(True, 64)] = 0.1, 1.0, 0.1
    assert budget.seconds(_phases_of(two, 64), costs, 64, 10) == pytest.approx(
        0.1 + 2 * (1.0 + 20.0) + 4 * 1.7)
    # A size estimated from another keeps the tracings and an epoch's start: they are not the
    # pixels' work.
    small = budget.scaled(costs, 64, 32)
    assert (small.val_first[32], small.first[(False, 32)], small.epoch[(False, 32)]) == \
        (20.0, 1.0, 0.1)
    assert small.step[(False, 32)] == pytest.approx(0.1 / 4)


def test_each_epoch_is_charged_its_own_phases_tracings_and_the_sum_is_the_plan():
    two = config.load_config(overrides={"train.epochs": 4, "train.frozen_epochs": 2,
                                        "model.input_size": 64}).train
    costs = budget.Costs(step={(True, 64): 0.1, (False, 64): 0.3},
                         first={(True, 64): 1.0, (False, 64): 2.0},
                         epoch={(True, 64): 0.1, (False, 64): 0.1}, val={64: 0.5},
                         val_first={64: 4.0}, backup=0.2)
    plan_phases = phases.phases(two, True, 64)
    each = budget.epoch_seconds(plan_phases, costs, 64, 10)
    frozen, trained = 10 * 0.1 + 0.1 + 0.5 + 0.2, 10 * 0.3 + 0.1 + 0.5 + 0.2
    assert each == pytest.approx([1.0 + 4.0 + frozen, frozen, 2.0 + 4.0 + trained, trained])
    assert budget.seconds(plan_phases, costs, 64, 10) == pytest.approx(sum(each) + 0.2)


def test_a_timed_run_stops_before_an_epoch_that_would_end_past_its_budget():
    # Planned at 5 s spent: 4 epochs, the first 3 s (its tracings), the others 1 s; a final
    # save of 0.5 s; a budget of 14 s.
    deadline = pacing.Deadline(total=14.0, planned=(3.0, 1.0, 1.0, 1.0), planned_at=5.0,
                               save=0.5)

    def history(*seconds):
        return [{"epoch": k + 1, "seconds": s} for k, s in enumerate(seconds)]

    # On plan: the next epoch as planned (and a tenth), then the save.
    assert deadline.behind(history(8.0, 9.0, 10.0)) == 1.0
    assert deadline.next_end(history(8.0, 9.0, 10.0)) == pytest.approx(10.0 + 1.1 + 0.5)
    # Ahead of it: the plan is not shrunk (its margin stays).
    assert deadline.next_end(history(7.0, 7.5)) == pytest.approx(7.5 + 1.1 + 0.5)
    # 1.5 times as slow as planned (a busier host than the probe met): so are the next epoch
    # and the save. After epoch 2 the next still fits; after epoch 3 it would end past the
    # budget.
    assert deadline.behind(history(9.5, 11.0)) == pytest.approx(1.5)
    assert deadline.next_end(history(9.5, 11.0)) == pytest.approx(11.0 + (1.1 + 0.5) * 1.5)
    assert deadline.next_end(history(9.5, 11.0, 12.5)) == pytest.approx(12.5 + 1.6 * 1.5)
    assert 12.5 + 1.6 * 1.5 > 14
    # The first epoch's tracing quicker than planned, then every epoch twice as slow: 1.2 on
    # the whole, but the last epochs say 2.
    assert deadline.behind(history(7.0, 9.0, 11.0)) == pytest.approx(2.0)
    # Only the last two epochs count beside the whole: one slow epoch long ago does not.
    assert deadline.behind(history(11.0, 12.0, 13.0)) == pytest.approx(8.0 / 5)
    # After the last epoch, nothing follows.
    assert deadline.next_end(history(8.0, 9.0, 10.0, 11.0)) is None


def test_frozen_epochs_on_cached_features_cost_their_caching_passes_once():
    t = config.load_config(overrides={"train.epochs": 4, "train.frozen_epochs": 2}).train
    costs = budget.Costs(step={(True, 64): 0.2, (False, 64): 0.5},
                         first={(True, 64): 3.0, (False, 64): 4.0},
                         epoch={(True, 64): 0.2, (False, 64): 0.3}, val={64: 2.0},
                         val_first={64: 1.5}, backup=0.1, cache={64: 0.3}, cache_first={64: 5.0})
    plan_phases = phases.phases(t, True, 64)
    trained = 4.0 + 1.5 + 2 * (10 * 0.5 + 0.3 + 2.0 + 0.1)
    # Through the frozen model every epoch: its steps, its tracing, validation and backups.
    assert budget.seconds(plan_phases, costs, 64, 10) == pytest.approx(
        0.1 + 3.0 + 1.5 + 2 * (10 * 0.2 + 0.2 + 2.0 + 0.1) + trained)
    # Cached once, timed as the caching pass itself: 2 views x 7 batches of the training
    # images and 3 of val at 0.3 s a batch, then only the frozen epochs' backups. The probe
    # traced the pass the run makes, so its tracing is not paid again...
    caching = budget.Caching(flips=True, train=7, val=3)
    assert budget.seconds(plan_phases, costs, 64, 10, caching) == pytest.approx(
        0.1 + (2 * 7 + 3) * 0.3 + 2 * 0.1 + trained)
    # ...except where the frozen phase runs at another size than the final one (val's pass).
    # A frozen phase of one epoch draws one view per image: the mirror images are not cached.
    ramp = phases.phases(config.load_config(overrides={
        "train.epochs": 4, "train.frozen_epochs": 2, "model.input_size": 64,
        "train.start_size": 32, "train.size_ramp_start": 0.0, "train.size_ramp_end": 0.5}).train,
        True, 64)
    frozen = [p for p in ramp if p.frozen][:1]  # its first phase: one epoch at 32 px
    assert [(p.start, p.end, p.size) for p in frozen] == [(0, 1, 32)]
    small = budget.scaled(costs, 64, 32)
    assert small.cache[32] == pytest.approx(0.3 / 4)
    assert budget.seconds(frozen, small, 64, 10, caching) == pytest.approx(
        0.1 + 1 * 7 * 0.3 / 4 + 3 * 0.3 + 5.0 + 0.1)
    assert [budget.cached_views(flips, n) for flips, n in
            ((True, 1), (True, 2), (False, 2))] == [1, 2, 1]


def test_a_short_budget_may_train_smaller_down_to_the_recipes_least_size():
    cfg = config.load_config(overrides={"model.input_size": 192, "train.time_min_epochs": 8,
                                        "train.time_min_size": 160})
    assert budget.candidates(cfg) == [192, 176, 160]
    assert budget.candidates(config.with_settings(cfg, {"train.time_min_epochs": 0})) == [192]


def _cosine(epochs: int, frozen: int = 0) -> config.RunConfig:
    return config.load_config(overrides={"train.epochs": epochs, "train.frozen_epochs": frozen,
                                         "train.warmup_epochs": 1, "model.input_size": 64,
                                         "train.schedule": "cosine"})


def _made(cfg, replan_after=2) -> pacing.Deadline:
    """A deadline of a 100 s budget planned at 10 s on `cfg`: epochs of 10 steps of 0.5 s (5.6
    s with validation and commit), a phase's tracings 3 s."""
    costs = budget.Costs(step={(True, 64): 0.5, (False, 64): 0.5},
                         first={(True, 64): 2.0, (False, 64): 2.0},
                         epoch={(True, 64): 0.0, (False, 64): 0.0}, val={64: 0.5},
                         val_first={64: 1.0}, backup=0.1)
    each = budget.epoch_seconds(_phases_of(cfg.train, 64), costs, 64, 10)
    return pacing.Deadline(total=100.0, planned=tuple(each), planned_at=10.0, save=costs.backup,
                           costs=costs, steps=10, replan_after=replan_after)


def test_a_plan_made_again_from_a_pace_fills_the_budget_and_keeps_the_trained_frozen_epochs():
    cfg = _cosine(10, frozen=1)
    deadline = _made(cfg)

    def again(pace, spent=25.0, retrace=1.0):
        return pacing.replanned(cfg, _phases_of, deadline, 2, pace, retrace, spent)

    # 95 s of 100 less 25 spent and the save: at the probe's pace 12 epochs of 5.6 s after the
    # first 2 and a retrace of 1 s (68.2 s) fit, 13 do not; at twice its pace, 6; at half, 26.
    # (The epochs of 10 steps stay: an epoch more of shorter ones would train fewer steps.)
    assert again(1.0) == (14, 10) and again(2.0) == (8, 10) and again(0.5) == (26, 10)
    more = pacing.remaining(cfg, _phases_of, deadline, 2, 1.0, 1.0, 14)
    assert more == pytest.approx([5.6 + 1.0] + [5.6] * 11)
    # The plan's own epochs trace nothing again: they stand where they fit and one more does
    # not with its retrace.
    assert pacing.remaining(cfg, _phases_of, deadline, 2, 1.0, 1.0, 10) == \
        pytest.approx([5.6] * 8)
    assert pacing.replanned(cfg, _phases_of, deadline, 2, 1.0, 40.0, 45.0) == (10, 10)
    # Not one epoch more: the run ends after the epochs it trained.
    assert again(1.0, spent=93.0) == (2, 10)
    # The trained frozen epoch stays one; the rest of the schedule keeps its shape.
    shape = pacing.reshaped(cfg.train, 20)
    assert shape["train.frozen_epochs"] == 1 and shape["train.warmup_epochs"] == 2
    # A run that never thaws stays frozen over the new epochs.
    assert pacing.reshaped(_cosine(10, frozen=10).train, 20)["train.frozen_epochs"] == 20


def test_a_plan_made_again_fills_what_whole_epochs_leave_with_one_more_of_fewer_steps():
    cfg = _cosine(10, frozen=1)
    deadline = _made(cfg)

    def again(spent, unit=1):
        return pacing.replanned(cfg, _phases_of, deadline, 2, 1.0, 1.0, spent, unit)

    # 14.9 s left after 80 s: two more epochs of 10 steps (12.2 s with the retrace) leave 2.7
    # s; three of 8 steps (14.8 s) train 24 steps, not 20.
    assert again(80.0) == (5, 8)
    assert sum(pacing.remaining(cfg, _phases_of, deadline, 2, 1.0, 1.0, 5, 8)) == \
        pytest.approx(3 * (8 * 0.5 + 0.6) + 1.0)
    # In whole units only: of 3 steps, 6 would train fewer steps than the whole epochs.
    assert again(80.0, unit=3) == (4, 10)
    # Where no whole epoch more fits, one of half the steps or more does (8 s of 5.9 left).
    assert again(89.0) == (3, 8)
    # Not below half the plan's steps: 1.9 s left hold none.
    assert again(93.0) == (2, 10)


def test_a_plan_made_again_counts_the_epochs_so_far_as_they_took():
    deadline = _made(_cosine(4))
    history = [{"epoch": 1, "seconds": 19.0}, {"epoch": 2, "seconds": 30.0}]
    assert deadline.took(history) == pytest.approx((9.0, 11.0))
    remade = deadline.remade(history, [5.0, 5.0], 0.8)
    assert remade.planned == pytest.approx((9.0, 11.0, 5.0, 5.0)) and remade.replan_after == 0
    # The lag of the epochs before is not counted again: on the new plan's pace, none.
    assert remade.behind(history + [{"epoch": 3, "seconds": 35.0}]) == 1.0
    # The refit's pace is the new plan's, 0.8x the probe's estimates; 1.5x that where the
    # epochs after it fell behind it so.
    assert remade.refit_pace(history + [{"epoch": 3, "seconds": 35.0}]) == pytest.approx(0.8)
    assert remade.refit_pace(history + [{"epoch": 3, "seconds": 37.5}]) == pytest.approx(1.2)
    assert deadline.pace == 1.0


def test_a_phases_second_epoch_gives_the_pace_and_the_steps_tracing_at_any_size():
    """Progressive resizing: the phase at 48 px of a 64 px model, validated at 64 px."""
    costs = budget.Costs(step={(False, 48): 0.5}, first={(False, 48): 3.0},
                         epoch={(False, 48): 0.0}, val={64: 0.5}, val_first={64: 1.0},
                         backup=0.1)
    deadline = pacing.Deadline(total=100.0, planned=(9.6, 5.6, 5.6), planned_at=10.0, save=0.1,
                               costs=costs, steps=10, replan_after=2)
    history = [{"epoch": 1, "seconds": 18.0}, {"epoch": 2, "seconds": 24.0}]
    pace, retrace = deadline.second_epoch_pace(history, (False, 48), 64)
    # Epoch 2 took 6 s of 5.6; epoch 1 took 2 s more, three quarters of it the step's tracing.
    assert pace == pytest.approx(6.0 / 5.6) and retrace == pytest.approx(1.5)


def test_with_a_refit_an_epoch_more_is_trained_only_where_its_refit_fits_too():
    # The stop's plan above, with a refit of 2 s an epoch (4 s the first: its tracings).
    deadline = pacing.Deadline(total=14.0, planned=(3.0, 1.0, 1.0, 1.0), planned_at=5.0,
                               save=0.5, refit_each=(4.0, 2.0, 2.0, 2.0))
    on_plan = [{"epoch": 1, "seconds": 8.0}]
    # After epoch 1: epoch 2 (1.1 s and the save), then the refit of epochs 1-2 and its save.
    assert deadline.next_end(on_plan) == pytest.approx(8.0 + 1.1 + 0.5 + 6.0 + 0.5)
    alone = pacing.Deadline(total=14.0, planned=(3.0, 1.0, 1.0, 1.0), planned_at=5.0, save=0.5)
    assert alone.next_end(on_plan) == pytest.approx(8.0 + 1.1 + 0.5)
    # 1.5 times as slow: so is the refit's part.
    slow = [{"epoch": 1, "seconds": 9.5}]
    assert deadline.next_end(slow) == pytest.approx(9.5 + (1.1 + 0.5 + 6.0 + 0.5) * 1.5)


def test_a_plan_made_again_with_a_refit_leaves_the_refit_its_epochs():
    cfg = _cosine(10, frozen=1)
    alone = _made(cfg)
    # The refit: no validation, 15 steps an epoch (train + val), as `budget.refit_costs` gives.
    refit_costs, _ = budget.refit_costs(alone.costs, None, 64, 32)
    refit = pacing.Refit(refit_costs, None, budget.refit_steps(10, (64, 32)))
    deadline = dataclasses.replace(alone, refit=refit)
    assert refit.steps == 15
    # A refit epoch: 15 steps of 0.5 s and its commit, 7.6 s; its phases' first also 2 s of
    # tracing.
    each = pacing.refit_seconds(cfg, _phases_of, deadline, 4)
    assert each == pytest.approx([9.6, 9.6, 7.6, 7.6])
    assert pacing.refit_seconds(cfg, _phases_of, alone, 4) == []
    # 95 s less 25 spent and two saves, 69.8 s: alone, 14 epochs in all (above); with the
    # refit of every one, 5: 3 x 5.6 + 1 (retrace) + 42.0 of refit is 59.8 s, where 6 would
    # be 73.0; the 10 s left, 6 with the 4 epochs after the second of 8 steps (32 s with the
    # retrace, 49.6 of refit: 69.0 s), and the refit's epochs keep their 15.
    assert pacing.replanned(cfg, _phases_of, alone, 2, 1.0, 1.0, 25.0) == (14, 10)
    assert pacing.replanned(cfg, _phases_of, deadline, 2, 1.0, 1.0, 25.0) == (6, 8)
    remade = deadline.remade([{"epoch": 1, "seconds": 19.0}, {"epoch": 2, "seconds": 30.0}],
                             [5.0] * 3, 1.0, [9.6, 9.6, 7.6, 7.6, 7.6])
    assert remade.refit_each == pytest.approx((9.6, 9.6, 7.6, 7.6, 7.6))


def test_one_search_finds_the_most_that_fits_in_few_calls():
    """`budget.most`, the one search of a time budget (its epochs, a plan made again, a
    refit's longer epochs): from where it starts, up to its bound."""
    for limit in (1, 2, 3, 7, 8, 9, 100, 499, 500):
        calls = []

        def fits(n, limit=limit, calls=calls):
            calls.append(n)
            return n <= limit

        assert budget.most(fits, 1, 500) == limit
        assert len(calls) <= 2 * (500).bit_length() + 1
    assert budget.most(lambda n: True, 5, 9) == 9
    assert budget.most(lambda n: False, 5, 9) == 5  # (its start is taken to fit)
    assert budget.most(lambda n: n <= 260, 200, 400) == 260  # a refit's steps, up to twice


def test_trained_epochs_on_cached_lower_outputs_pay_their_caching_once_a_size():
    """The thawed top's steps on cached outputs (`thawed.ThawedPath`) are cheap, but the cache
    is a pass over every view of the training images: the first trained epoch at a size pays
    it, a refit's over train + val pays it in proportion, another size's is by the pixels."""
    two = config.load_config(overrides={"train.epochs": 4, "train.frozen_epochs": 1,
                                        "model.input_size": 64}).train
    costs = budget.Costs(step={(True, 64): 0.1, (False, 64): 0.3},
                         first={(True, 64): 1.0, (False, 64): 2.0},
                         epoch={(True, 64): 0.1, (False, 64): 0.1}, val={64: 0.5},
                         val_first={64: 4.0}, backup=0.2, thawed_cache={64: 30.0})
    each = budget.epoch_seconds(phases.phases(two, True, 64), costs, 64, 10)
    trained = 10 * 0.3 + 0.1 + 0.5 + 0.2
    assert each[1:] == pytest.approx([30.0 + 2.0 + 4.0 + trained, trained, trained])
    refit, _ = budget.refit_costs(costs, None, 80, 20)
    assert refit.thawed_cache == {64: pytest.approx(37.5)}
    assert budget.scaled(costs, 64, 32).thawed_cache[32] == pytest.approx(7.5)
