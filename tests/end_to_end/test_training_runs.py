"""`corolla train` end to end: what a run records about itself; resuming (after a crash, with
the same schedule and the same data as an uninterrupted run; after Ctrl-C; a folder killed
before its config); the data checked once; the decoded-image cache over its share of memory."""

import json
import os
import tomllib
from pathlib import Path

import pytest

from corolla.cli import main
from corolla.data import pipeline
from corolla.runs import paths
from helpers.cli import one_line_error
from helpers.images import planted_folder
from helpers.once import built_once
from helpers.processes import crash_train
from helpers.runs import assert_same_stored_weights, epochs, history

pytestmark = pytest.mark.slow  # every test trains tiny runs (or reads a module fixture's)


@pytest.mark.large  # 50 s: CI's large step (the README's suite keeps to 20 min)
def test_a_crashed_run_resumes_exactly_where_an_uninterrupted_one_would_be(tiny_petals,
                                                                           tmp_path):
    """--deterministic: a run killed after its second epoch and resumed (another process)
    ends bit-identical to an uninterrupted run with the same seed (same weights, optimizer
    step, data order and augmentation per epoch): which also shows that two runs with one seed
    are bit-identical. Its history has every epoch once."""
    common = ["--data", tiny_petals, "--epochs", 3, "--batch-size", 8, "--deterministic",
              "--runs-dir", tmp_path]
    result = crash_train("none", "train", *common, "--name", "a")
    assert result.returncode == 0, result.stderr[-3000:]
    crashed = crash_train("epoch_end:1", "train", *common, "--name", "c")
    assert crashed.returncode == 3 and "CRASH after epoch 1" in crashed.stdout
    run_c = tmp_path / "c"
    assert not (run_c / paths.MODEL).exists() and (run_c / paths.BACKUP / paths.STATE).is_file()
    assert epochs(run_c) == ["1", "2"]

    resumed = crash_train("none", "train", "--resume", run_c)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "FIRST_EPOCH 2" in resumed.stdout and "after epoch 2 of 3" in resumed.stdout
    assert not (run_c / paths.BACKUP).exists()  # gone once model.keras is safely written

    runs = {name: tmp_path / name for name in "ac"}
    histories = {name: history(run) for name, run in runs.items()}
    assert [r["epoch"] for r in histories["c"]] == ["1", "2", "3"]
    for key in ("learning_rate", "loss", "accuracy", "val_loss"):
        column = {name: [float(r[key]) for r in rows] for name, rows in histories.items()}
        assert column["a"] == column["c"], key
    lrs = [float(r["learning_rate"]) for r in histories["c"]]
    assert lrs[0] > lrs[1] > lrs[2]  # past the 1-epoch ramp, decaying towards the end
    assert_same_stored_weights(runs["a"] / paths.MODEL, runs["c"] / paths.MODEL)


def test_a_run_records_what_ran(tmp_path, tiny_petals, train_tiny):
    rel = os.path.relpath(tiny_petals)
    run = train_tiny(tmp_path, "--epochs", "1", "--batch-size", "8", data=rel, tiny=())
    config = tomllib.loads((run / paths.CONFIG).read_text())
    assert config["data"]["path"] == str(Path(tiny_petals).resolve())  # absolute, not as typed
    assert config["train"]["global_batch_size"] == 8 and config["train"]["steps_per_epoch"] == 8
    assert len(config["output"]["run_id"]) == 12
    plan = json.loads((run / paths.PLAN).read_text())["sessions"][0]
    assert plan["plan"]["backend"] == "tensorflow" and plan["plan"]["global_batch"] == 8
    assert {"python", "keras", "tensorflow"} <= set(plan["versions"])
    assert (run / paths.CLASSES).read_text() == (tiny_petals / "classes.txt").read_text()

    # Rerunning the saved config makes a new run (a fresh name and id), said in the log.
    assert main(["train", "--config", str(run / paths.CONFIG)]) == 0
    again = tomllib.loads((tmp_path / "r-2" / paths.CONFIG).read_text())
    assert again["output"]["name"] == "r-2"
    assert again["output"]["run_id"] != config["output"]["run_id"]


