"""A disk that fills while a run trains: the command ends with its one-line error and exit 2
(not h5py's "Exception ignored" traceback and a crash at exit, as when the half-written HDF5
backup was left open), and once there is space the same command finishes the run. Also
read-only and full disks under the other commands' outputs."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from corolla.cli import main
from corolla.runs import paths
from helpers.cli import one_line
from helpers.images import class_folders
from helpers.processes import REPO, SCRIPTS


CRASH = SCRIPTS / "crash_train.py"
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


@pytest.mark.large  # 28s: CI's large step (the README's suite keeps to 20 min)
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full to fill a disk with")
def test_a_disk_that_fills_during_the_backup_is_one_line_and_the_run_resumes(tiny_petals,
                                                                             tmp_path):
    """No mount needed: epoch 1's backup is written to /dev/full (`crash_train`, which imports
    TensorFlow before the command can keep its start-up lines off stderr: those are dropped
    here as the command drops them)."""
    from corolla.runtime import tflog

    command = _command(tiny_petals, tmp_path)
    run = tmp_path / "r"
    full = _run(CRASH, "full:1", *command, log_level="3")
    assert "DISK FULL" in full.stdout, full.stderr[-3000:]
    _assert_one_line(full, run / paths.BACKUP / "epoch-0001.npz",
                     tflog.drop_noise(full.stderr.encode()).decode())
    assert json.loads((run / paths.BACKUP / paths.STATE).read_text())["epochs_done"] == 1
    assert not [p.name for p in run.rglob("*.partial*")]

    again = _run(CRASH, "none", *command, log_level="3")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "FIRST_EPOCH 1" in again.stdout and (run / paths.FINISHED).is_file()


@pytest.fixture
def small_disk(tmp_path):
    """Mounts a tmpfs of the size given (as root, where mounting is allowed); unmounted
    afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()

    def mount(size):
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("mounting a small tmpfs needs root")
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                  str(disk)], capture_output=True, text=True)
        if mounted.returncode:
            pytest.skip(f"cannot mount a small tmpfs: {mounted.stderr.strip()}")
        return disk

    yield mount
    if os.path.ismount(disk) and subprocess.run(["umount", str(disk)],
                                                capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_a_full_tmpfs_as_runs_dir_is_one_line_and_the_run_finishes_once_freed(tiny_petals,
                                                                              small_disk):
    """The real thing: `corolla train` onto 3 MB, where epoch 0's backup (about 5 MB with the
    optimizer's state) does not fit; then the disk grows and the same command finishes."""
    small_disk = small_disk("3m")
    command = _command(tiny_petals, small_disk)
    full = _run("-m", "corolla", *command)
    _assert_one_line(full, small_disk / "r" / paths.BACKUP / "epoch-0000.npz")
    assert not [p.name for p in (small_disk / "r").rglob("*.partial*")]

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    again = _run("-m", "corolla", *command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (small_disk / "r" / paths.FINISHED).is_file()


@pytest.mark.large  # 30 s: CI's large step (the README's suite keeps to 20 min)
def test_a_disk_with_room_only_to_create_the_backup_is_one_line_too(tiny_petals, small_disk):
    """8 KiB free when epoch 1's backup begins (`crash_train` fills a 32 MB tmpfs): HDF5 could
    create the file and then failed closing its first objects, which crashed the process even
    with the file closed after the error. The backup is now refused before it is written."""
    from corolla.runtime import tflog

    disk = small_disk("32m")
    command = _command(tiny_petals, disk)
    full = _run(CRASH, "fill:1", *command, log_level="3")
    assert "DISK FULL (8192 bytes free)" in full.stdout, full.stderr[-3000:]
    _assert_one_line(full, disk / "r" / paths.BACKUP / "epoch-0001.npz",
                     tflog.drop_noise(full.stderr.encode()).decode())
    assert not [p.name for p in (disk / "r").rglob("*.partial*")]

    (disk / "filler").unlink()
    again = _run(CRASH, "none", *command, log_level="3")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "FIRST_EPOCH 1" in again.stdout and (disk / "r" / paths.FINISHED).is_file()


def test_the_backup_is_refused_unwritten_where_the_disk_has_not_room_for_it(tmp_path,
                                                                            monkeypatch):
    """No mount needed: the free space is what the system is made to say."""
    import keras
    import numpy as np

    from corolla.errors import UserError
    from corolla.training import backup, checkpoint

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(300), keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.zeros((4, 8)), np.zeros((4, 3)), verbose=0)
    backup.save_backup(model, tmp_path / "m.npz")
    size, needed = (tmp_path / "m.npz").stat().st_size, backup.weights_size(model)
    assert size < needed < size + (2 << 20)

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=needed - 1))
    callback = checkpoint.Checkpoint(tmp_path / paths.BACKUP, backup.BackupState())
    callback.set_model(model)
    with pytest.raises(UserError, match=r"could not write .*epoch-0000.npz \(No space "
                                        r"left on device\); free space"):
        callback.on_epoch_end(0, {"loss": 1.0})
    assert list((tmp_path / paths.BACKUP).iterdir()) == []


