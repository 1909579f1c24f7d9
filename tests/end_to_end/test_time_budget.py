"""Tiny real runs for a time budget (`--time`): they end within their budget at the schedule's
floor, record their plan, continue it after a kill, stop short of it on a host busier than
their probe found, refuse a budget below one epoch, share the budget among k-fold folds, time
the caching of a frozen phase, and refit in the time their validated training leaves."""

import json
import math
import re
import tomllib

import pytest

from corolla import config
from corolla.cli import main
from corolla.files import read_history
from corolla.runs import paths
from helpers.processes import crash_train

# And no epochs: the budget plans them. One model's plan: tiny_petals has 16 training photos a
# class, where a timed run refits by default (tests/training/test_refit.py holds that).
TINY = ("--batch-size", "8", "--steps-per-epoch", "2", "--refit", "off")
ONE_MODEL = {"train.refit": "off"}


def _down(rate, train):
    """How far above its floor a learning rate is, as a part of the way from peak to floor."""
    low = train["min_learning_rate"]
    return (rate - low) / (train["learning_rate"] - low)


def _last_step_left(train):
    """The most a cosine can have left of its way down after its last step, as a part of the
    way (`_down`): sin^2(pi / 2D) over D decay steps, the run's steps less its warm-up. How
    many epochs (and steps each) a budget plans is measured, so the bound follows them (12
    steps leave 2%)."""
    steps_per_epoch = train["time_steps"] or train["steps_per_epoch"]
    warmup = math.ceil(train["warmup_epochs"] * steps_per_epoch)
    decay = train["epochs"] * steps_per_epoch - warmup
    return math.sin(math.pi / (2 * max(decay, 1))) ** 2 + 1e-6


def _config(run):
    return tomllib.loads((run / paths.CONFIG).read_text())["train"]


def test_a_timed_run_ends_within_its_budget_with_its_rate_at_the_floor(train_tiny, tmp_path,
                                                                       capsys):
    # ~8 s of start-up and probe on a slow 2-core host; ~15 s beside another test on a busy one.
    run = train_tiny(tmp_path, "--time", "30s", name="t", tiny=TINY)
    rows, train = read_history(run / paths.HISTORY), _config(run)
    # The plan is in the run: its epochs, the recipe's shape scaled, the line the log said.
    out = capsys.readouterr().out.splitlines()
    line = next(s for s in out if s.startswith("time 30s:"))
    assert " epochs of ~" in line and "measured" in line
    # Made again after its second epoch (its first traces): the new plan is recorded after it.
    assert train["time_budget"] == "30s" and train["time_plan"].startswith(line.partition(": ")[2])
    again = [s for s in out if s.startswith("time 30s: plan made again after epoch 2, ") or
             s.startswith("time 30s: epoch 2 took ")]
    assert len(again) == 1 and (train["time_plan"].endswith(again[0].partition(": plan ")[2])
                                if "plan made again" in again[0] else
                                f"the plan of {train['epochs']} epochs stands" in again[0])
    # Within the budget (the plan fills 80% of what start-up and probe left), and using it:
    # 71-75% on a quiet 2-core host at 85%. This tiny run's epochs are mostly validation and commits
    # (one step of 8 images, 32 val images): a plan that charged every epoch the probe's cold
    # val pass (its tracing) and a backup for the whole commit ended at 43-44%.
    assert 0.45 * 30 < rows[-1]["seconds"] <= 30
    assert [r["seconds"] for r in rows] == sorted(r["seconds"] for r in rows)
    if any(s.startswith("time 30s: stopping after epoch") for s in out):
        # A host that turned much busier than the probe found it: the run stopped short of its
        # plan to end in time (`test_a_timed_run_on_a_host_slower_than_its_probe_...`).
        assert len(rows) < train["epochs"]
        return
    assert len(rows) == train["epochs"] >= 2
    # The cosine ends at its floor in the last epoch (its last update is one step before the
    # end), not cut off on the way down (the first epoch may still be warming up).
    assert _down(rows[-1]["learning_rate"], train) <= _last_step_left(train) < \
        _down(max(r["learning_rate"] for r in rows), train)


def test_a_killed_timed_run_re_run_continues_its_plan_and_counts_its_time(tiny_petals,
                                                                         tmp_path):
    # Three epochs or more, so that one is left after the kill: ~7 s of start-up and probe,
    # ~4 s of tracing and ~2 s an epoch on a slow 2-core host; beside another test, 12 s and
    # ~10 s.
    args = ["--data", tiny_petals, *TINY, "--time", "30s", "--runs-dir", tmp_path, "--name",
            "k"]
    killed = crash_train("epoch_end:1", "train", *args, timeout=120)
    assert killed.returncode == 3 and "CRASH after epoch 1" in killed.stdout, killed.stderr[-2000:]
    run = tmp_path / "k"
    planned = _config(run)
    before = read_history(run / paths.HISTORY)
    assert planned["time_plan"] and len(before) == 2

    assert main(["train", *map(str, args)]) == 0  # the same command: continued, not planned anew
    after, train = read_history(run / paths.HISTORY), _config(run)
    assert train == planned
    assert [r["epoch"] for r in after] == list(range(1, planned["epochs"] + 1))
    # The first session's seconds count: the second's continue from them.
    assert after[1]["seconds"] == before[1]["seconds"] < after[2]["seconds"]
    assert _down(after[-1]["learning_rate"], train) <= _last_step_left(train)


