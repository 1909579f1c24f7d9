"""Tiny runs for a time budget (`--time`) on a clock advanced by the work they do
(helpers.clock.StepClock: half a second a training step, a fifth a batch predicted, 0.3 s a
commit), so that what a budget does is held exactly at any load: they end within their budget
at the schedule's floor, record their plan, continue it after a kill, stop short of it on a
host slower than their probe found, plan again from their pace, refuse a budget below one
epoch, share the budget among k-fold folds, time the caching of a frozen phase, and refit in
the time their validated training leaves. Two runs read the host's own clock (`large`): only
there does a budget meet a real host's pace."""

import json
import math
import os
import re
import subprocess
import sys
import time
import tomllib

import pytest

from corolla import config
from corolla.files import read_history
from corolla.runs import paths, rundir
from helpers.clock import StepClock, driving, pace_from
from helpers.runs import Stop

# And no epochs: the budget plans them. One model's plan: tiny_petals has 16 training photos a
# class, where a timed run refits by default (tests/training/test_refit.py holds that).
TINY = ("--batch-size", "8", "--steps-per-epoch", "2", "--refit", "off")
ONE_MODEL = {"train.refit": "off"}


@pytest.fixture
def clock(monkeypatch):
    """The step clock every run of the test reads."""
    with driving(StepClock(), monkeypatch) as clock:
        yield clock


def _down(rate, train):
    """How far above its floor a learning rate is, as a part of the way from peak to floor."""
    low = train["min_learning_rate"]
    return (rate - low) / (train["learning_rate"] - low)


def _last_step_left(train):
    """The most a cosine can have left of its way down after its last step, as a part of the
    way (`_down`): sin^2(pi / 2D) over D decay steps, the run's steps less its warm-up."""
    steps_per_epoch = train["time_steps"] or train["steps_per_epoch"]
    warmup = math.ceil(train["warmup_epochs"] * steps_per_epoch)
    decay = train["epochs"] * steps_per_epoch - warmup
    return math.sin(math.pi / (2 * max(decay, 1))) ** 2 + 1e-6


def _config(run):
    """The train settings the run trains by: its config.toml, with its time_plan.json."""
    return rundir.config_of(run).to_dict()["train"]


def test_a_timed_run_ends_within_its_budget_with_its_rate_at_the_floor(train_tiny, tmp_path,
                                                                       capsys, clock):
    run = train_tiny(tmp_path, "--time", "30s", name="t", tiny=TINY)
    rows, train = read_history(run / paths.HISTORY), _config(run)
    # The plan is in the run: its epochs, the recipe's shape scaled, the line the log said.
    out = capsys.readouterr().out.splitlines()
    line = next(s for s in out if s.startswith("time 30s:"))
    assert " epochs of ~" in line and "measured" in line
    assert train["time_budget"] == "30s" and train["time_plan"].startswith(line.partition(": ")[2])
    # The plan's decisions are the run's own file's, not in the user's config.toml.
    toml = tomllib.loads((run / paths.CONFIG).read_text())["train"]
    assert toml["time_budget"] == "30s" and not [k for k in toml if k.startswith("time_steps")]
    assert "time_plan" not in toml and (run / paths.TIME_PLAN).is_file()
    # Made again after its second epoch (its first traces), at the pace the probe found:
    # the plan fills 95% of the budget where the first filled 80% of what the probe left.
    (again,) = [s for s in out if s.startswith("time 30s: plan made again after epoch 2, ")]
    assert "which took 1.00x the probe's estimate" in again and \
        train["time_plan"].endswith(again.partition(": plan ")[2])
    assert not any("stopping after epoch" in s for s in out)  # the host kept its pace
    assert len(rows) == train["epochs"] > 2
    # Within the budget less what follows training (the plan line says it), and using it:
    # an epoch more would not have fitted.
    after = float(re.search(r", ~(\d+) s kept for the evaluation and predictions", line)[1])
    each = rows[-1]["seconds"] - rows[-2]["seconds"]
    assert 0.95 * (30 - after) - each - 1 < rows[-1]["seconds"] <= 0.95 * (30 - after) + 1
    # The cosine ends at its floor in the last epoch (its last update is one step before the
    # end), not cut off on the way down (the first epoch may still be warming up).
    assert _down(rows[-1]["learning_rate"], train) <= _last_step_left(train) < \
        _down(max(r["learning_rate"] for r in rows), train)


