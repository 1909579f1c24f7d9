"""K-fold training: `corolla train --folds K`.

Train and val are pooled and split into K stratified folds (scikit-learn's StratifiedKFold,
seeded by the run's seed); fold k's model trains on the other folds and is evaluated on fold k.
Each fold is a whole run inside the parent's folder:

    runs/NAME/
        config.toml  plan.json  classes.txt   the parent's (train.folds = K)
        folds.csv                             id,label,fold: the assignment, written once
        fold-1/ ... fold-K/                   full runs (model, history, metrics, predictions,
                                              submission), each validating on its own fold
        predictions/oof.npz                   every train+val id once: its fold's model's
                                              probabilities (the out-of-fold predictions)
        metrics.json  confusion_matrix.png    scores of the out-of-fold predictions: each
                                              example scored by a model that never trained on it
        predictions/test.npz  submission.csv  the folds' test probabilities averaged (checked)
        FINISHED                              last

An interrupted k-fold run continues by running the same command again (or `corolla train
--resume runs/NAME`): finished folds (FINISHED) are kept, an unfinished one resumes from its
last completed epoch, the others start.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np

from corolla import config as config_lib
from corolla import rundir
from corolla.errors import Interrupted, UserError
from corolla.runtime import Plan

# The out-of-fold predictions: predictions/oof.npz (corolla.evaluation.predictions' format).
OOF = "oof"


def fold_name(k: int) -> str:
    return f"fold-{k}"


def assign(labels, k: int, seed: int, class_names=None) -> np.ndarray:
    """Fold 1..k of each example: stratified (every fold holds each class in the proportion
    of the whole, within one example), disjoint, covering, and the same for the same seed.
    A class with fewer than k examples could not be in every fold: a UserError."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels)
    counts = Counter(labels.tolist())
    label, fewest = min(counts.items(), key=lambda item: (item[1], item[0]))
    if fewest < k:
        name = repr(class_names[label]) if class_names is not None else str(label)
        fix = f"use --folds {fewest} or fewer" if fewest >= 2 else "k-fold needs 2 or more"
        raise UserError(f"class {name} has {fewest} example{'s' * (fewest != 1)} in train+val, "
                        f"fewer than the {k} folds (each fold must hold every class); {fix}")
    found = np.zeros(len(labels), np.int64)
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    for fold, (_, held_out) in enumerate(splitter.split(np.zeros(len(labels)), labels), 1):
        found[held_out] = fold
    return found


def refuse_parent(run_dir: str | Path) -> None:
    """A k-fold parent holds no model of its own: evaluate and predict take one of its folds."""
    path = Path(run_dir) / rundir.CONFIG
    if not path.is_file():
        return
    config = config_lib.load(path)
    if config.train.folds and not config.data.fold:
        raise UserError(f"{run_dir} is a k-fold run: it has no model of its own; evaluate or "
                        f"predict one of its folds ({Path(run_dir) / fold_name(1)} ...). Its "
                        f"out-of-fold scores are in {Path(run_dir) / rundir.METRICS}, its "
                        f"averaged test predictions in {Path(run_dir) / rundir.SUBMISSION}")


def _resolve(config: config_lib.RunConfig):
    """The parent's config with what every fold must share made explicit (the absolute data
    path, the image size), and the data's layout."""
    from corolla import models
    from corolla.data import layout as layout_lib

    spec = models.get(config.model.name)
    models.registry.check_weights(spec, config.model.weights)
    path = config.data.path
    if path and "://" not in path:
        path = os.path.abspath(path)
    layout = layout_lib.open_layout(path, config.data.image_size, spec.image_size)
    return config_lib.apply(config, {"data.path": path,
                                     "data.image_size": layout.image_size}), layout