def test_a_timed_run_on_a_host_slower_than_its_probe_stops_within_its_budget(train_tiny,
                                                                              tmp_path,
                                                                              monkeypatch):
    import time

    import keras

    from corolla.training import time_plan

    class Busier(keras.callbacks.Callback):  # from the first epoch on, 0.5 s more an epoch
        def on_epoch_begin(self, epoch, logs=None):
            time.sleep(0.5)

    # The deadline alone: a plan made again would shrink to the slower pace (the test below),
    # and on a host as busy as CI's it can leave no epoch to stop short of.
    monkeypatch.setattr(time_plan, "_replan_after", lambda *args: 0)

    lines = []
    result, _ = train_tiny.fit(tmp_path, "b", {"train.time_budget": "20s", **ONE_MODEL},
                               [Busier()],
                               log=lines.append)
    run, train = tmp_path / "b", _config(tmp_path / "b")
    rows = read_history(run / paths.HISTORY)
    # Planned on the probe's pace (~0.3 s an epoch here), the epochs took several times
    # longer: the run stopped short of its plan, inside its budget, and said why.
    stop = [line for line in lines if line.startswith("time 20s: stopping after epoch")]
    assert len(stop) == 1 and f"stopping after epoch {len(rows)} of {train['epochs']}: its " \
        f"epochs took" in stop[0], lines[-5:]
    assert 2 <= len(rows) < train["epochs"]
    assert rows[-1]["seconds"] <= 20
    # A finished run all the same: its best epoch saved.
    assert result is not None and (run / paths.MODEL).is_file()


def test_a_budget_below_one_epoch_is_one_line_naming_the_least(train_tiny, tmp_path, capsys):
    train_tiny(tmp_path, "--time", "1s", name="s", tiny=TINY, code=2)
    err = capsys.readouterr().err.strip()
    assert err.startswith("corolla: error: --time 1s (train.time_budget) is too short for one "
                          "epoch") and "give at least --time" in err and "\n" not in err
    least = err.rsplit("--time ", 1)[1]
    assert config.duration_seconds(least) > 1
    assert not (tmp_path / "s").exists()  # nothing trained, nothing left behind


def test_a_k_fold_budget_that_holds_no_epoch_of_a_fold_is_one_line_in_the_budget_given(
        train_tiny, tmp_path, capsys):
    train_tiny(tmp_path, "--folds", "2", "--time", "4s", name="k", tiny=TINY, code=2)
    err = capsys.readouterr().err.strip()
    # The budget the user gave, not fold 1's half of it, and the least for both folds.
    assert err.startswith("corolla: error: --time 4s (train.time_budget) is too short for 2 "
                          "folds of recipe ") and "fold 1's share of it (2s) holds no epoch" in \
        err and "\n" not in err, err
    found = re.search(r"\((\d+) s went on starting and measuring, and one epoch would take "
                      r"~(\d+) s more\); give at least --time (\w+)$", err)
    start, one, least = int(found[1]), int(found[2]), config.duration_seconds(found[3])
    assert least >= 2 * (start + one)  # each fold pays its own start-up and epoch
    # Nothing was trained: the same command with that budget starts anew (a folder left
    # behind would refuse its --name).
    assert not (tmp_path / "k").exists()


@pytest.mark.large  # 80 s of budget and more: CI runs it after the rest
def test_k_fold_folds_share_the_budget(train_tiny, tmp_path):
    # Each fold's share holds an epoch on a host twice as slow as these 2 cores (CI's, beside
    # its installs, took 13 s to start and probe and ~11 s for an epoch and its tracing, with
    # the plan filling 80% of what is left): 20 s each did not.
    parent = train_tiny(tmp_path, "--folds", "2", "--time", "80s", name="k2", tiny=TINY)
    assert _config(parent)["time_budget"] == "80s"
    first, second = (_config(parent / f"fold-{k}") for k in (1, 2))
    spent = read_history(parent / "fold-1" / paths.HISTORY)[-1]["seconds"]
    assert first["time_budget"] == "40s"  # half, for the first of two
    # What fold 1 left, in whole seconds rounded down: rounded up, two folds could spend more
    # than the budget between them.
    assert config.duration_seconds(second["time_budget"]) == math.floor(80 - spent)
    total = sum(read_history(parent / f"fold-{k}" / paths.HISTORY)[-1]["seconds"]
                for k in (1, 2))
    assert total <= 80


