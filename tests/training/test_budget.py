"""Training for a time budget (`--time`, issue 34): durations read and refused, the recipe's
schedule scaled to the epochs that fit, and tiny real runs that end within their budget at the
schedule's floor, record their plan, continue it after a kill, refuse a budget below one epoch
and share the budget among k-fold folds."""

import os
import subprocess
import sys
import tomllib

import pytest

from helpers.processes import REPO, SCRIPTS
from corolla import config
from corolla.errors import UserError
from corolla.files import read_history
from corolla.training import budget

CRASH = SCRIPTS / "crash_train.py"
TINY = ["--batch-size", "8", "--steps-per-epoch", "2"]


def test_durations_are_read_in_seconds_and_a_bad_one_is_one_line_naming_the_flag():
    assert [config.duration_seconds(d) for d in ("90s", "10m", "1.5h", " 2M ")] == \
        [90, 600, 5400, 120]
    assert [config.format_duration(s) for s in (90, 600, 5400, 59.2)] == \
        ["90s", "10m", "90m", "1m"]
    for bad in ("10", "m", "-5m", "0s", "1.5d", "inf h", "ten minutes"):
        with pytest.raises(UserError) as e:
            config.load(overrides={"train.time_budget": bad},
                        labels={"train.time_budget": "--time"})
        assert str(e.value).startswith("--time must be a duration") and "90s, 10m, 1.5h" in \
            str(e.value) and "\n" not in str(e.value)


def test_epochs_and_time_together_are_refused_in_one_line():
    from corolla.commands.train import train_config

    with pytest.raises(UserError, match=r"^epochs= and time= both set how long to train"):
        train_config(flags={"train.epochs": 3, "train.time_budget": "1m"},
                     names={"train.epochs": "epochs=", "train.time_budget": "time="})


def test_a_saved_configs_plan_is_repeated_and_a_budget_given_anew_is_planned_anew(tmp_path):
    from corolla.commands.train import train_config

    saved = tmp_path / "config.toml"
    config.save(config.load(overrides={"train.time_budget": "10m", "train.epochs": 14,
                                       "train.time_plan": "14 epochs of ~38 s",
                                       "train.steps_per_epoch": 40, "train.time_steps": 31}),
                saved)
    kept = train_config(str(saved))[0].train
    assert (kept.time_plan, kept.time_steps) == ("14 epochs of ~38 s", 31)
    again, _ = train_config(str(saved), flags={"train.time_budget": "5m"})
    # The plan's shortened epochs go with it; the steps asked for stay.
    assert again.train.time_budget == "5m" and again.train.time_plan == ""
    assert (again.train.time_steps, again.train.steps_per_epoch) == (0, 40)


def test_a_killed_run_whose_plan_shortened_its_epochs_continues_with_its_command(tmp_path):
    from corolla.commands.train import train_config
    from corolla.runs import paths

    flags = {"train.time_budget": "10m", "train.steps_per_epoch": 40,
             "output.runs_dir": str(tmp_path), "output.name": "r"}
    run = tmp_path / "r"
    run.mkdir()
    # What a killed run's config holds: the steps asked for, and the plan's own.
    config.save(config.load(overrides={**flags, "train.time_plan": "5 epochs of ~9 s",
                                       "train.epochs": 5, "train.time_steps": 31}),
                run / paths.CONFIG)
    cfg, resume = train_config(flags=flags, log=lambda *a: None)
    assert resume == run and (cfg.train.time_steps, cfg.train.steps_per_epoch) == (31, 40)


