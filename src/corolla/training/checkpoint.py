"""The Keras callback that commits a run's backup (`backup`: what the folder holds) after every
epoch, so that a kill at any moment leaves a state to continue from.

Each epoch's state goes to a new file first; only then does state.json (written atomically)
point at it, and only then are older files removed: state.json always names a complete file.
Keras' own BackupAndRestore overwrites one weights file in place, cannot tell the data
pipeline which epoch it restores before `fit` starts, and deletes the backup before the final
model is saved; hence this.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import keras

from corolla.errors import UserError
from corolla.files import atomic_path, check_space, remove_partials
from corolla.training import backup
from corolla.runtime.clock import default_clock
from corolla.training.backup import BackupState
from corolla.training.callbacks import VAL_F1, ema_weights
from corolla.training.optimizer import epoch_learning_rate


class Checkpoint(keras.callbacks.Callback):
    """Saves a new state after every epoch (with the learning rate the epoch ended on);
    `restore` loads the last one. `history_path`: where the chief keeps history.csv.

    With val macro F1 in the epoch's logs (`callbacks.ValMacroF1`, placed before this), an
    epoch better than the best so far saves its model (on the EMA weights: `swap`, Keras'
    SwapEMA, when the optimizer keeps them), and `patience` epochs without one stop the
    training. The backup itself holds the raw weights and the optimizer (with its EMA), so a
    resumed run continues exactly. `saved`: the model the best epoch is saved as, when not the
    one trained (a view of it at the run's input size: see `models.at_size`). `chiefs_file`:
    the chief's backup, where every process continues from it (`restore`).

    `frozen_epochs` (counted from 0): the epochs that train the head alone on the frozen
    features. Where the run fit its linear head (`seed`) they are never kept over it: the same
    linear model on the same features, less converged and fit on train alone (a refit fits the
    head on train + val), whose edge on val is val's noise (`linear_head.verdict`)."""

    def __init__(self, backup_dir: Path, state: BackupState, history_path: Path | None = None,
                 swap=None, patience: int = 0, log=print, saved=None,
                 chiefs_file: str | None = None, began: float | None = None, clock=None,
                 frozen_epochs: frozenset[int] = frozenset()):
        super().__init__()
        self.frozen_epochs = frozenset(frozen_epochs)
        # Training seconds (history.csv's `seconds`, after each epoch): this session's since
        # `began` (on `clock`, a `clock.Clock`: the host's by default) added to those of the
        # sessions before it, so that a time budget counts what a killed run spent up to its
        # last completed epoch.
        self.clock = clock or default_clock()
        self.began = self.clock.now() if began is None else began
        self.before = state.history[-1].get("seconds", 0.0) if state.history else 0.0
        self.backup_dir, self.state, self.history_path = Path(backup_dir), state, history_path
        self.swap, self.patience, self.log, self.saved = swap, patience, log, saved
        self.chiefs_file = chiefs_file
        self.backup_dir.mkdir(parents=True, exist_ok=True)
        remove_partials(self.backup_dir)  # a weights file a killed run never put in place

    def may_keep(self, epoch: int) -> bool:
        """Whether `epoch` (counted from 0) may be kept as the best: not a frozen one where the
        run fit its linear head."""
        return self.state.linear_head is None or epoch not in self.frozen_epochs

    def spent(self) -> float:
        """Training seconds so far, the sessions before this one's included."""
        return self.before + self.clock.since(self.began)

    def restore(self, model, for_all: bool = False) -> None:
        """Loads the backed-up model and optimizer state; call it inside the plan's scope
        before `fit`. The optimizer is built first: Keras loads nothing into an unbuilt one
        (it only warns), and `fit` builds it too late for its own BackupAndRestore.

        `for_all` (TensorFlow; JAX: see `resuming.restore`): every process calls it, but
        the workers have no backup of the chief's epoch (their state will come from the chief:
        `collective.take_chiefs_values`).
        Every Keras save and load makes a reference optimizer (Keras 3.15 caches it under one
        key and looks it up under another), whose variables a MultiWorkerMirroredStrategy
        creates collectively: where the chief loads a backup in the older `.weights.h5` format
        (`chiefs_file`), a worker saves one, so that both make it together. Corolla's own
        backups go through no Keras save or load."""
        if (self.state.weights or for_all) and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        if self.state.weights:
            backup.load_backup(model, self.backup_dir / self.state.weights)
        elif for_all and (self.chiefs_file or "").endswith(".h5"):
            start = self.backup_dir / "start.weights.h5"
            with atomic_path(start) as tmp:
                model.save_weights(tmp)
            start.unlink()

    def seed(self, model, record: dict) -> None:
        """The linear head (`linear_head`, in `model`'s weights; `record`: its val macro F1
        `val_f1` and its C), fit before the first epoch, recorded as the best so far: an epoch
        is kept only where it beats it. In the backup (a resumed run keeps it) at once."""
        name, old = backup.LINEAR_HEAD_FILE, self.state.best
        backup.save_model_weights(model if self.saved is None else self.saved,
                                  self.backup_dir / name)
        self.state = dataclasses.replace(self.state, best_epoch=backup.LINEAR_HEAD,
                                         best_f1=record["val_f1"], best=name,
                                         linear_head=dict(record))
        backup.write_state(self.backup_dir, self.state)
        if old and old != name:
            (self.backup_dir / old).unlink(missing_ok=True)

    def on_epoch_end(self, epoch, logs=None):
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
        check_space(self.backup_dir / name, backup.weights_size(self.model))
        backup.save_backup(self.model, self.backup_dir / name)
        old, old_best = self.state.weights, self.state.best
        best_epoch, best_f1, best = self.state.best_epoch, self.state.best_f1, old_best
        f1 = row.get(VAL_F1)
        if f1 is not None and math.isfinite(f1) and (best_f1 is None or f1 > best_f1) and \
                self.may_keep(epoch):
            best_epoch, best_f1, best = epoch, f1, f"best-epoch-{epoch:04d}.npz"
            with ema_weights(self.swap):
                backup.save_model_weights(self.model if self.saved is None else self.saved,
                                          self.backup_dir / best)
        row["seconds"] = round(self.spent(), 2)  # the backup's own time included
        self.state = BackupState(epoch + 1, name, self.state.history + [row], best_epoch,
                                 best_f1, best, self.state.linear_head)
        backup.write_state(self.backup_dir, self.state)
        for previous, now in ((old, name), (old_best, best)):
            if previous and previous != now:
                (self.backup_dir / previous).unlink(missing_ok=True)
        if self.history_path is not None:
            backup.write_history(self.state.history, self.history_path)
        if backup.stops_early(self.state, self.patience):
            self.log(f"early stopping after epoch {epoch + 1}: val macro F1 has not improved "
                     f"for {self.patience} epochs (best {best_f1:.4f}, epoch {best_epoch + 1})")
            self.model.stop_training = True