def test_an_interrupted_run_resumes_from_its_last_completed_epoch(tiny_petals, tmp_path, capsys):
    import keras

    from corolla import config, runtime, training

    class Stop(Exception):
        pass

    class StopAfterFirstEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                raise Stop  # as if the machine went away after one epoch

    cfg = config.load_config(overrides={"data.path": str(tiny_petals), "train.epochs": 2,
                                        "train.batch_size": 8, "output.runs_dir": str(tmp_path),
                                        "output.name": "r"})
    with pytest.raises(Stop):
        training.run(cfg, runtime.detect_for(cfg), log=lambda *a: None,
                     callbacks=[StopAfterFirstEpoch()])
    run = tmp_path / "r"
    assert (run / paths.BACKUP).is_dir() and not (run / paths.MODEL).exists()
    one_line_error(capsys, ["evaluate", str(run)], "did not finish", f"--resume {run}")
    one_line_error(capsys, ["train", "--resume", str(run), "--epochs", "5"],
                   "drop --epochs")
    one_line_error(capsys, ["train", "--resume", str(run), "--batch-size", "4"],
                   "drop --batch-size", "its own config and global batch")

    assert main(["train", "--resume", str(run)]) == 0
    assert epochs(run) == ["1", "2"]
    assert (run / paths.MODEL).is_file() and (run / paths.METRICS).is_file()
    assert not (run / paths.BACKUP).exists()
    one_line_error(capsys, ["train", "--resume", str(run)], "already finished")


def test_ctrl_c_says_how_to_continue(train_tiny, tmp_path, capsys, monkeypatch):
    from corolla.training import checkpoint

    saved = checkpoint.Checkpoint.on_epoch_end

    def interrupt(self, epoch, logs=None):
        saved(self, epoch, logs)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.Checkpoint, "on_epoch_end", interrupt)
    train_tiny(tmp_path, "--epochs", "2", code=130)
    assert capsys.readouterr().err.strip().endswith(
        f"interrupted; continue with: corolla train --resume {tmp_path / 'r'}")


@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_a_model_trained_at_a_smaller_input_size_evaluates_at_it(train_tiny, tmp_path):
    """--input-size 16 on 32 px data: the model is built at 16, the saved config says so, and
    evaluate and predict scale the data to it; a larger --input-size keeps the data's size."""
    import keras

    runs = tmp_path / "runs"
    run = train_tiny(runs, "--input-size", "16", name="small")
    config = tomllib.loads((run / paths.CONFIG).read_text())
    assert config["model"]["input_size"] == 16 and config["data"]["image_size"] == 32
    model = keras.saving.load_model(run / paths.MODEL, compile=False)
    assert model.input_shape == (None, 16, 16, 3)
    assert main(["evaluate", str(run)]) == 0
    assert json.loads((run / paths.METRICS).read_text())["split"] == "val"
    assert main(["predict", str(run), "--out", str(tmp_path / "sub.csv")]) == 0
    assert len((tmp_path / "sub.csv").read_text().splitlines()) == 1 + 20
    large = train_tiny(runs, "--input-size", "64", name="large")
    config = tomllib.loads((large / paths.CONFIG).read_text())
    assert config["model"]["input_size"] == 32  # at most the data's size