def test_the_recipes_schedule_keeps_its_shape_over_any_number_of_epochs():
    t = config.load(overrides={"train.epochs": 11, "train.frozen_epochs": 2,
                               "train.warmup_epochs": 1, "train.sustain_epochs": 2,
                               "train.lr_decay": 0.8}).train
    twice = budget.shaped(t, 22)
    assert twice["train.frozen_epochs"] == 4 and twice["train.warmup_epochs"] == 2
    assert twice["train.sustain_epochs"] == 4
    # The ramp's decay over the run is the recipe's: 0.8 ** 8 over 8 epochs, over 16 now.
    assert twice["train.lr_decay"] ** 16 == pytest.approx(0.8 ** 8)
    # At least one frozen and one trained epoch where both fit; one epoch trains.
    assert budget.shaped(t, 3)["train.frozen_epochs"] == 1
    one = budget.shaped(config.apply(config.load(), {"train.learning_rate": 3e-3,
                                                     "train.min_learning_rate": 3e-5,
                                                     **{f"train.{k}": getattr(t, k) for k in
                                                        ("epochs", "frozen_epochs")}}).train, 1)
    # One epoch trains the backbone, at the thawed phase's rates (x finetune_lr_scale).
    assert one["train.frozen_epochs"] == 0
    assert one["train.learning_rate"] == pytest.approx(3e-4)
    assert one["train.min_learning_rate"] == pytest.approx(3e-6)


def test_the_plan_takes_the_most_epochs_that_fit_the_time_left():
    from corolla.training import fit

    cfg = config.load(overrides={"train.epochs": 10, "model.input_size": 64,
                                 "train.start_size": 32, "train.size_ramp_start": 0.5,
                                 "train.size_ramp_end": 0.8})
    costs = budget.Costs(step={(False, 32): 0.1, (False, 48): 0.2, (False, 64): 0.3},
                         first={(False, 32): 1.0, (False, 48): 1.0, (False, 64): 1.0},
                         val={64: 0.5}, backup=0.1)

    def phases_of(train, size):
        return fit.phases(train, True, size)

    epochs, estimate = budget.most_epochs(cfg, phases_of, costs, 60.0, steps=10)
    assert estimate <= 60.0
    more = config.apply(cfg, budget.shaped(cfg.train, epochs + 1)).train
    assert budget.seconds(phases_of(more, 64), costs, 64, 10) > 60.0
    assert budget.most_epochs(cfg, phases_of, costs, 3.0, steps=10)[0] == 0


def test_the_time_whole_epochs_leave_goes_to_one_epoch_more_of_fewer_steps():
    from corolla.training import fit

    cfg = config.load(overrides={"train.epochs": 10, "model.input_size": 64})
    costs = budget.Costs(step={(False, 64): 0.1}, first={(False, 64): 1.0}, val={64: 0.5},
                         backup=0.1)

    def phases_of(train, size):
        return fit.phases(train, True, size)

    # An epoch of 10 steps costs 1.6 s (steps, validation, backup), once 1.1 s (tracing, the
    # final save): 3 whole epochs take 5.9 s of 6; 4 epochs of 6 steps take 3.5 + 4 x 6 x 0.1.
    assert budget.most_epochs(cfg, phases_of, costs, 6.0, 10) == (3, pytest.approx(5.9))
    assert budget.fill(cfg, phases_of, costs, 6.0, 10) == (4, 6, pytest.approx(5.9))
    # Whole executions of 4 steps: 4 steps would be fewer than half an epoch; whole epochs.
    assert budget.fill(cfg, phases_of, costs, 6.0, 10, unit=4) == (3, 10, pytest.approx(5.9))
    # 1 whole epoch in 3 s; 2 of 3 steps would fit, fewer than half: 1 epoch of 10 steps.
    assert budget.fill(cfg, phases_of, costs, 3.0, 10) == (1, 10, pytest.approx(2.7))
    # Not even one whole epoch: none, whatever a shorter one would do.
    assert budget.fill(cfg, phases_of, costs, 2.0, 10)[0] == 0


