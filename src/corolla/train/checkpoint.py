"""The backup of a run in progress, and its history.csv, written so that a kill at any moment
leaves a state to continue from.

    backup/state.json               {"epochs_done": N, "weights": "epoch-0003.weights.h5",
                                     "history": [one row per completed epoch]}
    backup/epoch-0003.weights.h5    model and optimizer state after epoch 3 (0-based)

Each epoch's weights go to a new file first; only then does state.json (written atomically)
point at it, and only then are older weight files removed: state.json always names a complete
file. history.csv is rewritten from state.json's rows, so each epoch is in it exactly once.
Keras' own BackupAndRestore overwrites one weights file in place, cannot tell the data
pipeline which epoch it restores before `fit` starts, and deletes the backup before the final
model is saved; hence this.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import keras

from corolla.errors import UserError
from corolla.files import atomic_path, remove_partials, write_text_atomic

STATE = "state.json"


@dataclass
class BackupState:
    epochs_done: int = 0
    weights: str | None = None  # file name inside the backup folder
    history: list[dict] = field(default_factory=list)


def read_state(backup_dir: Path) -> BackupState:
    path = Path(backup_dir) / STATE
    if not path.is_file():
        return BackupState()
    try:
        state = BackupState(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise UserError(f"{path} is damaged ({e}); move the backup folder away to start the "
                        f"run's training over") from None
    if state.weights and not (Path(backup_dir) / state.weights).is_file():
        raise UserError(f"{path} names {state.weights}, which is missing; move the backup "
                        f"folder away to start the run's training over")
    return state


def write_history(rows: list[dict], path: Path) -> None:
    columns = ["epoch"] + sorted({k for row in rows for k in row} - {"epoch"})
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, out.getvalue())


class Checkpoint(keras.callbacks.Callback):
    """Saves a new state after every epoch (with the learning rate the epoch ended on);
    `restore` loads the last one. `history_path`: where the chief keeps history.csv."""

    def __init__(self, backup_dir: Path, state: BackupState, history_path: Path | None = None):
        super().__init__()
        self.backup_dir, self.state, self.history_path = Path(backup_dir), state, history_path
        self.backup_dir.mkdir(parents=True, exist_ok=True)
        remove_partials(self.backup_dir)  # a weights file a killed run never put in place

    def restore(self, model) -> None:
        """Loads the backed-up model and optimizer state; call it inside the plan's scope
        before `fit`. The optimizer is built first: Keras loads nothing into an unbuilt one
        (it only warns), and `fit` builds it too late for its own BackupAndRestore."""
        if self.state.weights:
            if not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            model.load_weights(self.backup_dir / self.state.weights)

    def on_epoch_end(self, epoch, logs=None):
        lr = keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        row = {"epoch": epoch, **{k: float(v) for k, v in (logs or {}).items()},
               "learning_rate": float(lr)}
        if not math.isfinite(row.get("loss", 0.0)):
            # Saved, this state would poison every resume: stop with the last good one kept.
            kept = (f"the backup of epoch {epoch} is kept" if self.state.weights else
                    "no epoch finished")
            raise UserError(f"the training loss became {row['loss']} in epoch {epoch + 1} "
                            f"(learning rate {row['learning_rate']:.3g}); {kept}. Start a new "
                            f"run with a lower --lr (or a smaller --batch-size)")
        name = f"epoch-{epoch:04d}.weights.h5"
        with atomic_path(self.backup_dir / name) as tmp:
            self.model.save_weights(tmp)
        old = self.state.weights
        self.state = BackupState(epoch + 1, name, self.state.history + [row])
        write_text_atomic(self.backup_dir / STATE, json.dumps(self.state.__dict__, indent=1))
        if old and old != name:
            (self.backup_dir / old).unlink(missing_ok=True)
        if self.history_path is not None:
            write_history(self.state.history, self.history_path)
