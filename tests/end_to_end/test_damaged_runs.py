"""Runs with something damaged or missing: a damaged model or record is one line naming the way
out; the advised --skip-bad-records continues a run; a folder run without a test split says how to
add one."""

import json
import shutil

import pytest

from corolla.cli import main
from corolla.runs import paths
from helpers.cli import one_line, one_line_error
from helpers.images import class_folders
from helpers.processes import crash_train


@pytest.mark.slow
def test_a_damaged_model_is_one_line_naming_the_way_out(tiny_run_copy, capsys):
    run = tiny_run_copy
    capsys.readouterr()
    data = (run / paths.MODEL).read_bytes()
    (run / paths.MODEL).write_bytes(data[: len(data) // 2])  # a copy cut short
    one_line(capsys, main(["evaluate", str(run)]), f"{run / paths.MODEL} is damaged",
             f"copy {run / paths.LAST}")


@pytest.mark.slow
def test_damaged_records_of_a_run_are_one_line_naming_the_file(tiny_run_copy, capsys):
    from corolla.errors import UserError
    from corolla.runs import rundir

    run = tiny_run_copy
    capsys.readouterr()
    (run / paths.METRICS).write_text('{"f1_macro": 0.5,')  # cut short
    one_line(capsys, main(["report", str(run)]), f"{run / paths.METRICS} is damaged",
             f"corolla evaluate {run}")
    (run / paths.HISTORY).write_text("epoch,loss\n0,0.5\n1,not a number\n")
    one_line(capsys, main(["evaluate", str(run)]), f"{run / paths.HISTORY} is damaged")
    (run / paths.PLAN).write_text("{")  # what a resumed session adds to
    with pytest.raises(UserError, match=r"plan.json is damaged .* move it away"):
        rundir.record_session(run, plan=None)


@pytest.mark.slow
def test_a_resumed_state_naming_a_file_outside_the_run_deletes_nothing(tiny_run_copy, capsys):
    """state.json's best epoch file is deleted when an epoch beats best_f1: one naming a file
    elsewhere, with a best_f1 any epoch beats, had `train --resume` delete that file."""
    run = tiny_run_copy
    for done in (paths.FINISHED, paths.MODEL):
        (run / done).unlink()  # back in training, as a killed run is
    victim = run.parent / "victim.txt"
    victim.write_text("the user's")
    (run / paths.BACKUP).mkdir()
    (run / paths.BACKUP / paths.STATE).write_text(json.dumps(
        {"epochs_done": 0, "weights": None, "history": [], "best_epoch": None,
         "best_f1": 0.0, "best": str(victim)}))
    capsys.readouterr()
    one_line_error(capsys, ["train", "--resume", str(run)], str(run / paths.BACKUP / paths.STATE),
                   "move the backup folder away")
    assert victim.read_text() == "the user's"


@pytest.mark.large  # 33s: CI's large step (the README's suite keeps to 20 min)
def test_the_advised_skip_bad_records_continues_a_run(tiny_petals, tmp_path, capsys):
    """A damaged record met mid-training advises --skip-bad-records: both ways of continuing the
    run take it (and keep it for evaluate and predict); other settings are still refused."""
    from corolla import config

    command = ["train", "--data", str(tiny_petals), "--epochs", "2", "--batch-size", "16",
               "--runs-dir", str(tmp_path), "--name", "r"]
    for how in (["train", "--resume", str(tmp_path / "r")], command):
        shutil.rmtree(tmp_path / "r", ignore_errors=True)
        died = crash_train("mid_epoch:0", *command)
        assert died.returncode == 3, died.stderr[-2000:]
        assert main([*how, "--epochs", "3"]) == 2
        assert "--epochs" in capsys.readouterr().err
        assert main([*how, "--skip-bad-records"]) == 0
        assert config.load_config(tmp_path / "r" / paths.CONFIG).data.skip_bad_records
        assert (tmp_path / "r" / paths.FINISHED).is_file()


@pytest.mark.slow
def test_predict_of_a_folder_run_without_test_split_says_how_to_add_one(tmp_path, capsys,
                                                                        cache, train_tiny):
    src = class_folders(tmp_path / "src")
    run = train_tiny(tmp_path / "runs", "--image-size", "8", "--batch-size", "2",
                     "--steps-per-epoch", "1", data=src)
    capsys.readouterr()
    one_line(capsys, main(["predict", str(run)]),
             f"the data {src} has no test split", "test/ folder")