def test_the_budget_is_the_whole_commands_its_last_line_the_time_against_it(
        train_tiny, tmp_path, capsys, clock, monkeypatch):
    from corolla.flows import check_data
    from corolla.training.timing import budget

    checked = check_data.for_training

    def slow_start(*args, **kwargs):  # a host slow to import and to check the data
        clock.advance(8.0)
        return checked(*args, **kwargs)

    monkeypatch.setattr(check_data, "for_training", slow_start)
    began = clock.now()
    run = train_tiny(tmp_path, "--time", "30s", name="w", tiny=TINY)
    took = clock.since(began)
    out = capsys.readouterr().out.splitlines()
    # The start-up counts: the plan is made on what it left, less what follows training.
    plan = next(s for s in out if s.startswith("time 30s:") and " of ~" in s)
    spent = int(re.search(r"planned after (\d+) s of start-up and probe", plan)[1])
    assert spent >= 8 and "kept for the evaluation and predictions after it" in plan
    # Test predictions, submission.csv and the report written within the budget, and said.
    assert all((run / name).is_file() for name in (paths.SUBMISSION, paths.REPORT,
                                                   paths.METRICS))
    # (The report's pages take no time on this clock: the plan kept budget.REPORT_SECONDS.)
    assert 0.8 * 30 - budget.REPORT_SECONDS <= took <= 30
    assert out[-1] == f"done in {took / 60:.1f} min of --time 30s ({took / 30:.0%}): {run}"


def test_a_killed_timed_run_re_run_continues_its_plan_and_counts_its_time(train_tiny, tmp_path,
                                                                          clock):
    import keras

    class Crash(keras.callbacks.Callback):  # after the checkpoint's commit of epoch 2
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise Stop

    settings = {"train.time_budget": "30s", **ONE_MODEL}
    assert train_tiny.fit(tmp_path, "k", settings, [Crash()])[0] is None
    run = tmp_path / "k"
    planned, before = _config(run), read_history(run / paths.HISTORY)
    assert planned["time_plan"] and len(before) == 2
    # The plan is the run's time_plan.json's, which the resumed run reads back.
    assert "time_plan" not in tomllib.loads((run / paths.CONFIG).read_text())["train"]
    assert json.loads((run / paths.TIME_PLAN).read_text())["plan"] == planned["time_plan"]
    clock.advance(100)  # time between the sessions does not count against the budget

    train_tiny.fit(tmp_path, "k", {}, resume=True)  # continued, not planned anew
    after, train = read_history(run / paths.HISTORY), _config(run)
    assert train == planned
    assert [r["epoch"] for r in after] == list(range(1, planned["epochs"] + 1))
    # The first session's seconds count: the second's continue from them, and the plan ends
    # in its budget.
    assert after[1]["seconds"] == before[1]["seconds"] < after[2]["seconds"]
    assert after[-1]["seconds"] <= 30
    assert _down(after[-1]["learning_rate"], train) <= _last_step_left(train)


def test_a_timed_run_on_a_host_slower_than_its_probe_stops_within_its_budget(train_tiny,
                                                                             tmp_path,
                                                                             monkeypatch,
                                                                             clock):
    from corolla.training.timing.plan import TimePlan

    # The deadline alone: a plan made again would shrink to the slower pace (the test below).
    monkeypatch.setattr(TimePlan, "_replan_after", lambda *args: 0)
    lines = []
    result, _ = train_tiny.fit(tmp_path, "b", {"train.time_budget": "30s", **ONE_MODEL},
                               [pace_from(clock, 2.5)], log=lines.append)
    run, train = tmp_path / "b", _config(tmp_path / "b")
    rows = read_history(run / paths.HISTORY)
    # Planned on the probe's pace, the epochs took 2.5 times longer: the run stopped short of
    # its plan, inside its budget, and said why.
    (stop,) = [line for line in lines if line.startswith("time 30s: stopping after epoch")]
    assert f"stopping after epoch {len(rows)} of {train['epochs']}: its epochs took 2.50x " \
        f"the probe's estimate" in stop, lines[-5:]
    assert 2 <= len(rows) < train["epochs"]
    assert rows[-1]["seconds"] <= 30
    # A finished run all the same: its best epoch saved.
    assert result is not None and (run / paths.MODEL).is_file()


def test_a_budget_below_one_epoch_is_one_line_naming_the_least(train_tiny, tmp_path, capsys,
                                                               clock):
    from corolla.training.timing import budget

    train_tiny(tmp_path, "--time", "1s", name="s", tiny=TINY, code=2)
    err = capsys.readouterr().err.strip()
    assert err.startswith("corolla: error: --time 1s (train.time_budget) is too short for one "
                          "epoch") and "give at least --time" in err and "\n" not in err
    found = re.search(r": (\d+) s went on starting and measuring, (\d+) s are kept for the "
                      r"evaluation and predictions after training, and one epoch would take "
                      r"~(\d+) s more; give at least --time (\w+)$", err)
    spent, after, one = int(found[1]), int(found[2]), int(found[3])
    assert spent > 0 and after >= budget.REPORT_SECONDS and one > 0
    # The least holds an epoch in the share of it the plan fills, and what follows it (the
    # figures said are rounded: within 10 s of them).
    least = config.duration_seconds(found[4])
    assert abs(least - budget.least_budget(spent, one, after=after)) <= 10
    assert budget.MARGIN * (least - spent - after) >= one - 2
    assert not (tmp_path / "s").exists()  # nothing trained, nothing left behind


