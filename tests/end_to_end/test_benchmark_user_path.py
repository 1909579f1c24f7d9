"""benchmarks/user_path.py as CI runs it: `--tiny` on the CPU on JAX, every command of the
user's path through, the second evaluate finding the programs the first process compiled, the
throughput row with the parts of its step each timed alone and a second process's first step
(timm's rows only where torch and timm are importable)."""

import json
import os
import subprocess
import sys

import pytest

from helpers.processes import REPO

SCRIPT = REPO / "benchmarks" / "user_path.py"


@pytest.mark.slow
@pytest.mark.large  # about a minute on a 2-core host: CI's large step runs it
def test_tiny_user_path_on_cpu(tmp_path):
    # Corolla's own setting keeps every program, the quick ones of eager code too (JAX's default
    # keeps only those of 1 s or more, which none of these tiny ones takes).
    env = {k: v for k, v in os.environ.items()
           if k != "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"}
    out = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--backend", "jax", "--json",
                          str(tmp_path / "path.json")], capture_output=True, text=True,
                         timeout=900, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "path.json").read_text())
    assert list(report["commands"]) == ["train", "evaluate", "evaluate again", "predict photos",
                                        "export onnx"]
    assert all(row["seconds"] > 0 for row in report["commands"].values())
    # JAX's own events: the second evaluate, in a new process, loads every program it needs.
    first = report["commands"]["evaluate"]["cache_events"]
    again = report["commands"]["evaluate again"]["cache_events"]
    assert first["programs"] > 0 and again["hits"] == again["programs"] == first["programs"]
    assert report["commands"]["train"]["cache_events"]["programs"] > 0
    rows = report["throughput"]
    assert [row["name"].strip() for row in rows[:6]] == [
        "Corolla (jax, float32)", "fit, batch already on the device",
        "host-to-device copy alone", "pipeline alone, no model", "fit through the pipeline",
        "Corolla (jax, float32), a second process"]
    assert all(row["images_per_second"] > 0 for row in rows[:5])
    assert rows[0]["first_step_seconds"] > 0 and rows[5]["first_step_seconds"] > 0
    assert "USER_PATH " in out.stdout and "train step" in out.stdout
