"""A run stopped as job runners stop it: SIGTERM and SIGHUP stop `corolla train` as Ctrl-C does,
with the command that continues it; under `nohup` a closed terminal does not; `explain` stops
within seconds wherever the signal lands."""

import os
import signal
import subprocess
import sys
import time

import pytest

from corolla.runs import paths
from helpers.processes import REPO
from helpers.runs import backup_epochs


def _start_training(tiny_petals, run, start):
    """`corolla train` for 500 tiny epochs in a child process, `start` run in the child before
    Python (its inherited signal state); returns once its first epoch is backed up."""
    command = [sys.executable, "-m", "corolla", "train", "--data", str(tiny_petals),
               "--epochs", "500", "--batch-size", "8", "--runs-dir", str(run.parent),
               "--name", run.name]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                               # a crash's Python stacks in the failure's text
                                               "PYTHONFAULTHANDLER": "1"},
                               preexec_fn=start)
    deadline = time.monotonic() + 240
    while not (run / paths.BACKUP / paths.STATE).is_file():  # an epoch is done
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(process.communicate()[1])
        time.sleep(0.2)
    return process


def _stops_with_one_line(process, signum, run):
    try:
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signum, err
    assert err.strip().splitlines()[-1] == f"corolla: interrupted; continue with: corolla " \
    f"train --resume {run}"
    assert "Traceback" not in err
    assert (run / paths.BACKUP / paths.STATE).is_file() and not (run / paths.FINISHED).exists()


@pytest.mark.slow
# One handler takes both signals (cli's `signals.handled(("SIGTERM", "SIGHUP"), ...)`): SIGTERM's
# run holds it in the README's suite, SIGHUP's (another training process) in CI's large step.
@pytest.mark.parametrize("signum", [signal.SIGTERM,
                                    pytest.param(signal.SIGHUP, marks=pytest.mark.large)])
def test_sigterm_and_sighup_stop_a_run_as_ctrl_c_does(tiny_petals, tmp_path, signum):
    """`docker stop`, Kubernetes and Slurm send SIGTERM: one line with the command that
    continues the run, exit 128 + the signal, and the run continues from its backup. Started
    with both signals blocked, as some job runners start their jobs (CI once did, and the run
    trained all 500 epochs through the signal): the run unblocks what it handles. Their
    handlers start as the system's defaults whatever this process inherited (under `nohup`
    SIGHUP is ignored, and an ignored SIGHUP is kept: see the next test)."""
    def blocked():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})

    run = tmp_path / "r"
    _stops_with_one_line(_start_training(tiny_petals, run, blocked), signum, run)


@pytest.mark.slow
def test_under_nohup_a_closed_terminal_does_not_stop_the_run(tiny_petals, tmp_path):
    """`nohup corolla train ...` starts the run with SIGHUP ignored: it must outlive its
    terminal (it once took SIGHUP over and stopped); SIGTERM still stops it."""
    def nohup():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGHUP})

    run = tmp_path / "r"
    process = _start_training(tiny_petals, run, nohup)
    process.send_signal(signal.SIGHUP)
    after = backup_epochs(run) + 2  # an epoch begun after the signal is done
    deadline = time.monotonic() + 120
    try:
        while backup_epochs(run) < after:
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.2)
    except BaseException:
        process.kill()
        raise
    _stops_with_one_line(process, signal.SIGTERM, run)


@pytest.mark.large
def test_explain_stops_on_sigterm_wherever_it_lands(tiny_run, tmp_path):
    """A long explain signalled at several points of its work: each ends within seconds as
    `corolla: interrupted`, exit 143, no traceback."""
    import numpy as np
    from PIL import Image

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for k in range(400):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            photos / f"{k}.png")
    for k, delay in enumerate((0.0, 0.35, 1.1, 2.3)):
        command = [sys.executable, "-m", "corolla", "explain", str(tiny_run), str(photos),
                   "--out", str(tmp_path / f"explained-{k}")]
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        try:
            process.stdout.readline()  # the first picture is written: the work is under way
            time.sleep(delay)
            process.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert time.monotonic() - sent < 30
        assert process.returncode == 128 + signal.SIGTERM, err
        assert err.strip().splitlines()[-1] == "corolla: interrupted", err
        assert "Traceback" not in err and "Exception ignored" not in err, err