def _assignment(config: config_lib.RunConfig, layout, log) -> folds_lib.Assignment:
    from corolla.data import check, pipeline
    from corolla.data import folds as folds_lib

    pooled = check.check_split(folds_lib.pooled(layout), len(layout.class_names))
    meta = pipeline.metadata(pooled)
    repeated = len(meta["ids"]) - len(set(meta["ids"]))
    if repeated:
        raise UserError(f"{repeated} ids occur more than once in train+val of {layout.size_dir};"
                        f" k-fold assigns examples to folds by id: make the ids unique")
    k = config.train.folds
    found = assign(meta["labels"], k, config.train.seed, layout.class_names)
    sizes = np.bincount(found, minlength=k + 1)[1:].tolist()
    log(f"{len(found)} train+val images in {k} stratified folds of {sizes} (seed "
        f"{config.train.seed})")
    return folds_lib.Assignment(tuple(meta["ids"]), tuple(meta["labels"]),
                                tuple(found.tolist()))


def _fold_run(parent: Path, k: int, config: config_lib.RunConfig, log):
    """(config, folder to resume or None) of fold k; None when it finished already."""
    from corolla.data import folds as folds_lib

    folder = parent / fold_name(k)
    if rundir.status(folder) == rundir.FINISHED_STATUS:
        log(f"fold {k} of {config.train.folds} finished before: kept ({folder})")
        return None
    if (folder / rundir.CONFIG).is_file():
        saved = config_lib.load(folder / rundir.CONFIG)
        runtime = {f"runtime.{name}": value for name, value in config.to_dict()["runtime"].items()}
        return config_lib.apply(saved, runtime), folder
    if folder.exists():
        # Killed between making the folder and writing its config: nothing was trained in it.
        leftovers = [p.name for p in folder.iterdir() if p.name != rundir.LOCK]
        if leftovers:
            raise UserError(f"{folder} holds {', '.join(sorted(leftovers)[:5])} but no "
                            f"{rundir.CONFIG}; move it away and run the command again")
        shutil.rmtree(folder)
    return config_lib.apply(config, {
        "data.fold": k, "data.folds_file": str((parent / folds_lib.FOLDS_FILE).resolve()),
        "output.runs_dir": str(parent), "output.name": fold_name(k), "output.run_id": ""}), None


def train_folds(config: config_lib.RunConfig, plan: Plan, log=print,
                resume: Path | None = None) -> tuple[Path, dict]:
    """Trains (or continues) every fold, then pools their predictions; returns (the parent
    run's folder, the out-of-fold metrics). `resume`: the parent of an interrupted k-fold run."""
    from corolla.data import folds as folds_lib
    from corolla.flow import train_evaluate_predict

    if plan.num_processes > 1:
        raise UserError("k-fold training runs in one process (several replicas are fine); "
                        "start it on one host, without TF_CONFIG or KERAS_DISTRIBUTION_*")
    if config.data.skip_bad_records:
        raise UserError("k-fold runs cannot skip damaged records yet (folds are counted by "
                        "id); drop --skip-bad-records or repair the data")
    config, layout = _resolve(config)
    if resume is None:
        assignment = _assignment(config, layout, log)  # before the folder: a refusal leaves none
        parent = rundir.create(config.output.runs_dir, config.output.name,
                               f"{config.model.name}-{config.train.folds}fold")
        rundir.claim(parent, log)
        rundir.record(parent, config, plan, layout.class_names)
        log(f"k-fold run directory: {parent}")
    else:
        parent = Path(resume)
        rundir.claim(parent, log)
        rundir.record_session(parent, plan)
        assignment = None
        log(f"continuing the k-fold run {parent}")
    try:
        folds_path = parent / folds_lib.FOLDS_FILE
        if not folds_path.is_file():  # a new run, or one killed before the file was written
            (assignment or _assignment(config, layout, log)).write(folds_path)
        k = config.train.folds
        for fold in range(1, k + 1):
            found = _fold_run(parent, fold, config, log)
            if found is None:
                continue
            fold_config, fold_resume = found
            log(f"fold {fold} of {k}: {'continuing' if fold_resume else 'training'} "
                f"{parent / fold_name(fold)}")
            try:
                train_evaluate_predict(fold_config, plan, log=log, resume=fold_resume)
            except KeyboardInterrupt:  # continue the whole k-fold run, not only this fold
                raise Interrupted(parent) from None
            _free_memory()
        metrics = pool(parent, log=log)
        rundir.mark_finished(parent)
    finally:
        rundir.release(parent)
    return parent, metrics


