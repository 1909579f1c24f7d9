"""The tampered-run refusals of a run folder from elsewhere, each in a fresh process with half
a GiB of memory and a timeout: a state.json naming a file outside its run deletes nothing, a
run's file linked to a secret is not read into report.html, a NaN offset in bias.json is
refused. Each is held in detail beside its code (tests/training/test_tampered_backup.py,
tests/report/test_report_links.py, tests/evaluation/test_bias.py); here, that the refusal
comes before any work that could take the host's memory or time."""

from __future__ import annotations

import base64
import json
import os

import pytest

from helpers.processes import run_capped

SAID = """
import json, sys
from corolla.errors import UserError
def said(call):
    try:
        return "accepted: " + repr(call())[:80]
    except UserError as e:
        return str(e)
"""


def _capped(code: str, setup: str = "") -> str:
    """The last line `code` prints, run under the cap (`setup`, imports, before it)."""
    result = run_capped(SAID + code, gib=0.5, setup=setup, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.large  # a fresh process importing TensorFlow under a memory cap: CI's large step
def test_a_state_naming_a_file_outside_the_run_deletes_nothing_under_a_memory_cap(tmp_path):
    backup = tmp_path / "run" / "backup"
    backup.mkdir(parents=True)
    (backup / "epoch-0000.npz").write_bytes(b"weights")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's")
    (backup / "state.json").write_text(json.dumps({
        "epochs_done": 1, "weights": "epoch-0000.npz", "history": [{"epoch": 1}],
        "best_epoch": 0, "best_f1": 0.0, "best": str(victim)}))
    # (the training package imports TensorFlow, whose own mappings come before the cap)
    line = _capped(f"print(said(lambda: backup.read_state({str(backup)!r})))",
                   setup="from corolla.training import backup")
    assert line.startswith(f"{backup / 'state.json'} names {str(victim)!r} as its best")
    assert victim.read_text() == "the user's"


def test_a_run_file_linked_to_a_secret_is_not_read_into_the_report_under_a_memory_cap(
        tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"f1_macro": 0.5, "split": "val"}))
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t-9f86d081")
    os.symlink(secret, run / "leak.png")
    line = _capped(f"from corolla.report import html\n"
                   f"page = html.document(html.sources(__import__('pathlib').Path({str(run)!r})))\n"
                   f"print(json.dumps(['s3cr3t' in page, "
                   f"{base64.b64encode(secret.read_bytes()).decode()!r} in page, "
                   f"'Not read: ' in page]))")
    assert json.loads(line) == [False, False, True]


def test_a_nan_offset_is_refused_under_a_memory_cap(tmp_path):
    (tmp_path / "bias.json").write_text('{"offsets": {"daisy": 0.5, "rose": NaN}}')
    line = _capped(f"from corolla.evaluation import bias\n"
                   f"print(said(lambda: bias.load_offsets({str(tmp_path)!r}, ['daisy', 'rose'])))")
    assert "holds nan as the offset of class 'rose', not a finite number" in line
