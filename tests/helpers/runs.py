"""What a run folder holds, read as the tests compare it: its history, the epochs of its backup,
its saved weights (in this process or a fresh one), and its data."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

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


def saved_weights_in_a_fresh_process(path, timeout: int = 300) -> list[np.ndarray]:
    """The same, loaded by a fresh interpreter (its own backend and runtime, as a run's
    processes have), through path.npz beside the model."""
    code = ("import sys, numpy as np, corolla.runtime as r; r.detect(); import keras; "
            "import corolla.models.layers; m = keras.saving.load_model(sys.argv[1], "
            "compile=False); np.savez(sys.argv[2], *m.get_weights())")
    out = Path(path).with_suffix(".npz")
    subprocess.run([sys.executable, "-c", code, str(path), str(out)], check=True,
                   capture_output=True, timeout=timeout,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    with np.load(out) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def same(a, b) -> bool:
    """Two lists of weights are bit-identical."""
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def data_of(run) -> Path:
    """The data folder the run was trained on, as its config.toml records it."""
    from corolla import config

    return Path(config.load(Path(run) / paths.CONFIG).data.path)