def test_frozen_epochs_on_cached_features_cost_their_caching_passes_once():
    from corolla.training import fit

    t = config.load(overrides={"train.epochs": 4, "train.frozen_epochs": 2}).train
    costs = budget.Costs(step={(True, 64): 0.2, (False, 64): 0.5},
                         first={(True, 64): 3.0, (False, 64): 4.0}, val={64: 2.0}, backup=0.1,
                         cache={64: 0.3}, cache_first={64: 5.0})
    plan_phases = fit.phases(t, True, 64)
    trained = 4.0 + 2 * (10 * 0.5 + 2.0 + 0.1)
    # Through the frozen model every epoch: its steps, its tracing, validation and backups.
    assert budget.seconds(plan_phases, costs, 64, 10) == pytest.approx(
        0.1 + 3.0 + 2 * (10 * 0.2 + 2.0 + 0.1) + trained)
    # Cached once, timed as the caching pass itself: 2 views x 7 batches of the training
    # images and 3 of val at 0.3 s a batch, then only the frozen epochs' backups. The probe
    # traced the pass the run makes, so its tracing is not paid again...
    caching = budget.Caching(flips=True, train=7, val=3)
    assert budget.seconds(plan_phases, costs, 64, 10, caching) == pytest.approx(
        0.1 + (2 * 7 + 3) * 0.3 + 2 * 0.1 + trained)
    # ...except where the frozen phase runs at another size than the final one (val's pass).
    # A frozen phase of one epoch draws one view per image: the mirror images are not cached.
    ramp = fit.phases(config.load(overrides={
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
    cfg = config.load(overrides={"model.input_size": 192, "train.time_min_epochs": 8,
                                 "train.time_min_size": 160})
    assert budget.candidates(cfg) == [192, 176, 160]
    assert budget.candidates(config.apply(cfg, {"train.time_min_epochs": 0})) == [192]


def _train(args, crash="none", timeout=120):
    cmd = [sys.executable, str(CRASH), crash, "train", *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def _down(rate, train):
    """How far above its floor a learning rate is, as a part of the way from peak to floor."""
    low = train["min_learning_rate"]
    return (rate - low) / (train["learning_rate"] - low)


def _last_step_left(train):
    """The most a cosine can have left of its way down after its last step, as a part of the
    way (`_down`): sin^2(pi / 2D) over D decay steps, the run's steps less its warm-up. How
    many epochs (and steps each) a budget plans is measured, so the bound follows them (12
    steps leave 2%)."""
    import math

    steps_per_epoch = train["time_steps"] or train["steps_per_epoch"]
    warmup = math.ceil(train["warmup_epochs"] * steps_per_epoch)
    decay = train["epochs"] * steps_per_epoch - warmup
    return math.sin(math.pi / (2 * max(decay, 1))) ** 2 + 1e-6


def _config(run):
    return tomllib.loads((run / "config.toml").read_text())["train"]


def test_a_timed_run_ends_within_its_budget_with_its_rate_at_the_floor(tiny_petals, tmp_path,
                                                                       capsys):
    from corolla.cli import main

    # ~8 s of start-up and probe (six sizes of the cpu recipe's ramp) on a slow 2-core host.
    assert main(["train", "--data", str(tiny_petals), *TINY, "--time", "25s", "--runs-dir",
                 str(tmp_path), "--name", "t"]) == 0
    run = tmp_path / "t"
    rows, train = read_history(run / "history.csv"), _config(run)
    # The plan is in the run: its epochs, the recipe's shape scaled, the line the log said.
    line = next(out for out in capsys.readouterr().out.splitlines() if out.startswith("time 25s:"))
    assert f"time 25s: {train['epochs']} epochs of ~" in line and "measured" in line
    assert train["time_budget"] == "25s" and train["time_plan"] == line.partition(": ")[2]
    assert len(rows) == train["epochs"] >= 2
    # Within the budget (the plan fills 85% of what start-up and probe left), and using it.
    assert 0.4 * 25 < rows[-1]["seconds"] <= 25
    assert [r["seconds"] for r in rows] == sorted(r["seconds"] for r in rows)
    # The cosine ends at its floor in the last epoch (its last update is one step before the
    # end), not cut off on the way down.
    assert _down(rows[-1]["learning_rate"], train) <= _last_step_left(train) < \
        _down(rows[0]["learning_rate"], train)


def test_a_killed_timed_run_re_run_continues_its_plan_and_counts_its_time(tiny_petals,
                                                                         tmp_path):
    from corolla.cli import main

    # Three epochs or more, so that one is left after the kill: ~7 s of start-up and probe,
    # ~4 s of tracing and ~2 s an epoch on a slow 2-core host.
    args = ["--data", tiny_petals, *TINY, "--time", "24s", "--runs-dir", tmp_path, "--name",
            "k"]
    killed = _train(args, crash="epoch_end:1")
    assert killed.returncode == 3 and "CRASH after epoch 1" in killed.stdout, killed.stderr[-2000:]
    run = tmp_path / "k"
    planned = _config(run)
    before = read_history(run / "history.csv")
    assert planned["time_plan"] and len(before) == 2

    assert main(["train", *map(str, args)]) == 0  # the same command: continued, not planned anew
    after, train = read_history(run / "history.csv"), _config(run)
    assert train == planned
    assert [r["epoch"] for r in after] == list(range(1, planned["epochs"] + 1))
    # The first session's seconds count: the second's continue from them.
    assert after[1]["seconds"] == before[1]["seconds"] < after[2]["seconds"]
    assert _down(after[-1]["learning_rate"], train) <= _last_step_left(train)


def test_a_budget_below_one_epoch_is_one_line_naming_the_least(tiny_petals, tmp_path, capsys):
    from corolla.cli import main

    assert main(["train", "--data", str(tiny_petals), *TINY, "--time", "1s", "--runs-dir",
                 str(tmp_path), "--name", "s"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("corolla: error: --time 1s (train.time_budget) is too short for one "
                          "epoch") and "give at least --time" in err and "\n" not in err
    least = err.rsplit("--time ", 1)[1]
    assert config.duration_seconds(least) > 1
    assert not (tmp_path / "s").exists()  # nothing trained, nothing left behind


def test_k_fold_folds_share_the_budget(tiny_petals, tmp_path):
    from corolla.cli import main

    # Each fold's share holds at least one epoch on a slow 2-core host (~7 s of start-up and
    # probe, ~7 s for an epoch and its tracing, the plan filling 85% of what is left).
    assert main(["train", "--data", str(tiny_petals), *TINY, "--folds", "2", "--time", "40s",
                 "--runs-dir", str(tmp_path), "--name", "k2"]) == 0
    parent = tmp_path / "k2"
    assert _config(parent)["time_budget"] == "40s"
    first, second = (_config(parent / f"fold-{k}") for k in (1, 2))
    spent = read_history(parent / "fold-1" / "history.csv")[-1]["seconds"]
    assert first["time_budget"] == "20s"  # half, for the first of two
    assert config.duration_seconds(second["time_budget"]) == pytest.approx(40 - spent, abs=1)
    total = sum(read_history(parent / f"fold-{k}" / "history.csv")[-1]["seconds"]
                for k in (1, 2))
    assert total <= 40


def test_a_timed_run_with_a_frozen_phase_on_cached_features_times_the_caching_itself(
        tiny_petals, tmp_path, capsys):
    from corolla.cli import main

    assert main(["train", "--data", str(tiny_petals), *TINY, "--frozen-epochs", "1",
                 "--augment", "flip", "--time", "20s", "--runs-dir", str(tmp_path), "--name",
                 "f"]) == 0
    out = capsys.readouterr().out
    probe = next(line for line in out.splitlines() if line.startswith("time probe: "))
    # The caching pass is what the probe timed for the frozen phase, not a frozen train step.
    assert "frozen features cached at 32 px" in probe and "frozen 32 px" not in probe
    assert "trained 32 px" in probe
    train = _config(tmp_path / "f")
    assert train["frozen_epochs"] >= 1 and train["epochs"] > train["frozen_epochs"]
    # The frozen phase did take that path; of one epoch, it cached no mirror images.
    assert "features of" in out and "cached in" in out
    assert ("mirror images" in out) == (train["frozen_epochs"] > 1)
    assert read_history(tmp_path / "f" / "history.csv")[-1]["seconds"] <= 20
