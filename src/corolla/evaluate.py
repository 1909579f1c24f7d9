"""Evaluation on the labelled validation split: returns plain data; `write` makes the files."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla import metrics as metrics_lib
from corolla import html_report, predictions, report, rundir
from corolla import tta as tta_lib
from corolla.data import check
from corolla.data import folds
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.errors import UserError
from corolla.runtime import Plan


@dataclass
class Evaluation:
    metrics: dict
    ids: list[str]
    y_true: np.ndarray
    y_pred: np.ndarray
    probabilities: np.ndarray


def load_model(run_dir: Path, plan: Plan, num_classes: int):
    """The run's model, checked to output one probability per class of the run: a model of
    another width would pair its outputs with the wrong names (or none)."""
    import keras

    import corolla.models.layers  # noqa: F401  (registers Corolla's layers for loading)

    with plan.inference_scope():
        try:
            model = keras.saving.load_model(run_dir / rundir.MODEL, compile=False)
        except (TypeError, ValueError) as e:  # Keras wraps the layer's ValueError in a TypeError
            # small_cnn trained on TensorFlow saves synchronized BatchNorm (see models.zoo).
            if "synchronized=True is only supported" in str(e):
                raise UserError(f"{run_dir} was trained on TensorFlow with synchronized "
                                f"BatchNormalization, which Keras loads only there; use "
                                f"--backend tensorflow") from None
            # Keras' safe mode refuses Python code stored in the file (a lambda can run
            # anything); Corolla's own models hold only registered layers.
            if str(e).startswith("Requested the deserialization of a"):
                what = "a Lambda layer" if "`Lambda` layer" in str(e) else "a Python lambda"
                raise UserError(f"{run_dir / rundir.MODEL} contains {what}; Corolla loads "
                                f"models only in Keras' safe mode: rebuild the model with "
                                f"registered layers instead") from None
            raise
    if model.output_shape[-1] != num_classes:
        raise UserError(f"{run_dir / rundir.MODEL} outputs {model.output_shape[-1]} classes but "
                        f"the run names {num_classes}; it is not this run's model")
    return model


def open_run(run_dir, data_path: str | None = None):
    """(run folder, its config, its data layout at the trained image size). The run's own
    class names win: data that names other classes would pair outputs with wrong labels."""
    from corolla.kfold import refuse_parent

    refuse_parent(run_dir)
    run_dir, config = rundir.load(run_dir)
    from corolla.data import sources

    layout = sources.open_data(data_path or config.data.path, config.data.image_size,
                               features=sources.features_of(config.data))
    if not data_path or _data_root(layout.source or layout.root) == \
            _data_root(config.data.path):
        layout = folds.restrict(layout, config.data)  # a k-fold run's fold of its own data
    saved = rundir.class_names(run_dir)
    if saved is not None and saved != layout.class_names:
        raise UserError(f"the data at {layout.root} names {len(layout.class_names)} classes, "
                        f"not the {len(saved)} this run was trained on "
                        f"({run_dir / rundir.CLASSES}); pass --data with the run's data set")
    return run_dir, config, layout


def _data_root(path: str) -> str:
    """A data path as a comparable place: the folder above tfrecords-jpeg-SxS/, resolved."""
    path = path.rstrip("/")
    if re.fullmatch(r"tfrecords-jpeg-\d+x\d+", path.rsplit("/", 1)[-1]):
        path = path.rsplit("/", 1)[0]
    return path if "://" in path else str(Path(path).resolve())


def output_dir(run_dir: Path, config, layout: layout_lib.Layout, out=None) -> Path:
    """Where evaluation writes, checked before a model is loaded. Scores on the run's own data
    refresh the run's metrics.json and plots; scores on other data go beside them, into
    RUN/eval-<data folder>/ (or `out`), so that the run keeps the record of its own val split.
    Inside a run, `out` may be only that place or another eval-* folder: never the run's own
    files, its backup or its logs."""
    own = bool(config.data.path) and \
        _data_root(layout.source or layout.root) == _data_root(config.data.path)
    name = _data_root(layout.root).rstrip("/").rsplit("/", 1)[-1] or "data"
    default = run_dir if own else run_dir / f"eval-{name}"
    if out is None:
        target = default
    else:
        target, run = Path(out), run_dir.resolve()
        resolved = target.resolve()
        inside = resolved == run or run in resolved.parents
        if inside and resolved != default.resolve() and not (
                resolved.parent == run and resolved.name.startswith("eval-")):
            raise UserError(f"--out {out} is inside the run folder {run_dir}, where evaluate "
                            f"writes only into {default} or another eval-* folder; choose one "
                            f"of those or a folder outside the run")
        if target.exists() and not target.is_dir():
            raise UserError(f"--out {out} is a file; evaluate writes a folder (metrics.json "
                            f"and plots): pass a folder's name")
    report.check_folder(target if target.is_dir() else target.parent, "--out")
    return target


PROGRESS_STEPS = 10  # a progress bar (in a terminal) for predictions of this many batches


def predict_probabilities(model, split: layout_lib.Split, image_size: int, plan: Plan,
                          skip_bad_records: bool = False, tta: int = 1, log=None):
    """Class probabilities [N, C] in the split's file order (padding dropped). `tta`: the mean
    over that many views of every image (see `corolla.tta`), one pass over the split each;
    `log` says which view runs."""
    with plan.inference_scope():
        batch = plan.inference_batch
        # Exact step count: Keras warns when a dataset "runs out" before steps are given.
        steps = -(-split.count // batch)
        verbose = 1 if sys.stdout.isatty() and steps * tta >= PROGRESS_STEPS else 0
        total = None
        for view in range(tta):
            ds = pipeline.eval_dataset(split, image_size, batch,
                                       skip_bad_records=skip_bad_records)
            if tta > 1 and log is not None:
                log(f"test-time augmentation, view {view + 1} of {tta}: "
                    f"{tta_lib.describe(view)}")
            probabilities = model.predict(tta_lib.apply(ds, view, split.count, batch),
                                          steps=steps, verbose=verbose)[: split.count]
            if tta == 1:
                return probabilities
            total = probabilities.astype(np.float64) + (0 if total is None else total)
        return (total / tta).astype(np.float32)


def input_size(model, layout: layout_lib.Layout) -> int:
    """The size `model` takes (its run's model.input_size): the data's images are scaled to it
    as they are decoded, whatever size the data holds."""
    shape = model.input_shape
    return (shape[1] if isinstance(shape, tuple) else None) or layout.image_size


def evaluate(model, layout: layout_lib.Layout, plan: Plan, split: str = "val",
             skip_bad_records: bool = False, tta: int = 1, log=None) -> Evaluation:
    # The checked split counts the records the pipelines yield (less any skipped ones).
    data = check.check_split(layout.split(split), len(layout.class_names), skip_bad_records)
    meta = pipeline.metadata(data, skip_bad_records)
    probabilities = predict_probabilities(model, data, input_size(model, layout), plan,
                                          skip_bad_records, tta=tta, log=log)
    y_true, y_pred = np.asarray(meta["labels"]), probabilities.argmax(axis=1)
    metrics = metrics_lib.classification_metrics(y_true, y_pred, layout.class_names)
    metrics["split"] = split
    metrics["tta"] = tta  # views averaged (1: none)
    return Evaluation(metrics, meta["ids"], y_true, y_pred, probabilities)


def write(evaluation: Evaluation, layout: layout_lib.Layout, out_dir: Path,
          history: Path | None = None, samples: int = 18,
          skip_bad_records: bool = False) -> dict[str, Path]:
    """metrics.json, the confusion matrix, the training curves (from `history`, the run's
    history.csv, if given and present), a grid of sample predictions, and the predictions
    themselves (`corolla.predictions`), from which later steps score without the model."""
    names = layout.class_names
    report.make_folder(out_dir)  # RUN/eval-<data>/ the first time
    matrix, labels = metrics_lib.confusion(evaluation.y_true, evaluation.y_pred)
    written = {
        "predictions": predictions.save(
            predictions.path_in(out_dir, evaluation.metrics["split"]), evaluation.ids,
            evaluation.y_true, evaluation.probabilities, names,
            tta=evaluation.metrics.get("tta", 1)),
        "metrics": report.write_json(evaluation.metrics, out_dir / rundir.METRICS),
        "confusion_matrix": report.plot_confusion_matrix(
            matrix, [names[i] for i in labels], out_dir / rundir.CONFUSION),
    }
    if history is not None and history.is_file():
        curves = report.plot_history(history, out_dir / rundir.CURVES)
        if curves:
            written["curves"] = curves
    # One pass over the split's images serves both grids: the first `samples` images, and the
    # most confident mistakes wherever they are (kept alone, so memory stays small at 512 px).
    mistakes = _most_confident_mistakes(evaluation, samples)
    wanted = set(mistakes.tolist())
    split = layout.split(evaluation.metrics["split"])
    found = {i: e["image"].numpy() for i, e in enumerate(
        pipeline.read(split, layout.image_size, ordered=True,
                      skip_bad_records=skip_bad_records).take(
            max(samples, int(mistakes.max(initial=-1)) + 1)))
        if i < samples or i in wanted}
    shown = [i for i in range(samples) if i in found]  # fewer when the split is smaller
    written["samples"] = report.plot_samples(np.stack([found[i] for i in shown]),
                                             evaluation.y_true[:samples],
                                             evaluation.y_pred[:samples], names,
                                             out_dir / rundir.SAMPLES)
    if len(mistakes):
        confidence = evaluation.probabilities[mistakes, evaluation.y_pred[mistakes]]
        written["mistakes"] = report.plot_samples(
            np.stack([found[i] for i in mistakes]), evaluation.y_true[mistakes],
            evaluation.y_pred[mistakes], names, out_dir / rundir.MISTAKES,
            title="Most confident mistakes", confidence=confidence)
    return written


def _most_confident_mistakes(evaluation: Evaluation, limit: int) -> np.ndarray:
    """Indices of the wrong predictions, most confident first."""
    wrong = np.flatnonzero(evaluation.y_true != evaluation.y_pred)
    confidence = evaluation.probabilities[wrong, evaluation.y_pred[wrong]]
    return wrong[np.argsort(-confidence, kind="stable")][:limit]


def evaluate_run(run_dir, plan: Plan, data_path: str | None = None, model=None, log=print,
                 out: str | Path | None = None, report_skipped: bool = True, tta: int = 1):
    """`corolla evaluate`: loads the run's model (unless given), scores it on val (`tta`: the
    mean of that many views of each image, see `corolla.tta`), writes files into the run
    directory (see `output_dir`) and returns the metrics."""
    tta = tta_lib.check(tta)
    run_dir, config, layout = open_run(run_dir, data_path)
    out_dir = output_dir(run_dir, config, layout, out)
    into_run = out_dir.resolve() == run_dir.resolve()
    if not into_run:
        log(f"scores on {layout.root} go to {out_dir}, not over the run's own metrics")
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names))
    skip = config.data.skip_bad_records
    evaluation = evaluate(model, layout, plan, skip_bad_records=skip, tta=tta, log=log)
    evaluation.metrics["data"] = layout.root
    evaluation.metrics["run"] = str(run_dir.resolve())  # the report of an --out folder finds it
    # Training curves belong with the run's own record, not with scores on other data.
    written = write(evaluation, layout, out_dir,
                    history=run_dir / rundir.HISTORY if into_run else None,
                    skip_bad_records=skip)
    written["report"] = html_report.write(out_dir)  # last: it embeds the pictures just written
    m = evaluation.metrics
    log(f"val: accuracy {m['accuracy']:.4f}  macro F1 {m['f1_macro']:.4f}  "
        f"precision {m['precision_macro']:.4f}  recall {m['recall_macro']:.4f}  "
        f"({m['num_examples']} images, {m['num_classes_present']} classes"
        f"{f', mean of {tta} views' if tta > 1 else ''})")
    for line in report.per_class_table(m["per_class"]):
        log(f"  {line}")
    for path in written.values():
        log(f"wrote {path}")
    if report_skipped:
        for line in check.skipped_summary([layout.split("val")]):
            log(line)
    return m
