"""Refit (--refit): the validated model keeps the val scores; a second model, trained from the
same start on train + val for the validated model's epochs, predicts the test split; in a time
budget it takes the epochs that fit; killed midway it continues from its own backup."""

import dataclasses
import json

import numpy as np
import pytest

from corolla import config
from corolla.errors import UserError
from corolla.files import read_history
from corolla.runs import paths
from corolla.training import refit
from corolla.training.timing import budget
from corolla.training.timing.plan import RefitRoom
from helpers.cli import one_line_error
from helpers.runs import same, saved_weights


def test_a_refit_run_predicts_the_test_split_with_its_model_trained_on_train_and_val(
        train_tiny, tmp_path):
    from corolla.evaluation import inference
    from corolla.evaluation.unlabelled import predict

    run = train_tiny(tmp_path, "--epochs", 2, "--refit", name="r")
    plan = json.loads((run / paths.REFIT_PLAN).read_text())
    # tiny_petals: 64 train and 32 val photos; epochs of 2 steps over 64 are 3 over 96
    assert plan["photos"] == 96 and plan["settings"]["train.time_steps"] == 3
    rows = read_history(run / paths.REFIT_HISTORY)
    assert len(rows) == plan["epochs"] == len(read_history(run / paths.HISTORY)) == 2
    assert "val_f1_macro" not in rows[0]  # the refit trains on val: nothing to validate on
    metrics = json.loads((run / paths.METRICS).read_text())
    assert metrics["model"].startswith(f"{paths.MODEL} (validated")
    opened = inference.open_run(run, log=lambda *a: None)
    saved = np.load(run / paths.PREDICTIONS / "test.npz")["probabilities"]
    by = {name: predict(inference.load_model(run, opened.plan, 4, final=final), opened.layout,
                        opened.plan).probabilities
          for name, final in (("refit", True), ("validated", False))}
    np.testing.assert_allclose(saved, by["refit"], atol=1e-6)
    assert not np.allclose(saved, by["validated"], atol=1e-3)
    assert (run / paths.FINISHED).is_file() and not (run / paths.REFIT_BACKUP).exists()


def test_a_refit_trains_every_validated_epoch_or_up_to_the_best_where_early_stopping_ended():
    rows = [{"val_f1_macro": f} for f in (0.5, 0.9, 0.9, 0.3)]
    six = config.load_config(overrides={"train.epochs": 6}).train
    assert refit.refit_epochs(rows, six) == 4  # the whole schedule trained so far
    stopped = config.load_config(overrides={"train.epochs": 6,
                                            "train.early_stopping_patience": 2}).train
    assert refit.refit_epochs(rows, stopped) == 2  # the first of the best
    assert refit.refit_epochs(rows * 2, config.load_config(overrides={
        "train.epochs": 8, "train.early_stopping_patience": 2}).train) == 8  # not stopped
    assert refit.refit_epochs([{"loss": 1.0}] * 3, stopped) == 3  # no val scores: all of them


def _history(run_dir, epochs: int) -> None:
    from corolla.training.backup import write_history

    run_dir.mkdir()
    write_history([{"epoch": e + 1, "val_f1_macro": 0.1 * e} for e in range(epochs)],
                  run_dir / paths.HISTORY)


def _each(first: float, then: float, epochs: int = 10):
    """Refit epochs' estimated seconds as `make_plan`'s room gives them: at 6 steps (a pass over
    64 train and 32 val photos, of a validated epoch's 4) `first` and `then`; a step 1 s."""
    return lambda steps: [first + steps - 6] + [then + steps - 6] * (epochs - 1)


def test_a_refit_in_a_time_budget_takes_the_epochs_that_fit_on_its_schedule_reshaped(tmp_path):
    cfg = config.load_config(overrides={"train.epochs": 10, "train.warmup_epochs": 2,
                                        "train.time_budget": "1m"})
    said = []
    _history(tmp_path / "a", 10)
    # 64 train and 32 val photos: epochs of 4 steps are 6; refit epochs of 9.5 s (the first,
    # which traces) and 7.5 s: 3 of them in 25 s
    plan = refit.make_plan(tmp_path / "a", cfg, 4, (64, 32), said.append,
                           RefitRoom(25.0, _each(9.5, 7.5)))
    assert plan["epochs"] == 3 and plan["settings"]["train.time_steps"] == 6
    assert {k: plan["settings"][k] for k in budget.shaped(cfg.train, 3)} == \
        budget.shaped(cfg.train, 3)
    assert plan["settings"]["train.epochs"] == 3 and "room for 3 of the 10 epochs" in said[0]
    assert json.loads((tmp_path / "a" / paths.REFIT_PLAN).read_text()) == plan
    _history(tmp_path / "b", 10)
    none = refit.make_plan(tmp_path / "b", cfg, 4, (64, 32), said.append,
                           RefitRoom(5.0, _each(7.5, 7.5)))
    assert none["epochs"] == 0 and "the validated model predicts" in said[-1]
    _history(tmp_path / "c", 10)
    exact = refit.make_plan(tmp_path / "c", cfg, 4, (64, 32), said.append,
                            RefitRoom(77.5, _each(9.5, 7.5)))
    assert exact["epochs"] == 10 and "train.epochs" not in exact["settings"]
    assert exact["settings"]["train.time_steps"] == 6 and len(said) == 2


