"""Shared test helpers: tiny data sets, the shared real data, subprocess runners."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["CUDA_VISIBLE_DEVICES"] = ""  # tests describe CPU behaviour, whatever the machine

REPO = Path(__file__).resolve().parents[1]
FLOWERS5 = REPO.parent / "shared" / "data" / "flowers5"


@pytest.fixture(scope="session")
def flowers5() -> Path:
    """The real-photo data set beside the repository (present in CI, absent in a fresh clone)."""
    if not (FLOWERS5 / "tfrecords-jpeg-192x192").is_dir():
        pytest.skip(f"{FLOWERS5} is absent")
    return FLOWERS5


@pytest.fixture(scope="session")
def tiny_petals(tmp_path_factory) -> Path:
    """32 px synthetic petals in the competition layout: 4 classes, 64/32/20 images."""
    from corolla.data import synthetic

    from corolla.commands import demo

    return synthetic.write(tmp_path_factory.mktemp("petals"), demo.TINY.data)


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_python(code: str, env: dict | None = None, timeout: int = 300, cwd=None):
    """Runs `code` in a fresh interpreter (own TensorFlow runtime, own Keras backend)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], env=full_env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def tiny_kfold(tiny_petals, tmp_path_factory) -> Path:
    """A finished `corolla train --folds 2` run on tiny_petals (one epoch of two steps a fold).
    Its folds are small trained runs too: tests that write into one work on a copy."""
    from corolla.cli import main

    runs = tmp_path_factory.mktemp("kfold")
    assert main(["train", "--data", str(tiny_petals), "--folds", "2", "--epochs", "1",
                 "--steps-per-epoch", "2", "--batch-size", "8", "--runs-dir", str(runs),
                 "--name", "k2"]) == 0
    return runs / "k2"
