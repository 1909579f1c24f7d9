"""K-fold training, the fold loop of `corolla train --folds K`.

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
        report.html                           example scored by a model that never trained on it
        predictions/test.npz  submission.csv  the folds' test probabilities averaged (checked)
        FINISHED                              last

With a time budget (`--time`), the folds share it, counted from the command's start: each new
fold gets what is left of it (the command's start-up and the folds before it, their evaluation
and predictions included; a continued run's earlier sessions by their folds' training seconds),
over the folds left (`_time_share`), and fits its schedule to that.

An interrupted k-fold run continues by running the same command again (or `corolla train
--resume runs/NAME`): finished folds (FINISHED) are kept, an unfinished one resumes from its
last completed epoch, the others start.
"""

from __future__ import annotations

import gc
import math
import shutil
from pathlib import Path

import numpy as np

from corolla.config import RunConfig, duration_seconds, format_duration, with_settings
from corolla import models
from corolla.flows.run import train_evaluate_predict
from corolla.data import check, datasets, pipeline
from corolla.data.audit import survey
from corolla.data import folds
from corolla.errors import UserError
from corolla.stopping import Interrupted
from corolla.scoring.metrics import f1_text
from corolla.evaluation.pool import pool_folds
from corolla.files import absolute, read_history
from corolla.report import scored
from corolla.runs import paths, rundir, tracking
from corolla.runtime.clock import default_clock
from corolla.runtime import Plan
from corolla.training import settings
from corolla.training.timing import budget


def _resolve(config: RunConfig, resume: bool, log):
    """The parent's config with what every fold must share made explicit (the absolute data
    path, the image size, the conversion of an image folder or CSV: every fold reads that one,
    `datasets.open_recorded`), and the data's layout."""
    spec = models.get(config.model.name)
    models.check_weights(spec, config.model.weights)
    path = config.data.path and absolute(config.data.path)
    if resume:  # the data the folds were assigned on, whatever happened to the source since
        layout = datasets.open_recorded(config.data, settings.data_size(config, spec), log=log)
    else:
        layout = datasets.open_data(path, config.data.image_size, settings.data_size(config, spec),
                                    features=datasets.features_of(config.data), log=log)
    settings.input_size(config, spec, layout)  # too small for the model: before any folder
    return with_settings(config, {
        "data.path": path, "data.image_size": layout.image_size,
        "data.converted": layout.root if layout.source else ""}), layout


def _assignment(config: RunConfig, layout, log) -> folds.Assignment:
    pooled = check.check_split(folds.pooled(layout), len(layout.class_names))
    meta = pipeline.metadata(pooled)
    repeated = len(meta["ids"]) - len(set(meta["ids"]))
    if repeated:
        raise UserError(f"{repeated} ids occur more than once in train+val of {layout.size_dir};"
                        f" k-fold assigns examples to folds by id: make the ids unique")
    k = config.train.folds
    groups = _copy_groups(config, meta["ids"], log)
    found = folds.assign(meta["labels"], k, config.train.seed, layout.class_names, groups)
    sizes = np.bincount(found, minlength=k + 1)[1:].tolist()
    together = len(groups) - len(set(groups)) if groups else 0
    log(f"{len(found)} train+val images in {k} stratified folds of {sizes} (seed "
        f"{config.train.seed}" + (f"; {together} copies kept in their originals' folds)"
                                  if together else ")"))
    return folds.Assignment(tuple(meta["ids"]), tuple(meta["labels"]),
                            tuple(found.tolist()), tuple(groups) if together else ())


def _copy_groups(config: RunConfig, ids, log) -> list[str] | None:
    """Each id's group of copies (exact and near duplicates, as `check-data` finds them: the
    check `train` ran before, read from its cache), so that no fold scores a copy of an image
    it trained on. None when the data cannot be surveyed (said in one line)."""
    try:
        found, _ = survey.cached(config.data.path, datasets.checks_dir(),
                                 datasets.features_of(config.data), log=log)
    except UserError as e:
        log(f"folds: copies not looked for ({e}); each image is a group of its own")
        return None
    groups = survey.copies_in(found).groups
    return [groups.get(i, i) for i in ids]


