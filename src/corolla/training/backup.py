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
every layer and the optimizer into HDF5 groups (and builds a reference optimizer), several
times what writing the arrays takes, which on a fast accelerator is a large share of a small
model's epoch. Backups in the older .weights.h5 format (epoch-0003.weights.h5) still resume.

Keras is imported in `save_backup` alone: the backend is chosen first, and the state is read
before it (`preparing`, `refit`)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from corolla.errors import UserError, first_line, shown
from corolla.config.schema import MAX_EPOCHS
from corolla.files import (atomic_path, check_declared, check_space, regular_file_inside,
                           write_text_atomic)
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
    """state.json, checked: a run folder comes from anywhere, and its state names the files
    that a resumed run loads and later deletes, so each must be a file of the backup folder
    itself (`files.regular_file_inside`), never a path elsewhere."""
    backup_dir = Path(backup_dir)
    path = backup_dir / STATE
    fix = "move the backup folder away to start the run's training over"
    if backup_dir.is_symlink():  # the backup would be written, and deleted, elsewhere
        raise UserError(f"{backup_dir} is a link (to {os.readlink(backup_dir)}), not the run's "
                        f"own backup folder; {fix}")
    if not os.path.lexists(path):
        return BackupState()
    if regular_file_inside(backup_dir, STATE) is None:
        raise UserError(f"{path} is not a file of the run's own backup folder (a link, or not a "
                        f"regular file); {fix}")
    try:
        state = BackupState(**json.loads(path.read_text()))
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is damaged ({e}); {fix}") from None
    wrong = _wrong_field(state)
    if wrong:
        raise UserError(f"{path} is damaged: {wrong}; {fix}")
    for key in ("weights", "best"):
        name = getattr(state, key)
        if name is not None and regular_file_inside(backup_dir, name) is None:
            what = "missing" if os.path.basename(name) == name and \
                not os.path.lexists(backup_dir / name) else \
                "not the name of a regular file inside the backup folder"
            raise UserError(f"{path} names {shown(name, 200)} as its {key}, which is {what}; {fix}")
    return state


def _wrong_field(state: BackupState) -> str:
    """What is wrong with the fields of a state read from state.json ("" where nothing is)."""
    def count(value, high: int) -> bool:
        return type(value) is int and 0 <= value <= high

    def number(value) -> bool:
        return type(value) in (int, float)

    if not count(state.epochs_done, MAX_EPOCHS):
        return (f"epochs_done is {shown(state.epochs_done)}, not a count of epochs (0 to "
                f"{MAX_EPOCHS})")
    for key in ("weights", "best"):
        if getattr(state, key) is not None and not isinstance(getattr(state, key), str):
            return f"{key} is {shown(getattr(state, key))}, not a file name"
    if not isinstance(state.history, list) or not all(
            isinstance(row, dict) and all(isinstance(k, str) and number(v)
                                          for k, v in row.items()) for row in state.history):
        return "history is not a list of epochs, each a table of numbers"
    if len(state.history) > state.epochs_done:
        return f"history has {len(state.history)} epochs, more than the {state.epochs_done} done"
    head = state.linear_head
    if head is not None and not (isinstance(head, dict) and number(head.get("val_f1")) and
                                 0 <= head["val_f1"] <= 1 and number(head.get("c")) and
                                 0 < head["c"] < math.inf):
        return f"linear_head is {shown(head)}, not a head's val macro F1 and C"
    if state.best_epoch is not None and not count(state.best_epoch, state.epochs_done - 1) \
            and not (state.best_epoch == LINEAR_HEAD and head is not None):
        return (f"best_epoch is {shown(state.best_epoch)}, not one of the {state.epochs_done} "
                f"epochs done" + (" nor the linear head" if head is not None else ""))
    if state.best_f1 is not None and not (number(state.best_f1) and 0 <= state.best_f1 <= 1):
        return f"best_f1 is {shown(state.best_f1)}, not a macro F1 (0 to 1)"
    return ""


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
    """The arrays of a backup or weights file (`save_backup`, `save_model_weights`), in order;
    one that is not such a file (not a zip, pickled objects, arrays declared larger than the
    file holds) is one line, before anything is inflated."""
    again = "move the backup folder away to start the run's training over"
    try:
        check_declared(path, again)
        with np.load(path, allow_pickle=False) as saved:
            return [saved[f"arr_{i}"] for i in range(len(saved.files))]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise UserError(f"{path} is not a backup Corolla can read ({first_line(e)}); "
                        f"{again}") from None


def write_arrays(arrays: list, path: Path) -> None:
    """`arrays` as an .npz at `path` (written whole or not at all), `read_arrays` reads."""
    # bfloat16 (ml_dtypes) would come back from .npz as raw bytes: kept as float32 (exact).
    arrays = [a.astype(np.float32) if a.dtype.name == "bfloat16" else a for a in arrays]
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        np.savez(out, *arrays)


def save_backup(model, path: Path) -> None:
    """The model's and its optimizer's state, as `load_backup` reads it."""
    import keras

    write_arrays([keras.ops.convert_to_numpy(v) for v in backup_variables(model)], path)


def load_backup(model, path: Path) -> None:
    """Loads `save_backup`'s file (or one in the older `.weights.h5` format) into `model` and its
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
    write_arrays(arrays, path)


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
