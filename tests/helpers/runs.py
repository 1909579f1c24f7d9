"""What a run folder holds, read as the tests compare it: its history, the epochs of its backup,
its saved weights (loaded in this process, or read from the file as stored), and its data."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import h5py
import numpy as np

from corolla.runs import paths


class Stop(Exception):
    """Raised by a test's callback to stop a training where a crash would (`TinyTrainer.fit`
    catches it)."""


def history(run) -> list[dict]:
    """history.csv's rows, as written (strings)."""
    with (Path(run) / paths.HISTORY).open() as f:
        return list(csv.DictReader(f))


def epochs(run) -> list[str]:
    """The epochs in history.csv ([] before it is written)."""
    if not (Path(run) / paths.HISTORY).is_file():
        return []
    return [row["epoch"] for row in history(run)]


def backup_epochs(run) -> int | None:
    """The epochs the run's backup holds (None: no backup)."""
    path = Path(run) / paths.BACKUP / paths.STATE
    return json.loads(path.read_text())["epochs_done"] if path.is_file() else None


def saved_weights(path) -> list[np.ndarray]:
    """The weights of a saved model (RUN/model.keras, last.keras), loaded in this process."""
    import keras

    import corolla.models.layers  # noqa: F401 (registers Corolla's layers)

    return keras.saving.load_model(path, compile=False).get_weights()


def stored_weights(path) -> list[np.ndarray]:
    """The model's weights as a saved model file holds them (its model.weights.h5, each layer's
    variables in the order of their names; the optimizer's left out), read with h5py: no
    backend or runtime is loaded, so a test can compare the files of other processes (a chief
    and its worker, a crashed and an uninterrupted run) without starting one to load them."""
    with zipfile.ZipFile(path) as saved, saved.open("model.weights.h5") as raw, \
            h5py.File(io.BytesIO(raw.read()), "r") as weights:
        arrays = {}
        weights["layers"].visititems(
            lambda name, item: arrays.__setitem__(name, item[()])
            if isinstance(item, h5py.Dataset) else None)
    return [arrays[name] for name in sorted(arrays)]


def assert_same_stored_weights(first, second) -> None:
    """The model files `first` and `second` hold the same weights, bit for bit, and some."""
    a, b = stored_weights(first), stored_weights(second)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def same(a, b) -> bool:
    """Two lists of weights are bit-identical."""
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def data_of(run) -> Path:
    """The data folder the run was trained on, as its config.toml records it."""
    from corolla import config

    return Path(config.load_config(Path(run) / paths.CONFIG).data.path)