def test_a_cache_over_its_share_of_memory_is_left_out_with_a_line(train_tiny, tmp_path,
                                                                  monkeypatch, capsys):
    """The `cpu` recipe caches decoded images (a few thousand photos); a user's 100,000 would
    fill the host: over CACHE_SHARE of its memory the run decodes every epoch and says so."""
    fits, need, budget = pipeline.cache_fits(3712, 224)
    assert fits and abs(need - 0.5588) < 1e-4 and budget > 1  # the competition's val, 224 px
    monkeypatch.setattr(pipeline, "CACHE_SHARE", 1e-9)
    assert not pipeline.cache_fits(64, 32)[0]
    # Two sizes (progressive resizing: the first epoch at 16 px, the second at 32), two
    # streams: the line is said once, at the first.
    train_tiny(tmp_path, "--cache", "--epochs", "2", "--input-size", "32", "--start-size", "16",
               name=None)
    out = capsys.readouterr().out
    assert "at 16 px" in out and "at 32 px" in out
    assert "data.cache: the training images decoded at 16 px would take 0.0 GB, over 0% of " \
        "this host's memory" in out and "decoded every epoch instead" in out
    assert out.count("data.cache:") == 1


def test_train_checks_the_data_once_says_it_in_one_line_and_strict_refuses(tmp_path, cache,
                                                                           capsys, train_tiny):
    planted_folder(tmp_path / "photos")
    flags = ["--image-size", "16", "--steps-per-epoch", "1", "--batch-size", "4", "--model",
             "small_cnn"]
    train_tiny(tmp_path / "runs", *flags, "--strict", data=tmp_path / "photos", name="strict",
               code=2)
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "5 group(s) of duplicates span the splits" in error[0]
    assert not (tmp_path / "runs" / "strict").exists()
    run = train_tiny(tmp_path / "runs", *flags, data=tmp_path / "photos", name="warned")
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("data check:")]
    assert lines == [f"data check: 5 group(s) of duplicates across splits (2 val, 3 test "
                     f"image(s) with a copy in another split: scores on them are too good); "
                     f"list them: corolla check-data --data {tmp_path / 'photos'}"]
    assert json.loads((run / paths.DATA_CHECK).read_text())["duplicates"]["across_groups"] == 5
    report = (run / paths.REPORT).read_text()
    assert "<h2>Data check</h2>" in report and "test/same_pixels.bmp" in report
    assert len(list((cache / "checks").iterdir())) == 1  # checked once, for both commands


@pytest.fixture(scope="module")
def taken_over(train_tiny, tmp_path_factory) -> Path:
    """Runs of one step started in folders a kill -9 left between their mkdir and their
    config.toml: <runs>/empty (with --lr 0.003, whose derived rates a test reads too) and
    <runs>/locked (its lock file held by nobody). Built once for the session (each is a whole
    tiny training; the tests only read them)."""
    def build(runs):
        (runs / "empty").mkdir()
        (runs / "locked").mkdir()
        (runs / "locked" / paths.LOCK).write_text("process 1 on elsewhere")  # held by nobody
        train_tiny(runs, "--model", "small_cnn", "--steps-per-epoch", "1", "--lr", "0.003",
                   name="empty")
        train_tiny(runs, "--steps-per-epoch", "1", name="locked")

    return built_once(tmp_path_factory, "taken-over", build)


@pytest.mark.slow
def test_a_run_folder_killed_before_its_config_is_taken_over(train_tiny, taken_over, tmp_path):
    """kill -9 between the folder's mkdir and its config.toml: the same command starts the run
    in it, instead of 'already exists'. A folder holding anything else is still refused."""
    for name in ("empty", "locked"):
        assert (taken_over / name / paths.FINISHED).is_file()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("someone's")
    train_tiny(tmp_path, "--steps-per-epoch", "1", name="mine", code=2)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "someone's"


def test_derived_learning_rates_are_saved_as_the_decimals_they_are(taken_over):
    """config.toml said `start_learning_rate = 0.00030000000000000003` (a peak of 0.003 over
    10 in binary floating point). Rounded where it is derived, so a resume reads back what an
    uninterrupted run uses (`--model small_cnn --lr 0.003`: the module's `empty` run)."""
    saved = (taken_over / "empty" / paths.CONFIG).read_text()
    assert "\nstart_learning_rate = 0.0003\n" in saved, saved
    assert "\nmin_learning_rate = 3e-05\n" in saved, saved