def test_a_k_fold_budget_that_holds_no_epoch_of_a_fold_is_one_line_in_the_budget_given(
        train_tiny, tmp_path, capsys, clock):
    train_tiny(tmp_path, "--folds", "2", "--time", "4s", name="k", tiny=TINY, code=2)
    err = capsys.readouterr().err.strip()
    # The budget the user gave, not fold 1's half of it, and the least for both folds.
    assert err.startswith("corolla: error: --time 4s (train.time_budget) is too short for 2 "
                          "folds of recipe ") and "fold 1's share of it (2s) holds no epoch" in \
        err and "\n" not in err, err
    found = re.search(r"\((\d+) s went on starting and measuring, (\d+) s are kept for the "
                      r"evaluation and predictions after training, and one epoch would take "
                      r"~(\d+) s more\); give at least --time (\w+)$", err)
    start, after, one = int(found[1]), int(found[2]), int(found[3])
    least = config.duration_seconds(found[4])
    # Each fold pays its own start-up, epoch and evaluation.
    assert least >= 2 * (start + after + one)
    # Nothing was trained: the same command with that budget starts anew (a folder left
    # behind would refuse its --name).
    assert not (tmp_path / "k").exists()


def test_a_k_fold_runs_folds_share_its_budget_from_the_commands_start(train_tiny, tmp_path,
                                                                        capsys, clock,
                                                                        monkeypatch):
    from corolla.flows import check_data

    checked = check_data.for_training

    def slow_start(*args, **kwargs):  # a host slow to import and to check the data
        clock.advance(2.0)
        return checked(*args, **kwargs)

    monkeypatch.setattr(check_data, "for_training", slow_start)
    train_tiny(tmp_path, "--folds", "2", "--time", "4s", name="k", tiny=TINY, code=2)
    err = capsys.readouterr().err.strip()
    # Fold 1's share is half of what the start-up left, not half of the budget.
    assert "fold 1's share of it (1s) holds no epoch" in err, err


@pytest.mark.large  # two folds of many epochs: CI runs it after the rest
def test_k_fold_folds_share_the_budget(train_tiny, tmp_path, clock):
    parent = train_tiny(tmp_path, "--folds", "2", "--time", "40s", name="k2", tiny=TINY)
    assert _config(parent)["time_budget"] == "40s"
    first, second = (_config(parent / f"fold-{k}") for k in (1, 2))
    spent = read_history(parent / "fold-1" / paths.HISTORY)[-1]["seconds"]
    assert first["time_budget"] == "20s"  # half, for the first of two
    # What fold 1 left of the budget counted from the command's start (its evaluation and
    # predictions too, not only its training), in whole seconds rounded down: rounded up, two
    # folds could spend more than the budget between them.
    assert config.duration_seconds(second["time_budget"]) <= math.floor(40 - spent)
    total = sum(read_history(parent / f"fold-{k}" / paths.HISTORY)[-1]["seconds"]
                for k in (1, 2))
    assert total <= 40


def test_a_timed_run_with_a_frozen_phase_on_cached_features_times_the_caching_itself(
        train_tiny, tmp_path, capsys, clock):
    run = train_tiny(tmp_path, "--frozen-epochs", "1", "--augment", "flip", "--time", "30s",
                     name="f", tiny=TINY)
    out = capsys.readouterr().out
    probe = next(line for line in out.splitlines() if line.startswith("time probe: "))
    # The caching pass is what the probe timed for the frozen phase, not a frozen train step:
    # a batch predicted, on this clock.
    assert f"frozen features cached at 32 px {clock.predict:.3g} s a batch" in probe and \
        "frozen 32 px" not in probe
    assert f"trained 32 px {clock.step:.3g} s a step" in probe
    train = _config(run)
    assert train["frozen_epochs"] >= 1 and train["epochs"] > train["frozen_epochs"]
    # The frozen phase did take that path; of one epoch, it cached no mirror images.
    assert "features of" in out and "cached in" in out
    assert ("mirror images" in out) == (train["frozen_epochs"] > 1)
    assert read_history(run / paths.HISTORY)[-1]["seconds"] <= 30