def _free_memory() -> None:
    """The next fold builds a new model: the last one's can go now. (Not keras' clear_session:
    it would also reset the plan's dtype policy and JAX distribution, global Keras settings.)"""
    import gc

    gc.collect()


def pool(parent: str | Path, log=print) -> dict:
    """The parent's files, from its folds' saved predictions alone: predictions/oof.npz with
    metrics.json and confusion_matrix.png, and (when the folds predicted a test split) the mean
    of their test probabilities, predictions/test.npz and submission.csv (checked)."""
    from corolla.evaluation import metrics as metrics_lib
    from corolla.evaluation import predictions
    from corolla.report import plots, submission
    from corolla.data import folds as folds_lib

    parent = Path(parent)
    config = config_lib.load(parent / rundir.CONFIG)
    assignment = folds_lib.Assignment.read(parent / folds_lib.FOLDS_FILE)
    k = config.train.folds
    names = rundir.class_names(parent)
    fold_dirs = [parent / fold_name(fold) for fold in range(1, k + 1)]
    held_out = [predictions.load(predictions.path_in(d, "val")) for d in fold_dirs]
    per_fold = []
    for fold, (d, p) in enumerate(zip(fold_dirs, held_out), 1):
        expected = {i for i, f in zip(assignment.ids, assignment.folds) if f == fold}
        if set(p.ids) != expected:
            raise UserError(f"{predictions.path_in(d, 'val')} does not hold fold {fold}'s "
                            f"{len(expected)} ids; evaluate that fold again (`corolla evaluate "
                            f"{d}`)")
        scores = metrics_lib.classification_metrics(p.labels, p.predicted, p.class_names)
        per_fold.append({"fold": fold, "num_examples": len(p), "accuracy": scores["accuracy"],
                         "f1_macro": scores["f1_macro"]})
    merged = predictions.make(
        [i for p in held_out for i in p.ids], np.concatenate([p.labels for p in held_out]),
        np.concatenate([p.probabilities for p in held_out]), names).in_order(assignment.ids)
    plots.make_folder(parent)
    written = [predictions.save(predictions.path_in(parent, OOF), merged.ids, merged.labels,
                                merged.probabilities, names)]
    m = metrics_lib.classification_metrics(merged.labels, merged.predicted, names)
    m.update(split=OOF, folds=k, per_fold=per_fold, data=config.data.path)
    written.append(plots.write_json(m, parent / rundir.METRICS))
    matrix, labels = metrics_lib.confusion(merged.labels, merged.predicted)
    written.append(plots.plot_confusion_matrix(matrix, [names[i] for i in labels],
                                               parent / rundir.CONFUSION))
    log(f"out-of-fold ({len(merged)} train+val images, {k} folds): accuracy "
        f"{m['accuracy']:.4f}  macro F1 {m['f1_macro']:.4f}  precision "
        f"{m['precision_macro']:.4f}  recall {m['recall_macro']:.4f}")
    tests = [predictions.path_in(d, "test") for d in fold_dirs]
    if all(path.is_file() for path in tests):
        loaded = [predictions.load(path) for path in tests]
        first = loaded[0]
        mean = np.mean([p.in_order(first.ids).probabilities for p in loaded], axis=0)
        written.append(predictions.save(predictions.path_in(parent, "test"), first.ids, None,
                                        mean, names))
        path = submission.write(first.ids, mean.argmax(axis=1), parent / rundir.SUBMISSION,
                                num_classes=len(names))
    else:
        path = None
    for done in written:
        log(f"wrote {done}")
    log(f"wrote {path} ({len(first.ids)} test images, mean of {k} folds; checked)" if path else
        "the folds predicted no test split: no submission.csv written")
    return m