def _fold_run(parent: Path, k: int, config: RunConfig, log, spent: float = 0.0):
    """(config, folder to resume or None) of fold k; None when it finished already. `spent`:
    the seconds of the k-fold run's budget spent so far (`_time_share`)."""
    folder = parent / paths.fold_name(k)
    if rundir.status(folder) == rundir.FINISHED_STATUS:
        log(f"fold {k} of {config.train.folds} finished before: kept ({folder})")
        return None
    if (folder / paths.CONFIG).is_file():
        saved = rundir.config_of(folder)
        runtime = {f"runtime.{name}": value for name, value in config.to_dict()["runtime"].items()}
        return with_settings(saved, runtime), folder
    if folder.exists():
        # Killed between making the folder and writing its config: nothing was trained in it.
        leftovers = [p.name for p in folder.iterdir() if p.name != paths.LOCK]
        if leftovers:
            raise UserError(f"{folder} holds {', '.join(sorted(leftovers)[:5])} but no "
                            f"{paths.CONFIG}; move it away and run the command again")
        shutil.rmtree(folder)
    return with_settings(config, {
        "data.fold": k, "data.folds_file": str((parent / paths.FOLDS).resolve()),
        "output.runs_dir": str(parent), "output.name": paths.fold_name(k),
        "output.run_id": "", **_time_share(parent, k, config, spent)}), None


def _time_share(parent: Path, k: int, config: RunConfig, spent: float) -> dict:
    """Fold k's part of the k-fold run's time budget: what is left of it after `spent`
    seconds (`train_folds`), over the folds left; {} without a budget. Each fold plans its own
    epochs in its share (`training.timing`)."""
    t = config.train
    if not t.time_budget:
        return {}
    share = (duration_seconds(t.time_budget) - spent) / (t.folds - k + 1)
    if share < 1:
        raise UserError(f"the k-fold run's time budget ({t.time_budget}) is spent: "
                        f"{spent:.0f} s before fold {k}; continue it with "
                        f"`corolla train --resume {parent}` after raising train.time_budget "
                        f"in {parent / paths.CONFIG}")
    # Rounded down: rounded up (as a duration is written), the folds' shares could add up to
    # more than the budget.
    return {"train.time_budget": format_duration(math.floor(share))}


def _spent(parent: Path, k: int) -> float:
    """The training seconds of folds 1 to k - 1 (history.csv's last `seconds`): a continued
    k-fold run's earlier sessions."""
    spent = 0.0
    for fold in range(1, k):
        history = parent / paths.fold_name(fold) / paths.HISTORY
        rows = (read_history(history) if history.is_file() else []) or [{}]
        seconds = float(rows[-1].get("seconds", 0.0))
        spent += seconds if seconds == seconds else 0.0  # (NaN: a run from before the column)
    return spent


def _too_short(short: budget.TooShort, parent: Path, k: int, config: RunConfig,
               fresh: bool, spent: float) -> UserError:
    """Fold k's share that holds no epoch, as the k-fold run's error: in the budget the user
    gave (not the fold's share of it), with the least that would hold one epoch of each fold
    left. `fresh`: nothing was trained yet and the parent goes, so that the same command with
    that budget starts anew; else the run continues after its budget is raised. `spent`: the
    seconds of the budget spent before fold k."""
    t = config.train
    left = t.folds - k + 1
    least = format_duration(
        math.ceil((spent + short.least * left) / 10) * 10)
    text = (f"--time {t.time_budget} (train.time_budget) is too short for {t.folds} folds of "
            f"recipe {t.recipe} here: fold {k}'s share of it ({short.budget}) holds no epoch "
            f"({short.measured})")
    if fresh:
        return UserError(f"{text}; give at least --time {least}")
    return UserError(f"{text}; continue it with `corolla train --resume {parent}` after "
                     f"raising train.time_budget to at least {least} in "
                     f"{parent / paths.CONFIG}")