def test_a_refit_with_time_to_spare_lengthens_its_epochs_up_to_a_bound(tmp_path):
    cfg = config.load_config(overrides={"train.epochs": 4, "train.time_budget": "1m"})
    said = []
    _history(tmp_path / "a", 4)
    # 4 epochs of 6 steps take 9.5 + 3 x 7.5 = 32 s; each step more costs 4 s over the four:
    # in 40 s, 8 steps an epoch (40 s), not 9 (44 s)
    plan = refit.make_plan(tmp_path / "a", cfg, 4, (64, 32), said.append,
                           RefitRoom(41.0, _each(9.5, 7.5, 4)))
    assert plan["epochs"] == 4 and plan["settings"]["train.time_steps"] == 8
    assert "train.epochs" not in plan["settings"]
    assert "room for the refit's 4 epochs at 8 steps each (of 6" in said[-1]
    # Far more time: at most LONGEST times a pass (12 steps of 6), its epochs the validated ones
    _history(tmp_path / "b", 4)
    wide = refit.make_plan(tmp_path / "b", cfg, 4, (64, 32), said.append,
                           RefitRoom(1000.0, _each(9.5, 7.5, 4)))
    assert wide["epochs"] == 4 and wide["settings"]["train.time_steps"] == \
        int(refit.LONGEST * 6) == 12
    # Early stopping ended the validated run (3 of 4 epochs): more training is what val found
    # worse, so the refit keeps its pass
    stopping = config.load_config(overrides={"train.epochs": 4, "train.time_budget": "1m",
                                             "train.early_stopping_patience": 1})
    _history(tmp_path / "c", 3)
    early = refit.make_plan(tmp_path / "c", stopping, 4, (64, 32), said.append,
                            RefitRoom(1000.0, _each(9.5, 7.5, 4)))
    assert early["epochs"] == 3 and early["settings"]["train.time_steps"] == 6


def test_a_budget_shared_with_a_refit_gives_the_validated_training_its_part():
    from corolla.training.phases import phases

    cfg = config.load_config(overrides={"train.epochs": 2, "model.input_size": 32})
    costs = budget.Costs(step={(False, 32): 1.0}, first={(False, 32): 3.0},
                         epoch={(False, 32): 0.0}, val={32: 2.0}, val_first={32: 1.0})

    def phases_of(train, size):
        return phases(train, True, size)

    # validated: 3 + 1 (tracing) + 2 x (4 steps + 2 s val) = 16 s and the final save (0 here);
    # refit: 3 (tracing) + 2 x 6 steps, no validation = 15 s
    share = budget.validated_share(cfg, phases_of, costs, 4, None, 64, 32)
    assert share == pytest.approx(16 / 31)
    refit_costs, _ = budget.refit_costs(costs, None, 64, 32)
    assert refit_costs.val == {32: 0.0} and costs.val == {32: 2.0}  # (the run's own kept)
    cached, caching = budget.refit_costs(costs, budget.Caching(True, 8, 4), 64, 32)
    assert caching == budget.Caching(True, 12, 0)  # train + val cached, none validated
    # the least budget holds the epoch in that part: 10 s + 8 s / (0.8 x 0.4)
    assert budget.least_budget(10, 8, 0.4) == 40 and budget.least_budget(10, 8) == 20
    assert "before the refit" in str(budget.TooShort("20s", 10, 8, "cpu", 0.4))


def test_refit_with_k_fold_is_refused(tiny_petals, tmp_path, capsys):
    one_line_error(capsys, ["train", "--data", str(tiny_petals), "--refit", "--folds", "2",
                            "--runs-dir", str(tmp_path)], "--refit", "--folds")


def test_a_refit_killed_midway_continues_from_its_backup_as_the_uninterrupted_one(
        train_tiny, tmp_path, monkeypatch):
    overrides = {"train.epochs": 2, "train.refit": True, "train.deterministic": True}
    for name in "ab":
        _, plan = train_tiny.fit(tmp_path, name, overrides)  # (b's plan serves both refits)

    def quiet(*args):
        pass

    refit.train(tmp_path / "a", plan, quiet)

    class Killed(refit.Trainer):
        def fit_phases(self, until=0):
            super().fit_phases(until=1)
            raise KeyboardInterrupt

    real = refit.Trainer
    monkeypatch.setattr(refit, "Trainer", Killed)
    with pytest.raises(KeyboardInterrupt):
        refit.train(tmp_path / "b", plan, quiet)
    assert not (tmp_path / "b" / paths.REFIT).exists()
    assert [r["epoch"] for r in read_history(tmp_path / "b" / paths.REFIT_HISTORY)] == [1]
    monkeypatch.setattr(refit, "Trainer", real)
    said = []
    refit.train(tmp_path / "b", plan, said.append)
    assert "continuing after epoch 1" in said[0]
    assert [r["epoch"] for r in read_history(tmp_path / "b" / paths.REFIT_HISTORY)] == [1, 2]
    assert same(saved_weights(tmp_path / "a" / paths.REFIT),
                saved_weights(tmp_path / "b" / paths.REFIT))


