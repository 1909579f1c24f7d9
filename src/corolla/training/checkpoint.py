"""The backup of a run in progress, and its history.csv, written so that a kill at any moment
leaves a state to continue from.

    backup/state.json               {"epochs_done": N, "weights": "epoch-0003.npz",
                                     "history": [one row per completed epoch],
                                     "best_epoch": 1, "best_f1": 0.83,
                                     "best": "best-epoch-0001.npz"}
    backup/epoch-0003.npz           model and optimizer state after epoch 3 (0-based)
    backup/best-epoch-0001.npz      the model's weights of the best epoch by val macro F1 so far
                                     (its EMA weights, when the optimizer keeps them)

Each epoch's state goes to a new file first; only then does state.json (written atomically)
point at it, and only then are older files removed: state.json always names a complete file.
history.csv is rewritten from state.json's rows, so each epoch is in it exactly once.
The best epoch keeps its weights alone (a third of the backup with Adam's two moments): the
run's model.keras is written from them once, when training ends.

Both are the variables' values in a fixed order, as one NumPy .npz: Keras' save_weights walks
every layer and the optimizer into HDF5 groups (and builds a reference optimizer), 54 ms an
epoch for small_cnn on a CPU where the arrays themselves take 6 ms; on a fast accelerator that
was a third of an epoch (issue 20). Backups of earlier versions (epoch-0003.weights.h5) still
resume. Keras' own BackupAndRestore overwrites one weights file in place, cannot tell the data
pipeline which epoch it restores before `fit` starts, and deletes the backup before the final
model is saved; hence this.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import keras
import numpy as np

from corolla.errors import UserError
from corolla.files import atomic_path, check_space, remove_partials, write_text_atomic
from corolla.runs.paths import STATE


@dataclass
class BackupState:
    epochs_done: int = 0
    weights: str | None = None  # file name inside the backup folder
    history: list[dict] = field(default_factory=list)
    best_epoch: int | None = None  # the best epoch by val macro F1 so far, and its figure
    best_f1: float | None = None
    best: str | None = None  # its model file inside the backup folder


def stops_early(state: BackupState, patience: int) -> bool:
    """Early stopping by val macro F1, decided from the saved state alone (so a resumed run
    stops where an uninterrupted one would): `patience` epochs without a better figure."""
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


def write_history(rows: list[dict], path: Path) -> None:
    columns = ["epoch"] + sorted({k for row in rows for k in row} - {"epoch"})
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, out.getvalue())


class Checkpoint(keras.callbacks.Callback):
    """Saves a new state after every epoch (with the learning rate the epoch ended on);
    `restore` loads the last one. `history_path`: where the chief keeps history.csv.

    With val macro F1 in the epoch's logs (`callbacks.ValMacroF1`, placed before this), an
    epoch better than the best so far saves its model (on the EMA weights: `swap`, Keras'
    SwapEMA, when the optimizer keeps them), and `patience` epochs without one stop the
    training. The backup itself holds the raw weights and the optimizer (with its EMA), so a
    resumed run continues exactly. `saved`: the model the best epoch is saved as, when not the
    one trained (a view of it at the run's input size: see `models.at_size`). `chiefs_file`:
    the chief's backup, where every process continues from it (`restore`)."""

    def __init__(self, backup_dir: Path, state: BackupState, history_path: Path | None = None,
                 swap=None, patience: int = 0, log=print, saved=None,
                 chiefs_file: str | None = None, began: float | None = None):
        super().__init__()
        # Training seconds (history.csv's `seconds`, after each epoch): this session's since
        # `began` (time.monotonic()) added to those of the sessions before it, so that a time
        # budget counts what a killed run spent up to its last completed epoch.
        self.began = time.monotonic() if began is None else began
        self.before = state.history[-1].get("seconds", 0.0) if state.history else 0.0
        self.backup_dir, self.state, self.history_path = Path(backup_dir), state, history_path
        self.swap, self.patience, self.log, self.saved = swap, patience, log, saved
        self.chiefs_file = chiefs_file
        self.backup_dir.mkdir(parents=True, exist_ok=True)
        remove_partials(self.backup_dir)  # a weights file a killed run never put in place

    def spent(self) -> float:
        """Training seconds so far, the sessions before this one's included."""
        return self.before + time.monotonic() - self.began

    def restore(self, model, for_all: bool = False) -> None:
        """Loads the backed-up model and optimizer state; call it inside the plan's scope
        before `fit`. The optimizer is built first: Keras loads nothing into an unbuilt one
        (it only warns), and `fit` builds it too late for its own BackupAndRestore.

        `for_all` (TensorFlow; JAX: see `resuming.restore`): every process calls it, but
        the workers have no backup of the chief's epoch (their state will come from the chief:
        `collective.take_chiefs_values`).
        Every Keras save and load makes a reference optimizer (Keras 3.15 caches it under one
        key and looks it up under another), whose variables a MultiWorkerMirroredStrategy
        creates collectively: where the chief loads an earlier version's `.weights.h5`
        (`chiefs_file`), a worker saves one, so that both make it together. Corolla's own
        backups go through no Keras save or load."""
        if (self.state.weights or for_all) and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        if self.state.weights:
            load_backup(model, self.backup_dir / self.state.weights)
        elif for_all and (self.chiefs_file or "").endswith(".h5"):
            start = self.backup_dir / "start.weights.h5"
            with atomic_path(start) as tmp:
                model.save_weights(tmp)
            start.unlink()

    def on_epoch_end(self, epoch, logs=None):
        from corolla.training.callbacks import VAL_F1, ema_weights
        from corolla.training.optimizer import epoch_learning_rate

        # Epochs are counted from 1 in history.csv, as in the log (`Epoch 15/32`) and the plots.
        row = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()},
               "learning_rate": epoch_learning_rate(self.model.optimizer)}
        if not math.isfinite(row.get("loss", 0.0)):
            # Saved, this state would poison every resume: stop with the last good one kept.
            kept = (f"the backup of epoch {epoch} is kept" if self.state.weights else
                    "no epoch finished")
            raise UserError(f"the training loss became {row['loss']} in epoch {epoch + 1} "
                            f"(learning rate {row['learning_rate']:.3g}); {kept}. Start a new "
                            f"run with a lower --lr (or a smaller --batch-size)")
        name = f"epoch-{epoch:04d}.npz"
        check_space(self.backup_dir / name, weights_size(self.model))
        save_backup(self.model, self.backup_dir / name)
        old, old_best = self.state.weights, self.state.best
        best_epoch, best_f1, best = self.state.best_epoch, self.state.best_f1, old_best
        f1 = row.get(VAL_F1)
        if f1 is not None and math.isfinite(f1) and (best_f1 is None or f1 > best_f1):
            best_epoch, best_f1, best = epoch, f1, f"best-epoch-{epoch:04d}.npz"
            with ema_weights(self.swap):
                save_model_weights(self.model if self.saved is None else self.saved,
                                   self.backup_dir / best)
        row["seconds"] = round(self.spent(), 2)  # the backup's own time included
        self.state = BackupState(epoch + 1, name, self.state.history + [row], best_epoch,
                                 best_f1, best)
        write_text_atomic(self.backup_dir / STATE, json.dumps(self.state.__dict__, indent=1))
        for previous, now in ((old, name), (old_best, best)):
            if previous and previous != now:
                (self.backup_dir / previous).unlink(missing_ok=True)
        if self.history_path is not None:
            write_history(self.state.history, self.history_path)
        if stops_early(self.state, self.patience):
            self.log(f"early stopping after epoch {epoch + 1}: val macro F1 has not improved "
                     f"for {self.patience} epochs (best {best_f1:.4f}, epoch {best_epoch + 1})")
            self.model.stop_training = True
