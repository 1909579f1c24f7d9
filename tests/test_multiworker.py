"""Two real processes on 127.0.0.1 run `corolla train` together: TensorFlow workers from
TF_CONFIG (MultiWorkerMirroredStrategy) and JAX processes from KERAS_DISTRIBUTION_*
(keras.distribution.initialize). Both must finish with identical weights, and only the chief
may write the run directory."""

import json
import os
import subprocess
import sys

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


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_workers_train_identically_and_only_the_chief_writes(backend, tiny_petals,
                                                                 tmp_path):
    ports = free_ports(2)
    runs = tmp_path / "runs"
    procs = []
    for index in range(2):
        scratch = tmp_path / f"tmp{index}"  # each worker's private scratch (its own TMPDIR)
        scratch.mkdir()
        env = {**os.environ, **_cluster_env(backend, index, ports), "TMPDIR": str(scratch),
               "TF_CPP_MIN_LOG_LEVEL": "3"}
        env.pop("KERAS_BACKEND", None)  # the cluster variables alone choose the backend
        cmd = [sys.executable, "-m", "corolla", "train", "--data", str(tiny_petals),
               "--epochs", "2", "--global-batch-size", "16", "--runs-dir", str(runs),
               "--name", "run"]
        procs.append(subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]
    strategy = "MultiWorkerMirroredStrategy" if backend == "tensorflow" else "DataParallel"
    assert f"on {strategy} (2 replica(s), global batch 16)" in outputs[0]

    # Only the chief wrote a run; the other worker's model went to its private scratch.
    assert [p.name for p in runs.iterdir()] == ["run"]
    run = runs / "run"
    assert {"config.toml", "model.keras", "history.csv", "metrics.json",
            "submission.csv"} <= {p.name for p in run.iterdir()}
    assert "done:" in outputs[0] and "done:" not in outputs[1]
    worker_models = list((tmp_path / "tmp1").glob("corolla-run/worker-1/model.keras"))
    assert len(worker_models) == 1 and not list((tmp_path / "tmp0").glob("corolla-*"))

    chief, worker = _weights(run / "model.keras"), _weights(worker_models[0])
    assert len(chief) == len(worker) > 0
    for a, b in zip(chief, worker):
        np.testing.assert_array_equal(a, b)