def test_a_refit_plan_that_sets_other_settings_is_refused(tiny_run_copy, capsys):
    run = tiny_run_copy  # (any finished run: its training is not this test's)
    (run / paths.FINISHED).unlink()  # trained, its refit to come, as after a kill
    (run / paths.REFIT_PLAN).write_text(json.dumps(
        {"epochs": 1, "photos": 96, "settings": {"data.path": "/elsewhere"}}))
    cfg = config.load_config(run / paths.CONFIG)
    config.save_config(config.with_settings(cfg, {"train.refit": True}), run / paths.CONFIG)
    one_line_error(capsys, ["train", "--resume", str(run)], "refit.json",
                   "not a refit plan")


def _train_split(data):
    from corolla.data import datasets

    return datasets.open_data(str(data), 0, 32).split("train")


def test_auto_refits_a_timed_run_whose_classes_have_few_training_photos(tiny_petals,
                                                                        rare_class):
    from corolla import runtime
    from corolla.training import settings

    timed = config.load_config(overrides={"train.time_budget": "5m"})
    plan = runtime.detect_for(timed)
    said = []
    # tiny_petals: 16 training photos in each of its 4 classes
    assert settings.refit(timed, plan, _train_split(tiny_petals), said.append) == "on"
    assert said == ["refit auto: on, a median of 16 training photos a class (fewer than 30: "
                    "val's photos add to what little each class has, so the model that "
                    "predicts trains again on train + val after validation; --refit off to "
                    "skip it)"]
    # rare_class: 150, 150 and 15 photos (its rare class does not decide: the median does)
    assert settings.refit(timed, plan, _train_split(rare_class), said.append) == "off"
    assert "a median of 150 training photos a class (not fewer than 30" in said[-1]
    few = _train_split(tiny_petals)
    untimed = config.load_config()
    assert untimed.train.refit == "auto"
    assert settings.refit(untimed, plan, few, said.append) == "off"  # the epochs were asked
    folds = config.load_config(overrides={"train.time_budget": "5m", "train.folds": 2})
    assert settings.refit(folds, plan, few, said.append) == "off"  # every fold's model predicts
    two = dataclasses.replace(plan, num_processes=2)
    assert settings.refit(timed, two, few, said.append) == "off"
    for given in ("on", "off"):  # as given, whatever the photos
        asked = config.with_settings(timed, {"train.refit": given})
        assert settings.refit(asked, plan, _train_split(rare_class), said.append) == given
    assert len(said) == 2


def test_refit_takes_on_off_auto_and_the_bools_of_earlier_runs(tmp_path):
    from corolla import cli
    from corolla.commands import arguments

    assert config.load_config(overrides={"train.refit": True}).train.refit == "on"
    assert config.load_config(overrides={"train.refit": False}).train.refit == "off"
    saved = tmp_path / "config.toml"  # as runs before "auto" recorded it
    saved.write_text("[train]\nrefit = true\n")
    assert config.load_config(saved).train.refit == "on"
    parser = cli.build_parser()
    for argv, value in ((["--refit"], "on"), (["--refit", "off"], "off"), ([], None)):
        given = arguments.settings(parser.parse_args(["train", *argv]))
        assert given.get("train.refit") == value
    with pytest.raises(UserError, match="refit must be one of auto, on, off, got 'sometimes'"):
        config.load_config(overrides={"train.refit": "sometimes"})


def test_a_timed_refit_stops_short_where_its_next_epoch_would_end_past_the_budget():
    # The budget ends 30 s after the refit starts; 3 epochs of 10 steps at 1 s a step planned.
    timed = RefitRoom(left=30.0, each_at=lambda steps: [1.0 * steps] * 4, ends=130.0, save=2.0)
    deadline = timed.deadline(began=100.0, epochs=3, steps=10)
    assert deadline.total == 30.0 and deadline.planned == (10.0, 10.0, 10.0)
    # On its plan after epoch 1: epoch 2 (with a tenth more) and the save end at 23 s of 30.
    assert deadline.next_end([{"epoch": 1, "seconds": 10.0}]) == pytest.approx(23.0)
    # Epoch 2 took 1.5x its plan: the third would end at 25 + (11 + 2) x 1.5 s, past 30.
    late = deadline.next_end([{"epoch": 1, "seconds": 10.0}, {"epoch": 2, "seconds": 25.0}])
    assert late == pytest.approx(44.5) and late > deadline.total