@pytest.mark.parametrize("host", ["faster", "slower"])
def test_a_timed_run_plans_again_from_its_pace_and_ends_at_the_floor_in_its_budget(
        train_tiny, tmp_path, clock, host):
    """A probe that found the host twice as slow as it is (faster), or a host that turned
    2.5 times slower from the first epoch (slower): the plan is made again after the second
    epoch from its pace, for more epochs or fewer, and the run ends inside its budget with its
    learning rate at its floor."""
    clock.pace = 2.0 if host == "faster" else 1.0  # the probe's
    lines, budget = [], 40
    train_tiny.fit(tmp_path, "p", {"train.time_budget": f"{budget}s", **ONE_MODEL},
                   [pace_from(clock, 1.0 if host == "faster" else 2.5)], log=lines.append)
    train, rows = _config(tmp_path / "p"), read_history(tmp_path / "p" / paths.HISTORY)
    said = f"time {budget}s: "
    planned = next(int(found[1]) for s in lines
                   if (found := re.match(f"{said}(\\d+) epochs? of ~", s)))
    (again,) = [s for s in lines if s.startswith(f"{said}plan made again after epoch 2")]
    assert f"which took {0.5 if host == 'faster' else 2.5:.2f}x the probe's estimate" in again
    assert (train["epochs"] > planned) if host == "faster" else \
        (2 < train["epochs"] < planned), lines
    assert f": {train['epochs']} epochs, ~" in again and \
        again == f"{said}plan {train['time_plan'].rpartition('; ')[2]}"
    assert not any(s.startswith(f"{said}stopping after epoch") for s in lines)
    assert len(rows) == train["epochs"] and rows[-1]["seconds"] <= budget
    assert _down(rows[-1]["learning_rate"], train) <= _last_step_left(train)


def test_a_timed_run_refits_in_the_time_its_validated_training_leaves(train_tiny, tmp_path,
                                                                      capsys, clock):
    # tiny_petals (16 training photos a class): a timed run refits by default.
    run = train_tiny(tmp_path, "--time", "40s", name="r",
                     tiny=("--batch-size", "8", "--steps-per-epoch", "2"))
    out = capsys.readouterr().out
    assert "refit auto: on" in out
    plan = json.loads((run / paths.REFIT_PLAN).read_text())
    validated = read_history(run / paths.HISTORY)
    # Planned from what the validated training left, at most its epochs, trained as planned;
    # each at least a pass over train + val (64 + 32 photos: the validated epoch's steps x
    # 96 / 64) and at most twice one; both in the budget.
    assert plan["validated_epochs"] == len(validated) and 1 <= plan["epochs"] <= len(validated)
    refitted = read_history(run / paths.REFIT_HISTORY)
    assert (run / paths.REFIT).is_file() and "by the refit on train + val" in out
    assert len(refitted) == plan["epochs"] and "stopping after epoch" not in out
    train = _config(run)
    one_pass = math.ceil((train["time_steps"] or train["steps_per_epoch"]) * 96 / 64)
    assert one_pass <= plan["settings"]["train.time_steps"] <= 2 * one_pass
    assert validated[-1]["seconds"] + refitted[-1]["seconds"] <= 40


# What only the host's own clock shows: a real run, its probe's pace against the pace its
# epochs then keep (tracing, a busy host), inside its budget. Margins for load 8 on 2 cores.

@pytest.mark.large  # a real one-minute budget
def test_a_timed_run_on_the_hosts_clock_ends_within_its_budget(train_tiny, tmp_path, capsys):
    run = train_tiny(tmp_path, "--time", "60s", name="real", tiny=TINY)
    rows, train = read_history(run / paths.HISTORY), _config(run)
    out = capsys.readouterr().out
    assert rows[-1]["seconds"] <= 60 and len(rows) <= train["epochs"]
    # Its plan's epochs all trained, the rate at its floor, or stopped short of them in time.
    assert len(rows) == train["epochs"] or "time 60s: stopping after epoch" in out
    if len(rows) == train["epochs"]:
        assert _down(rows[-1]["learning_rate"], train) <= _last_step_left(train)


@pytest.mark.large  # a real two-minute budget, TensorFlow's import in it (~30 s at load 8)
def test_the_whole_command_on_the_hosts_clock_ends_within_its_budget(tiny_petals, tmp_path):
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "corolla", "train", "--data", str(tiny_petals),
                           *TINY, "--time", "2m", "--runs-dir", str(tmp_path), "--name",
                           "whole"], env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                          capture_output=True, text=True, timeout=300)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "whole" / paths.SUBMISSION).is_file()
    assert took <= 1.05 * 120, (took, done.stdout[-3000:])
    assert done.stdout.splitlines()[-1].startswith("done in ")
