"""The backup of a run in progress, and its history.csv: what the backup folder holds, read
and written without Keras (`checkpoint.Checkpoint`, the callback, writes it after each epoch).

    backup/state.json               {"epochs_done": N, "weights": "epoch-0003.npz",
                                     "history": [one row per completed epoch],
                                     "best_epoch": 1, "best_f1": 0.83,
                                     "best": "best-epoch-0001.npz",
                                     "linear_head": {"val_f1": 0.81, "c": 0.1}}
    backup/epoch-0003.npz           model and optimizer state after epoch 3 (0-based)
    backup/best-epoch-0001.npz      the model's weights of the best epoch by val macro F1 so far
                                     (its EMA weights, when the optimizer keeps them)
    backup/linear-head.npz          the linear head's model weights, while it is the best
                                     (`best_epoch` LINEAR_HEAD: a timed run's floor, fit on
                                     frozen features before the first epoch: `linear_head`)

history.csv is rewritten from state.json's rows, so each epoch is in it exactly once.
The best epoch keeps its weights alone (a third of the backup with Adam's two moments): the
run's model.keras is written from them once, when training ends.

Both are the variables' values in a fixed order, as one NumPy .npz: Keras' save_weights walks
every layer and the optimizer into HDF5 groups (and builds a reference optimizer), 54 ms an
epoch for small_cnn on a CPU where the arrays themselves take 6 ms; on a fast accelerator that
was a third of an epoch. Backups of earlier versions (epoch-0003.weights.h5) still resume.

Keras is imported in `save_backup` alone: the backend is chosen first, and the state is read
before it (`preparing`, `refit`)."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from corolla.errors import UserError
from corolla.files import atomic_path, check_space, write_text_atomic
from corolla.runs.paths import STATE


# `best_epoch` of the linear head (`linear_head`), fit before the first epoch.
LINEAR_HEAD = -1
LINEAR_HEAD_FILE = "linear-head.npz"


@dataclass
class BackupState:
    epochs_done: int = 0
    weights: str | None = None  # file name inside the backup folder
    history: list[dict] = field(default_factory=list)
    best_epoch: int | None = None  # the best epoch by val macro F1 so far, and its figure
    best_f1: float | None = None
    best: str | None = None  # its model file inside the backup folder
    # The linear head's record, once fit (`linear_head`): its val macro F1 and its C.
    linear_head: dict | None = None


def stops_early(state: BackupState, patience: int) -> bool:
    """Early stopping by val macro F1, decided from the saved state alone (so a resumed run
    stops where an uninterrupted one would): `patience` epochs without a better figure (than
    the linear head's too, where it is the best: LINEAR_HEAD counts as the epoch before the
    first)."""
    return bool(patience) and state.best_epoch is not None and \
        state.epochs_done - 1 - state.best_epoch >= patience


def read_state(backup_dir: Path) -> BackupState:
    path = Path(backup_dir) / STATE
    if not path.is_file():
        return BackupState()
    try:
        state = BackupState(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise UserError(f"{path} is damaged ({e}); move the backup folder away to start the "
                        f"run's training over") from None
    for name in (state.weights, state.best):
        if name and not (Path(backup_dir) / name).is_file():
            raise UserError(f"{path} names {name}, which is missing; move the backup "
                            f"folder away to start the run's training over")
    return state


def backup_variables(model) -> list:
    """What a backup holds, in a fixed order: the model's weights, then its optimizer's
    variables (its step, moments, EMA: what Keras' save_weights saves)."""
    return [*model.weights, *(model.optimizer.variables if model.optimizer else [])]


def weights_size(model) -> int:
    """At least the size of a backup's file (`save_backup`): the variables of the model and of
    its optimizer, with 4 KiB each for the archive's headers (about 0.2 KiB are used), and
    1 MiB."""
    return (1 << 20) + sum(math.prod(v.shape) * np.dtype(v.dtype).itemsize + 4096
                           for v in backup_variables(model))


def read_arrays(path: Path) -> list:
    """The arrays of a backup or weights file (`save_backup`, `save_model_weights`), in order."""
    with np.load(path) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def _write_arrays(arrays: list, path: Path) -> None:
    # bfloat16 (ml_dtypes) would come back from .npz as raw bytes: kept as float32 (exact).
    arrays = [a.astype(np.float32) if a.dtype.name == "bfloat16" else a for a in arrays]
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        np.savez(out, *arrays)


def save_backup(model, path: Path) -> None:
    """The model's and its optimizer's state, as `load_backup` reads it."""
    import keras

    _write_arrays([keras.ops.convert_to_numpy(v) for v in backup_variables(model)], path)


def load_backup(model, path: Path) -> None:
    """Loads `save_backup`'s file (or an earlier version's `.weights.h5`) into `model` and its
    built optimizer; a file of another model or optimizer is one line."""
    path = Path(path)
    if path.name.endswith(".h5"):
        model.load_weights(path)
        return
    variables, arrays = backup_variables(model), read_arrays(path)
    if [a.shape for a in arrays] != [tuple(v.shape) for v in variables]:
        raise UserError(f"{path} holds {len(arrays)} arrays that do not fit the run's model "
                        f"and optimizer ({len(variables)} variables); move the backup folder "
                        f"away to start the run's training over")
    for variable, value in zip(variables, arrays):
        variable.assign(value)


def save_model_weights(model, path: Path) -> None:
    """The model's own weights (no optimizer), as `load_model_weights` reads them."""
    arrays = model.get_weights()
    check_space(path, (1 << 20) + sum(a.nbytes for a in arrays))
    _write_arrays(arrays, path)


def load_model_weights(model, path: Path) -> None:
    model.set_weights(read_arrays(path))


def write_state(backup_dir: Path, state: BackupState) -> None:
    """state.json, written atomically: it names only complete files (`read_state`)."""
    write_text_atomic(Path(backup_dir) / STATE, json.dumps(state.__dict__, indent=1))


def write_history(rows: list[dict], path: Path) -> None:
    columns = ["epoch"] + sorted({k for row in rows for k in row} - {"epoch"})
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, out.getvalue())
