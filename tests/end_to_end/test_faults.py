"""Kills at every moment of a run, and what follows: re-running (`--resume`, or the same named
command) always continues from the last completed step and ends in a complete, correct run.
Also: one writer per run, and a loss that turns NaN stops the run with its last good backup."""

import os
import socket
import subprocess
import sys

import pytest

from corolla.runs import paths
from helpers.processes import crash_train
from helpers.runs import backup_epochs, epochs


@pytest.mark.slow
# Both passes (~170 s each on a slow 2-core host) run in CI's large step: the README's suite
# keeps to 20 min.
@pytest.mark.large
@pytest.mark.parametrize("stop", ["kill", "TERM"])
def test_a_run_killed_at_every_point_is_finished_by_re_running_it(tiny_petals, tmp_path, stop):
    """One run of 2 epochs, killed again and again (kill -9, or SIGTERM as `docker stop` and
    Kubernetes send it), each time one step further, alternately continued with --resume and
    with the same named command."""
    command = ["train", "--data", tiny_petals, "--epochs", 2, "--batch-size", 16,
               "--runs-dir", tmp_path, "--name", "r"]
    run = tmp_path / "r"
    resume = ["train", "--resume", run]
    # (where it dies, how it is restarted, then: epochs in the backup, epochs in history.csv)
    steps = [
        ("folder", command, None, []),  # an unstarted folder: the same command takes it over
        ("mid_epoch:0", command, None, []),
        ("backup:0", command, None, []),  # epoch 0's weights written, not yet in place
        ("history:0", resume, 1, []),  # state.json says 1 epoch; history.csv not yet written
        ("mid_epoch:1", command, 1, ["1"]),  # the resume rewrote the history first
        ("epoch_end:1", resume, 2, ["1", "2"]),  # after the last epoch, before the model
        ("save", command, 2, ["1", "2"]),  # model.keras written under its temporary name
        ("evaluate", resume, None, ["1", "2"]),  # trained: the backup is gone
        ("predict", command, None, ["1", "2"]),
    ]
    for point, how, in_backup, in_history in steps:
        result = crash_train(point, *how, env={"CRASH_SIGNAL": "" if stop == "kill" else stop})
        assert "CRASH" in result.stdout, (point, result.stderr[-2000:])
        if stop == "kill":
            assert result.returncode == 3, (point, result.stderr[-2000:])
        else:  # one line, saying how to continue (a folder with no config: the same command)
            hint = "" if point == "folder" else f"; continue with: corolla train --resume {run}"
            assert result.returncode == 143, (point, result.stderr[-2000:])
            assert result.stderr.strip().splitlines()[-1] == f"corolla: interrupted{hint}", \
                (point, result.stderr[-2000:])
            assert "Traceback" not in result.stderr, (point, result.stderr[-2000:])
        assert not (run / paths.FINISHED).exists(), point
        assert backup_epochs(run) == in_backup, point
        assert epochs(run) == in_history, point
        assert (run / paths.MODEL).is_file() == (point in ("evaluate", "predict")), point
    assert (run / paths.METRICS).is_file() and not (run / paths.SUBMISSION).exists()

    result = crash_train("none", *resume)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "evaluating and predicting" in result.stdout
    assert (run / paths.FINISHED).is_file() and not (run / paths.BACKUP).exists()
    assert epochs(run) == ["1", "2"]
    assert len((run / paths.SUBMISSION).read_text().splitlines()) == 1 + 20
    assert not [p.name for p in run.rglob("*.partial*")]  # no half-written file left behind

    for how in (resume, command):  # a finished run is never trained again
        again = crash_train("none", *how)
        assert again.returncode == 2 and "already" in again.stderr, again.stderr[-2000:]


def test_the_same_name_with_other_settings_is_refused(tiny_petals, tmp_path, capsys):
    from corolla.cli import main
    from corolla import config

    run = tmp_path / "r"
    run.mkdir()
    config.save_config(config.load_config(overrides={
        "data.path": str(tiny_petals), "train.epochs": 2, "output.name": "r"}), run / paths.CONFIG)
    code = main(["train", "--data", str(tiny_petals), "--epochs", "3", "--runs-dir",
                 str(tmp_path), "--name", "r"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "exists with other settings: --epochs 3 (the run has 2)" in err[0]


def crashed_pid(result):
    return int(result.stdout.split("(PID ")[1].split(")")[0])


@pytest.mark.slow  # a training killed in a fresh process, then resumed twice
def test_one_writer_per_run(tiny_petals, tmp_path, capsys):
    from corolla.runs import rundir
    from corolla.cli import main

    command = ["train", "--data", str(tiny_petals), "--epochs", "1", "--batch-size", "16",
               "--runs-dir", str(tmp_path), "--name", "r"]
    # A run left by a process that died: its lock file names it, but nobody holds it.
    run = tmp_path / "r"
    crashed = crash_train("mid_epoch:0", *command)
    assert crashed.returncode == 3
    assert (run / paths.LOCK).read_text().startswith("process ")
    # Another process holds the run: a second writer is refused in one line.
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from corolla.runs import rundir; rundir.claim(sys.argv[1]); "
        "print('held', flush=True); time.sleep(60)"), str(run)], stdout=subprocess.PIPE,
        text=True)
    try:
        lines = [holder.stdout.readline().strip() for _ in range(2)]
        assert lines == [f"taking over .lock from process {crashed_pid(crashed)} on "
                         f"{socket.gethostname()}, which is no longer running", "held"]
        assert main(["train", "--resume", str(run)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"is being written by process {holder.pid}" in err[0]
    finally:
        holder.kill()
        holder.wait()
    # Its holder gone, the lock is taken over (said in the log) and the run finishes.
    assert main(["train", "--resume", str(run)]) == 0
    assert f"taking over .lock from process {holder.pid}" in capsys.readouterr().out
    assert rundir.status(run) == rundir.FINISHED_STATUS


def test_a_loss_that_becomes_nan_stops_the_run_keeping_its_backup(train_tiny, tmp_path,
                                                                  capsys, monkeypatch):
    from corolla.training import checkpoint

    saved = checkpoint.Checkpoint.on_epoch_end

    def nan_in_epoch_1(self, epoch, logs=None):
        saved(self, epoch, {**logs, "loss": float("nan")} if epoch == 1 else logs)

    monkeypatch.setattr(checkpoint.Checkpoint, "on_epoch_end", nan_in_epoch_1)
    run = train_tiny(tmp_path, "--epochs", "3", code=2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "the training loss became nan in epoch 2" in err[0]
    assert "the backup of epoch 1 is kept" in err[0] and "lower --lr" in err[0]
    assert backup_epochs(run) == 1 and epochs(run) == ["1"]


def test_a_write_that_fails_keeps_the_old_file_and_says_why(tmp_path, monkeypatch):
    import errno

    from corolla import files
    from corolla.errors import UserError

    target = files.write_text_atomic(tmp_path / "state.json", "old")

    def full_disk(path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "_fsync", full_disk)
    with pytest.raises(UserError, match=r"could not write .*state.json \(No space left on "
                                        r"device\); free space"):
        files.write_text_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