def test_a_timed_run_with_a_frozen_phase_on_cached_features_times_the_caching_itself(
        train_tiny, tmp_path, capsys):
    run = train_tiny(tmp_path, "--frozen-epochs", "1", "--augment", "flip", "--time", "20s",
                     name="f", tiny=TINY)
    out = capsys.readouterr().out
    probe = next(line for line in out.splitlines() if line.startswith("time probe: "))
    # The caching pass is what the probe timed for the frozen phase, not a frozen train step.
    assert "frozen features cached at 32 px" in probe and "frozen 32 px" not in probe
    assert "trained 32 px" in probe
    train = _config(run)
    assert train["frozen_epochs"] >= 1 and train["epochs"] > train["frozen_epochs"]
    # The frozen phase did take that path; of one epoch, it cached no mirror images.
    assert "features of" in out and "cached in" in out
    assert ("mirror images" in out) == (train["frozen_epochs"] > 1)
    assert read_history(run / paths.HISTORY)[-1]["seconds"] <= 20


@pytest.mark.parametrize("host", ["faster", "slower"])
def test_a_timed_run_plans_again_from_its_pace_and_ends_at_the_floor_in_its_budget(
        train_tiny, tmp_path, monkeypatch, host):
    """A probe that found the host 5 times slower than it is (faster), or a host that turned
    slower by 0.5 s an epoch from the first (slower: ~0.15 s an epoch here; 30 s leave room for
    fewer epochs than planned but more than two, and for the slowed probe beside another
    test): the plan is made again after the second epoch from its pace, for more epochs or
    fewer, and the run ends inside its budget with its learning rate at its floor."""
    import time

    import keras

    from corolla.training import probe

    callbacks = []
    if host == "faster":
        measure = probe.measure

        def slow_probe(trainer, kinds, costs, *args, **kwargs):
            measure(trainer, kinds, costs, *args, **kwargs)
            for part in (costs.step, costs.epoch, costs.val):
                part.update({k: 5 * v for k, v in part.items()})
            costs.backup *= 5

        monkeypatch.setattr(probe, "measure", slow_probe)
    else:
        class Slower(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                time.sleep(0.5)

        callbacks.append(Slower())
    lines, budget = [], 30
    train_tiny.fit(tmp_path, "p", {"train.time_budget": f"{budget}s", **ONE_MODEL}, callbacks,
                   log=lines.append)
    train, rows = _config(tmp_path / "p"), read_history(tmp_path / "p" / paths.HISTORY)
    said = f"time {budget}s: "
    first = next(s for s in lines if s.startswith(said) and " epochs of ~" in s)
    planned = int(first.split()[2])
    (again,) = [s for s in lines if s.startswith(f"{said}plan made again after epoch 2")]
    assert (train["epochs"] > planned) if host == "faster" else \
        (2 < train["epochs"] < planned), lines
    assert f": {train['epochs']} epochs, ~" in again and \
        again == f"{said}plan {train['time_plan'].rpartition('; ')[2]}"
    assert rows[-1]["seconds"] <= budget
    if any(s.startswith(f"{said}stopping after epoch") for s in lines):
        # Epochs of a tiny run on a busy host vary: one well behind its pace near the end
        # stops the run short of its plan (the test above).
        assert len(rows) < train["epochs"]
        return
    assert len(rows) == train["epochs"]
    assert _down(rows[-1]["learning_rate"], train) <= _last_step_left(train)


def test_a_timed_run_refits_in_the_time_its_validated_training_leaves(train_tiny, tmp_path,
                                                                      capsys):
    # tiny_petals (16 training photos a class): a timed run refits by default.
    run = train_tiny(tmp_path, "--time", "40s", name="r",
                     tiny=("--batch-size", "8", "--steps-per-epoch", "2"))
    out = capsys.readouterr().out
    assert "refit auto: on" in out
    plan = json.loads((run / paths.REFIT_PLAN).read_text())
    validated = read_history(run / paths.HISTORY)
    assert plan["validated_epochs"] == len(validated) and plan["epochs"] <= len(validated)
    if plan["epochs"] == 0:  # a tiny run's epochs vary: one that fell behind left no room
        assert "the validated model predicts the test split" in out
        assert not (run / paths.REFIT).is_file()
        return
    # Planned from what the validated training left, at most its epochs, trained as planned
    # or stopped short of them to end in time; each at least a pass over train + val (64 + 32
    # photos: the validated epoch's steps x 96 / 64) and at most twice one.
    refitted = read_history(run / paths.REFIT_HISTORY)
    assert (run / paths.REFIT).is_file() and "by the refit on train + val" in out
    assert 1 <= len(refitted) <= plan["epochs"]
    assert len(refitted) == plan["epochs"] or "time 40s: stopping after epoch" in out
    train = _config(run)
    one_pass = math.ceil((train["time_steps"] or train["steps_per_epoch"]) * 96 / 64)
    assert one_pass <= plan["settings"]["train.time_steps"] <= 2 * one_pass
