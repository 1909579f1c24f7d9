"""Two real processes on 127.0.0.1 run `corolla train` together: TensorFlow workers from
TF_CONFIG (MultiWorkerMirroredStrategy) and JAX processes from KERAS_DISTRIBUTION_*
(keras.distribution.initialize). Both must finish with identical weights, and only the chief
may write the run directory."""

import csv
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, free_ports

pytestmark = pytest.mark.slow
TIMEOUT = 300


def _cluster_env(backend: str, index: int, ports: list[int]) -> dict:
    addresses = [f"127.0.0.1:{p}" for p in ports]
    if backend == "tensorflow":
        return {"TF_CONFIG": json.dumps({"cluster": {"worker": addresses},
                                         "task": {"type": "worker", "index": index}})}
    return {"KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(addresses),
            "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": str(index)}


def _weights(path):
    code = ("import sys, numpy as np, corolla.runtime as r; r.detect(); import keras; "
            "import corolla.models.layers; m = keras.saving.load_model(sys.argv[1], "
            "compile=False); np.savez(sys.argv[2], *m.get_weights())")
    out = path.with_suffix(".npz")
    subprocess.run([sys.executable, "-c", code, str(path), str(out)], check=True,
                   capture_output=True, timeout=TIMEOUT, env={**os.environ,
                                                              "TF_CPP_MIN_LOG_LEVEL": "3"})
    with np.load(out) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def _run_workers(backend, tmp_path, args, expect=0):
    """Runs `python ARGS` as the 2 workers of a loopback cluster; returns their outputs."""
    ports = free_ports(2)
    procs = []
    for index in range(2):
        scratch = tmp_path / f"tmp{index}"  # each worker's private scratch (its own TMPDIR)
        scratch.mkdir(exist_ok=True)
        env = {**os.environ, **_cluster_env(backend, index, ports), "TMPDIR": str(scratch),
               "TF_CPP_MIN_LOG_LEVEL": "3"}
        env.pop("KERAS_BACKEND", None)  # the cluster variables alone choose the backend
        procs.append(subprocess.Popen([sys.executable, *map(str, args)], env=env, cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    try:
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outputs):
        assert p.returncode == expect, out[-3000:]
    return outputs


CRASH = Path(__file__).parent / "helpers" / "crash_train.py"


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_workers_train_in_step_and_resume_an_unnamed_run(backend, tiny_petals, tmp_path):
    """Two workers train together and only the chief writes the run; both die after epoch 0
    (as under SIGKILL); `--resume` without --name (the same command on both) continues every
    worker from epoch 1, from its own backup, found through the run's id; they end with
    identical weights and history.csv has each epoch once."""
    runs = tmp_path / "runs"
    crashed = _run_workers(backend, tmp_path, [CRASH, "epoch_end:0", "train", "--data",
                                               tiny_petals, "--epochs", 2,
                                               "--global-batch-size", 16, "--runs-dir", runs],
                           expect=3)
    assert all("CRASH after epoch 0" in out for out in crashed)
    strategy = "MultiWorkerMirroredStrategy" if backend == "tensorflow" else "DataParallel"
    assert f"on {strategy} (2 replica(s), global batch 16)" in crashed[0]
    [run] = list(runs.iterdir())  # only the chief made a run, named <model>-<timestamp>
    run_id = tomllib.loads((run / "config.toml").read_text())["output"]["run_id"]
    scratch = tmp_path / "tmp1" / f"corolla-{run_id}" / "worker-1"
    assert (scratch / "backup" / "state.json").is_file()
    assert oct(scratch.stat().st_mode & 0o777) == "0o700"
    assert not list((tmp_path / "tmp0").glob("corolla-*"))  # the chief's backup is the run's

    resumed = _run_workers(backend, tmp_path, [CRASH, "none", "train", "--resume", run])
    assert all("FIRST_EPOCH 1" in out for out in resumed), resumed
    assert "after epoch 1 of 2" in resumed[0]
    assert "done:" in resumed[0] and "done:" not in resumed[1]
    assert [p.name for p in runs.iterdir()] == [run.name]
    assert {"config.toml", "model.keras", "history.csv", "metrics.json", "submission.csv",
            "FINISHED"} <= {p.name for p in run.iterdir()}
    with (run / "history.csv").open() as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["1", "2"]
    chief, worker = _weights(run / "model.keras"), _weights(scratch / "model.keras")
    assert len(chief) == len(worker) > 0
    for a, b in zip(chief, worker):
        np.testing.assert_array_equal(a, b)
