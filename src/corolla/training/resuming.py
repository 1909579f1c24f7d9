"""Continuing a run from its backup on every process: the processes agree on the epoch to
continue from (the chief's), and the backup goes into the model and its optimizer, this
process's own or the chief's.

`checkpoint` (which imports Keras) is imported for its type alone: the backend is chosen first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from corolla import files
from corolla.errors import UserError
from corolla.runtime import Plan, collective
from corolla.training.backup import BackupState

if TYPE_CHECKING:
    from corolla.training.checkpoint import Checkpoint


def agree_on_epoch(plan: Plan, state: BackupState, backup_dir: Path,
                   log) -> tuple[BackupState, str | None]:
    """(the state this process continues from, the chief's backup file where the workers take
    the chief's state, else None). Every process must continue from the chief's epoch: a
    worker whose backup is behind it (its private scratch folder lost with a preempted,
    recreated VM, or another TMPDIR) takes the chief's record here and its weights and
    optimizer once the model is built (`restore`), instead of silently training from scratch
    beside the others. A worker ahead of the chief means the chief's backup was replaced:
    refused."""
    done = collective.gather(plan, [state.epochs_done])[:, 0].tolist()
    if len(set(done)) == 1:
        return state, None
    if max(done) > done[0]:
        raise UserError(f"the processes restored different epochs ({done} completed, by "
                        f"process), and the chief fewer than a worker; resume from the chief's "
                        f"backup as the run left it (the same command on every host)")
    behind = ", ".join(f"process {i} ({d})" for i, d in enumerate(done) if d < done[0])
    log(f"every process continues from the chief's backup, after epoch {done[0]}: epochs in "
        f"the workers' own backups: {behind} (a lost scratch folder, or another TMPDIR)")
    chiefs = json.loads(collective.chief_bytes(plan, json.dumps(state.__dict__).encode()))
    if plan.backend == "jax" and chiefs["best"]:
        # Every process ends by saving the best epoch's model (`saving.save`), and on JAX
        # loading its weights is collective, with the same values everywhere: the workers take
        # the chief's file. On TensorFlow the chief's best model stays the chief's: a worker
        # keeps none.
        best = backup_dir / chiefs["best"]
        data = collective.chief_bytes(plan, best.read_bytes() if plan.is_chief else b"")
        if not plan.is_chief:
            backup_dir.mkdir(parents=True, exist_ok=True)
            with files.atomic_path(best) as tmp:
                tmp.write_bytes(data)
    else:
        chiefs["best"] = None
    # (The chief's weights and optimizer state: sent once the model is built.)
    return (state if plan.is_chief else BackupState(**{**chiefs, "weights": None})), \
        chiefs["weights"]


def restore(model, checkpoint: Checkpoint, plan: Plan, from_chief: bool, twin) -> None:
    """The backup restored into `model` and its optimizer: this process's own, or (with
    `from_chief`) on every process the chief's (`agree_on_epoch`). `twin()`: another model
    built and compiled as `model` was (`read_alone`)."""
    with plan.scope():
        if not (from_chief and plan.backend == "jax"):
            checkpoint.restore(model, for_all=from_chief)
            if from_chief:
                collective.take_chiefs_values(plan, [*model.weights, *model.optimizer.variables])
            return
        # Keras' JAX loading assigns each variable as one array over all processes, a
        # collective (JAX checks that every process passes the same value), which the
        # workers, with no file to load, cannot mirror: the chief reads its backup alone,
        # into a twin of the model (not into a StatelessScope: every Keras save and load
        # makes a reference optimizer, whose variables no such scope allows).
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        collective.take_chiefs_values(plan, [*model.weights, *model.optimizer.variables],
                                      read_alone(model, checkpoint, plan, twin)
                                      if plan.is_chief else None)


def read_alone(model, checkpoint: Checkpoint, plan: Plan, twin) -> list:
    """The values of `model`'s and its optimizer's variables in this process's backup, in
    their order, read with no other process: loaded into `twin()` (built and compiled as the
    model was), on this process's devices alone."""
    import keras

    with plan.inference_scope():
        other = twin()
        checkpoint.restore(other)
        variables = [*other.weights, *other.optimizer.variables]
        if [v.shape for v in variables] != [v.shape for v in
                                             [*model.weights, *model.optimizer.variables]]:
            raise RuntimeError("the twin of the model holds other variables than it")
        return [keras.ops.convert_to_numpy(v) for v in variables]