@pytest.fixture
def mounted(tmp_path):
    """A small tmpfs at tmp_path/disk (root and mount(8) needed, as in CI), and a function to
    make it read-only."""
    disk = tmp_path / "disk"
    disk.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(disk)],
                            capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")

    def read_only():
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

    yield disk, read_only
    subprocess.run(["umount", str(disk)], check=False)


def test_read_only_or_wrong_kind_outputs_are_one_line(tiny_run, mounted, tmp_path, capsys,
                                                      monkeypatch):
    disk, read_only = mounted
    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path / "cache"))
    run = shutil.copytree(tiny_run, disk / "t", ignore=shutil.ignore_patterns("*.keras", "*.png",
                                                                            paths.LOGS, "*.html"))
    src = class_folders(tmp_path / "src")
    read_only()
    one_line(capsys, main(["report", str(run)]), f"could not write {run / paths.REPORT}",
             "Read-only file system")
    train = ["train", "--data", str(src), "--image-size", "8", "--batch-size", "2"]
    one_line(capsys, main([*train, "--runs-dir", str(disk / "runs")]),
             "cannot create a run directory", "Read-only file system")
    one_line(capsys, main(["convert", str(src), str(disk / "out")]),
             "cannot write the conversion into", "Read-only file system")
    (tmp_path / "file").write_text("")
    one_line(capsys, main([*train, "--runs-dir", str(tmp_path / "file")]),
             "is a file, not a folder")


def test_a_full_disk_during_convert_is_one_line(mounted, tmp_path, capsys):
    disk, _ = mounted
    src = class_folders(tmp_path / "src", n=20, size=96, noise=True)  # ~1 MB of JPEG, on 96 kB
    one_line(capsys, main(["convert", str(src), str(disk / "out"), "--image-size", "96"]),
             "cannot write the conversion into", "free space")
    assert not list(disk.iterdir())  # nothing half-written is left


def test_a_file_size_limit_during_convert_is_one_line(tmp_path):
    """`ulimit -f` (RLIMIT_FSIZE) set for the command: TensorFlow's record writer fails with
    EFBIG (an OutOfRangeError of its own), a disk that refuses the file: one line, exit 2."""
    src = class_folders(tmp_path / "src", n=20, size=96, noise=True)  # ~1 MB of PNG
    out = tmp_path / "out"
    limited = ("import resource, signal, sys\n"
               "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
               "resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))\n"
               "from corolla.cli import main\n"
               "sys.exit(main(sys.argv[1:]))\n")
    result = _run("-c", limited, "convert", src, out, "--image-size", "96", log_level="3")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.splitlines()[-1].startswith(
        f"corolla: error: cannot write the conversion into {tmp_path} (File too large); "), \
        result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # nothing half-written left


def test_a_read_only_check_cache_is_said_first_and_the_check_done(tiny_petals, mounted,
                                                                 monkeypatch, capsys):
    """A read-only COROLLA_CACHE_DIR/checks: check-data decoded every image, then ended in
    exit 2 as it could not keep the result. The check stands; only it is not kept."""
    disk, read_only = mounted
    (disk / "checks").mkdir()
    read_only()
    monkeypatch.setenv("COROLLA_CACHE_DIR", str(disk))
    assert main(["check-data", "--data", str(tiny_petals)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == (f"data check: not cached (cannot write into {disk / 'checks'} "
                        f"(permission denied); make it writable); it reads the data again "
                        f"next time"), captured
    assert any("116 images" in line for line in lines), captured.out
    assert list((disk / "checks").iterdir()) == []
