"""benchmarks/accelerator_check.py as CI runs it: `--tiny` on the CPU, every section through,
its figures sane and its checks as expected (one compile per size, none per epoch, a
bit-identical repeat under --deterministic)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from helpers.processes import REPO

SCRIPT = REPO / "benchmarks" / "accelerator_check.py"
SECTIONS = ("detection", "versions", "compiles", "train", "checkpoint", "predict", "determinism")


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow
@pytest.mark.large  # over 30 s on a slow 2-core host: CI's large step runs it
def test_tiny_run_on_cpu(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--strict", "--json",
                          str(tmp_path / "check.json")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    for section in SECTIONS:
        assert any(line.startswith(section + " ") for line in lines), (section, out.stdout)
    report = json.loads((tmp_path / "check.json").read_text())
    line = [s for s in lines if s.startswith("ACCEL_CHECK ")]
    assert json.loads(line[-1][len("ACCEL_CHECK "):])["checks"] == report["checks"]

    assert report["plan"]["accelerator"] == "cpu"
    assert report["args"]["model"] == "small_cnn" and report["args"]["size"] == 32
    # One program per input size, none in later epochs, none when the pipeline's batches
    # (same shape and dtype) replace the in-memory ones.
    compiles = report["compiles"]
    assert compiles["small"]["programs"] == [1, 0]
    assert compiles["memory"]["programs"] == [1, 0, 0]
    assert not any(compiles["pipeline"]["traces"])
    assert compiles["small"]["signatures"][0].startswith("8x24x24x3 uint8")
    for name in ("memory", "pipeline"):
        r = report["train"][name]
        assert all(_positive(r[k]) for k in ("images_per_second", "min", "max"))
        assert r["min"] <= r["images_per_second"] <= r["max"]
    ck = report["checkpoint"]
    assert all(_positive(v) for v in ck.values())
    assert ck["save_bytes"] > 4 * 389_856  # small_cnn's backbone, float32
    assert ck["backup_bytes"] > 4 * 389_856 and ck["load_backup_seconds"] > 0
    pr = report["predict"]
    for dtype, size in (("uint8", 1), ("float32", 4)):
        assert _positive(pr[dtype]["images_per_second"])
        assert pr[dtype]["bytes_per_image"] == 32 * 32 * 3 * size
        assert len(pr[dtype]["compiles"]["signatures"]) == 1
    assert _positive(pr["ratio"])
    (det,) = report["determinism"]  # the CPU has no XLA-flag variant
    assert det["bit_identical"] and det["max_abs_diff"] == 0 and det["tensors"] > 0
    assert report["checks"] and all(report["checks"].values())
    assert "anchor 3454" in out.stdout