def train_folds(config: RunConfig, plan: Plan, log=print,
                resume: Path | None = None, began: float | None = None) -> tuple[Path, dict]:
    """Trains (or continues) every fold, then pools their predictions; returns (the parent
    run's folder, the out-of-fold metrics). `resume`: the parent of an interrupted k-fold run.
    `began`: when the command started (`clock.default_clock()`'s time), where a time budget
    counts from (None: now)."""
    clock = default_clock()
    began = clock.now() if began is None else began
    if plan.num_processes > 1:
        raise UserError("k-fold training runs in one process (several replicas are fine); "
                        "start it on one host, without TF_CONFIG or KERAS_DISTRIBUTION_*")
    if config.data.skip_bad_records:
        raise UserError("k-fold runs cannot skip damaged records yet (folds are counted by "
                        "id); drop --skip-bad-records or repair the data")
    config, layout = _resolve(config, resume is not None, log)
    parent, assignment = _claim_parent(config, layout, plan, resume, log)
    nothing_trained = False
    try:
        # Its tracked run ends KILLED or FAILED; a stop in a fold is `Interrupted(parent)` below.
        with tracking.ended_on_error(parent, log, interrupted=False):
            # The k-fold run as a whole, its folds' tracked runs its children (`tracking.start`).
            # (Only the chief tracks: a k-fold run is one process.)
            tracking.start(config, parent, resume is not None, log)
            folds_path = parent / paths.FOLDS
            if not folds_path.is_file():  # a new run, or one killed before the file was written
                (assignment or _assignment(config, layout, log)).write(folds_path)
            k = config.train.folds
            before = _spent(parent, k + 1)  # (the folds' training in earlier sessions)
            for fold in range(1, k + 1):
                spent = before + clock.since(began)
                found = _fold_run(parent, fold, config, log, spent)
                if found is None:
                    continue
                fold_config, fold_resume = found
                log(f"fold {fold} of {k}: {'continuing' if fold_resume else 'training'} "
                    f"{parent / paths.fold_name(fold)}")
                try:
                    fold_dir = train_evaluate_predict(fold_config, plan, log=log,
                                                      resume=fold_resume)[0]
                    tracking.finish(fold_dir, log)  # each fold is a tracked run of its own
                except KeyboardInterrupt:  # continue the whole k-fold run, not only this fold
                    raise Interrupted(parent) from None
                except budget.TooShort as short:
                    nothing_trained = resume is None and fold == 1
                    raise _too_short(short, parent, fold, config, nothing_trained,
                                     spent) from None
                _free_memory()
            metrics = pool(parent, config, layout, log=log)
            tracking.send_scored(parent, parent, metrics, log)  # ended by train, report sent
            rundir.mark_finished(parent)
    finally:
        rundir.release(parent)
        if nothing_trained:  # a refused budget leaves no run behind, as one run's does
            shutil.rmtree(parent, ignore_errors=True)
    return parent, metrics


def _claim_parent(config: RunConfig, layout, plan: Plan, resume: Path | None,
                  log) -> tuple[Path, folds.Assignment | None]:
    """(the parent's folder, claimed, with this session recorded; the new run's fold
    assignment, drawn before the folder is made, or None for a continued one)."""
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
    return parent, assignment


def _free_memory() -> None:
    """The next fold builds a new model: the last one's can go now. (Not keras' clear_session:
    it would also reset the plan's dtype policy and JAX distribution, global Keras settings.)"""
    gc.collect()


def pool(parent: str | Path, config: RunConfig, images, log=print) -> dict:
    """The parent's files, from its folds' saved predictions alone (`evaluation.pool`):
    predictions/oof.npz with the scored folder's files (metrics.json, confusion_matrix.png,
    report.html), and (when the folds predicted a test split) the mean of their test
    probabilities, predictions/test.npz and submission.csv (checked). `config`, `images`: the
    parent's resolved config and its data's layout, as `train_folds` opened them (the images
    of the labels to review)."""
    parent = Path(parent)
    assignment = folds.Assignment.read(parent / paths.FOLDS)
    k = config.train.folds
    fold_dirs = [parent / paths.fold_name(fold) for fold in range(1, k + 1)]
    pooled = pool_folds(assignment, fold_dirs, rundir.class_names(parent), paths.OOF)
    m = {**pooled.metrics, "data": config.data.path}
    log(f"out-of-fold ({len(pooled.oof)} train+val images, {k} folds): accuracy "
        f"{m['accuracy']:.4f}  {f1_text(m)}  precision "
        f"{m['precision_macro']:.4f}  recall {m['recall_macro']:.4f}")
    written = scored.write(parent, m, pooled.oof, test=pooled.test, write_submission=True,
                           title="Out-of-fold (rows: true class, normalised)",
                           review_layout=images)
    for kind, done in written.items():
        if kind != "submission":
            log(f"wrote {done}")
    test = pooled.test
    log(f"wrote {written['submission']} ({len(test.ids)} test images, mean of {k} folds; "
        f"checked)" if test is not None else
        "the folds predicted no test split: no submission.csv written")
    return m
