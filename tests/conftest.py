"""The fixtures every folder of tests shares: tiny data sets, the shared real data, tiny
trained runs. Modules of helpers are in helpers/ (`from helpers import ...`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.processes import SHARED

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["CUDA_VISIBLE_DEVICES"] = ""  # tests describe CPU behaviour, whatever the machine

FLOWERS5 = SHARED / "data" / "flowers5"


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
