"""The end of training: last.keras, model.keras (the best epoch's) and the backup removed, in
the order that leaves a run safe to continue at every moment."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from corolla import files
from corolla.errors import UserError
from corolla.runs import identity, paths
from corolla.runtime import Plan
from corolla.training import linear_head
from corolla.training.backup import LINEAR_HEAD, BackupState, load_model_weights, read_arrays
from corolla.training.optimizer import finalize_ema


@dataclass
class TrainResult:
    run_dir: Path | None  # None on a worker that is not the chief: it writes no run
    model: object
    history: dict
    refit: bool = False  # whether a refit follows (train.refit as the run decided it)
    # Where the refit is timed in this session: the room its time plan gave it, where it stops
    # short (`timing.plan.RefitRoom`).
    refit_deadline: object = None


def save(model, saved, final: BackupState, plan: Plan, run_dir: Path | None, backup_dir: Path,
         run_id: str, log) -> TrainResult:
    """last.keras, then model.keras (the best epoch's, or a timed run's linear head where it
    is the best, or the last), then the backup goes.
    Every worker saves (saving may read mirrored variables collectively) beside its backup;
    only the chief's copy is the run's. The backup goes only once the model is safely written;
    model.keras last of all (it marks the run trained). `saved`: the model as the run saves it
    (`model` at its input size)."""
    model_path = run_dir / paths.MODEL if plan.is_chief else backup_dir.parent / paths.MODEL
    finalize_ema(model)  # (what fit did already, unless no epoch was left to train)

    def write(model, path: Path) -> None:
        _write(model, path, run_id)

    write(saved, model_path.with_name(paths.LAST))
    last_epoch = final.epochs_done - 1
    if final.best is not None and final.best_epoch != last_epoch:
        best = "the linear head" if final.best_epoch == LINEAR_HEAD else \
            f"epoch {final.best_epoch + 1}"
        log(f"model.keras: {best} (val macro F1 {final.best_f1:.4f}, the best); last.keras: "
            f"epoch {last_epoch + 1}")
        best = backup_dir / final.best
        if best.suffix == ".keras":  # a backup from before bests were weights alone
            with files.atomic_path(model_path) as tmp:
                shutil.copyfile(best, tmp)
                identity.stamp(tmp, run_id, saved.input_shape[1] or 0)
        else:
            load_model_weights(saved, best)
            write(saved, model_path)
        result = None  # the caller loads the best model from the run
    else:
        result = saved
        write(result, model_path)
    shutil.rmtree(backup_dir, ignore_errors=True)
    history = {k: [row.get(k) for row in final.history] for row in final.history for k in row}
    return TrainResult(run_dir=run_dir, model=result, history=history)


def write_final(model, saved, path: Path, run_id: str) -> None:
    """The trained `model` as it ends (on its EMA weights where it keeps them), written to
    `path` as `saved` (`model` at the run's input size)."""
    finalize_ema(model)
    _write(saved, path, run_id)


def _write(model, path: Path, run_id: str) -> None:
    """`model` written to `path` whole, marked as the run's (`runs.identity`)."""
    with files.atomic_path(path) as tmp:
        model.save(tmp)
        identity.stamp(tmp, run_id, model.input_shape[1] or 0)


def head_refit(run_dir: Path, plan: Plan, config, log, load_model) -> None:
    """refit.keras of a run that kept its linear head, its refit or, where none follows, what
    predicts: model.keras with the classifier fit on train + val at the same C (linear_head.npz,
    written when the head was fit, from the features at hand), as the probe fits it. Seconds:
    nothing is extracted or trained.
    `config`: the run's; `load_model(run_dir, plan, classes, config)`: its model.keras, loaded
    and checked as evaluation loads it (`evaluation.inference.load_model`)."""
    path = run_dir / paths.LINEAR_HEAD_ALL
    arrays = read_arrays(path)
    if len(arrays) != 2 or arrays[0].ndim != 2 or arrays[1].shape != arrays[0].shape[1:]:
        raise UserError(f"{path} is not a linear head Corolla wrote (a kernel and a bias); "
                        f"remove it")
    model = load_model(run_dir, plan, arrays[0].shape[1], config)
    with plan.inference_scope():
        linear_head.put(model, *arrays)
    _write(model, run_dir / paths.REFIT, config.output.run_id)
    log(f"refit: the run kept its linear head: {paths.REFIT} is model.keras with the head fit "
        f"again on the frozen features of train + val, in seconds from those at hand; it is the "
        f"model that predicts (the test split, `corolla predict`) and is exported")
