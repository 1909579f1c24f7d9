"""Multi-replica training on one machine, for real: the CPU split into several devices."""

import json
from pathlib import Path

import numpy as np
import pytest

from corolla.runs import paths
from helpers.processes import REPO, SCRIPTS, run_python

HELPER = SCRIPTS / "replicas.py"
pytestmark = pytest.mark.slow


def _run(*args, timeout=300):
    code = f"import runpy, sys; sys.argv = {[str(HELPER), *map(str, args)]!r}; " \
           f"runpy.run_path({str(HELPER)!r}, run_name='__main__')"
    result = run_python(code, timeout=timeout, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [s for s in result.stdout.splitlines() if s.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.mark.large  # 33 s: MirroredStrategy on the split CPU is in the README's suite below
def test_tensorflow_split_cpu_trains_with_mirrored_strategy(tiny_petals, tmp_path):
    out = _run("tensorflow", 2, "train", tiny_petals, tmp_path)
    assert (out["strategy"], out["replicas"]) == ("MirroredStrategy", 2)
    assert (out["global_batch"], out["batch_per_replica"]) == (16, 8)
    run = Path(out["run_dir"])
    assert (run / paths.MODEL).is_file() and (run / paths.SUBMISSION).is_file()


@pytest.mark.large  # 37s: CI's large step (the README's suite keeps to 20 min)
def test_jax_on_four_devices_trains_on_splits_the_global_batch_does_not_divide(tiny_petals,
                                                                               tmp_path):
    """Global batch 12 over 4 devices: val (32) and test (20) leave partial batches, which
    Keras' JAX data-parallel path cannot split; validation uses full batches, inference pads."""
    out = _run("jax", 4, "train", tiny_petals, tmp_path, 12)
    assert (out["strategy"], out["replicas"], out["global_batch"]) == ("DataParallel", 4, 12)
    run = Path(out["run_dir"])
    assert (run / paths.MODEL).is_file() and (run / paths.SUBMISSION).is_file()
    metrics = json.loads((run / paths.METRICS).read_text())
    assert metrics["num_examples"] == 32  # every val image scored, not 24 of them
    assert len((run / paths.SUBMISSION).read_text().splitlines()) == 1 + 20


# Summation order differs between one device and an all-reduce over several: float32 noise.
TOLERANCE = dict(rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend, expected", [("tensorflow", "MirroredStrategy"),
                                               ("jax", "DataParallel")])
def test_four_replicas_match_one_at_the_same_global_batch(backend, expected):
    """The same model, seed and data trained on one device and over four (in one process: the
    CPU split into four, the first plan left to one of them) end with the same losses and
    weights."""
    out = _run(backend, 4, "equivalence")
    one, four = out["one"], out["all"]
    assert (four["strategy"], four["replicas"], four["batch_per_replica"]) == (expected, 4, 4)
    assert one["replicas"] == 1 and one["batch_per_replica"] == 16
    np.testing.assert_allclose(four["losses"], one["losses"], **TOLERANCE)
    for a, b in zip(four["weights"], one["weights"]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **TOLERANCE)


def test_global_batch_not_divisible_by_the_replicas_is_one_line():
    code = ("import sys, tensorflow as tf; cpu = tf.config.list_physical_devices('CPU')[0]; "
            "tf.config.set_logical_device_configuration(cpu, "
            "[tf.config.LogicalDeviceConfiguration()] * 4); from corolla.cli import main; "
            "sys.exit(main(['info', '--global-batch-size', '30']))")
    result = run_python(code, env={"KERAS_BACKEND": "tensorflow"}, cwd=REPO)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("corolla")]
    assert errors == ["corolla: error: global batch size (30) must be divisible by the number "
                      "of replicas (4); use a multiple of 4"]
