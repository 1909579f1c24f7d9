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


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """Corolla's cache folder for this test alone (COROLLA_CACHE_DIR: conversions, checks)."""
    from corolla.data import datasets

    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def tiny_petals(tmp_path_factory) -> Path:
    """32 px synthetic petals in the competition layout: 4 classes, 64/32/20 images."""
    from corolla.data import synthetic

    from corolla.commands import demo

    return synthetic.write(tmp_path_factory.mktemp("petals"), demo.TINY.data)


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(a folder of 3 classes of 7 photos in every mode people have them, {file: class}):
    helpers.images.make_photos. Tests that change the folder work on a copy."""
    from helpers.images import make_photos

    root = tmp_path_factory.mktemp("photos") / "flowers"
    return root, make_photos(root)


@pytest.fixture(scope="session")
def rare_class(tmp_path_factory) -> Path:
    """16 px solid-colour records whose class is their red band, one class 10x rarer
    (helpers.records: 150/150/15 train, 40 of each class in val)."""
    from helpers import records

    return records.write_rare_class(tmp_path_factory.mktemp("rare"))


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
