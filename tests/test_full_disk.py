"""A disk that fills while a run trains (issue 19): the command ends with its one-line error
and exit 2 (not h5py's "Exception ignored" traceback and a crash at exit, as when the
half-written HDF5 backup was left open), and once there is space the same command finishes
the run."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

CRASH = Path(__file__).parent / "helpers" / "crash_train.py"
FULL = ("No space left on device); free space or fix the folder's permissions, then run the "
        "command again")


def _run(*args, log_level=None):
    """`log_level`: TF_CPP_MIN_LOG_LEVEL; by default unset, so that the command keeps
    TensorFlow's start-up lines off stderr as it does for a user."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if log_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = log_level
    return subprocess.run([sys.executable, *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=env)


def _command(data, runs):
    return ["train", "--data", data, "--epochs", 2, "--steps-per-epoch", 2, "--batch-size", 8,
            "--runs-dir", runs, "--name", "r"]


def _assert_one_line(result, written, stderr=None):
    stderr = result.stderr if stderr is None else stderr
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Exception ignored" not in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.splitlines() == [f"corolla: error: could not write {written} ({FULL}"]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full to fill a disk with")
def test_a_disk_that_fills_during_the_backup_is_one_line_and_the_run_resumes(tiny_petals,
                                                                             tmp_path):
    """No mount needed: HDF5's writes of epoch 1's backup go to /dev/full from its first
    large array on (`crash_train`, which imports TensorFlow before the command can keep its
    start-up lines off stderr: those are dropped here as the command drops them)."""
    from corolla.runtime import tflog

    command = _command(tiny_petals, tmp_path)
    run = tmp_path / "r"
    full = _run(CRASH, "full:1", *command, log_level="3")
    assert "DISK FULL" in full.stdout, full.stderr[-3000:]
    _assert_one_line(full, run / "backup" / "epoch-0001.weights.h5",
                     tflog.drop_noise(full.stderr.encode()).decode())
    assert json.loads((run / "backup" / "state.json").read_text())["epochs_done"] == 1
    assert not [p.name for p in run.rglob("*.partial*")]

    again = _run(CRASH, "none", *command, log_level="3")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "FIRST_EPOCH 1" in again.stdout and (run / "FINISHED").is_file()


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs (as root, where mounting is allowed), unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_full_tmpfs_as_runs_dir_is_one_line_and_the_run_finishes_once_freed(tiny_petals,
                                                                              small_disk):
    """The real thing: `corolla train` onto 3 MB, where epoch 0's backup (about 5 MB with the
    optimizer's state) does not fit; then the disk grows and the same command finishes."""
    command = _command(tiny_petals, small_disk)
    full = _run("-m", "corolla", *command)
    _assert_one_line(full, small_disk / "r" / "backup" / "epoch-0000.weights.h5")
    assert not [p.name for p in (small_disk / "r").rglob("*.partial*")]

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    again = _run("-m", "corolla", *command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (small_disk / "r" / "FINISHED").is_file()
