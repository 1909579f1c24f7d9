"""benchmarks/cpu_backends.py runs (it trained on integer labels against the one-hot loss of
`compile_model` and failed at its first step, unnoticed): each variant trains and is timed,
float32 and mixed_bfloat16 side by side."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers.processes import REPO

SCRIPT = REPO / "benchmarks" / "cpu_backends.py"


@pytest.mark.large  # 24 s (a benchmark trains in a subprocess): CI's large step, as the others
def test_tiny_run_times_float32_and_bfloat16_side_by_side(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--model", "small_cnn", "--size", "32",
                          "--batch", "4", "--steps", "2", "--variants",
                          "tensorflow,tensorflow+bf16"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "failed" not in out.stdout, out.stdout
    speeds = dict(re.findall(r"^(\S+) +([\d.]+) images/s", out.stdout, re.MULTILINE))
    assert set(speeds) == {"tensorflow", "tensorflow+bf16"}, out.stdout
    assert all(float(v) > 0 for v in speeds.values())
    assert re.search(r"tensorflow\+bf16 trains at [\d.]+x tensorflow's speed", out.stdout)
    assert "small_cnn at 32px, batch 4" in out.stdout
