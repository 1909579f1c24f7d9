"""Evaluation on the labelled validation split: returns plain data; `write` makes the files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla import metrics as metrics_lib
from corolla import report, rundir
from corolla.data import check
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
            raise
    if model.output_shape[-1] != num_classes:
        raise UserError(f"{run_dir / rundir.MODEL} outputs {model.output_shape[-1]} classes but "
                        f"the run names {num_classes}; it is not this run's model")
    return model


def open_run(run_dir, data_path: str | None = None):
    """(run folder, its config, its data layout at the trained image size). The run's own
    class names win: data that names other classes would pair outputs with wrong labels."""
    run_dir, config = rundir.load(run_dir)
    layout = layout_lib.open_layout(data_path or config.data.path, config.data.image_size)
    saved = rundir.class_names(run_dir)
    if saved is not None and saved != layout.class_names:
        raise UserError(f"the data at {layout.root} names {len(layout.class_names)} classes, "
                        f"not the {len(saved)} this run was trained on "
                        f"({run_dir / rundir.CLASSES}); pass --data with the run's data set")
    return run_dir, config, layout


def predict_probabilities(model, split: layout_lib.Split, image_size: int, plan: Plan):
    """Class probabilities [N, C] in the split's file order (padding dropped)."""
    with plan.inference_scope():
        batch = plan.inference_batch
        ds = pipeline.eval_dataset(split, image_size, batch)
        # Exact step count: Keras warns when a dataset "runs out" before steps are given.
        return model.predict(ds, steps=-(-split.count // batch), verbose=0)[: split.count]


def evaluate(model, layout: layout_lib.Layout, plan: Plan, split: str = "val") -> Evaluation:
    data = layout.split(split)
    check.check_split(data, len(layout.class_names))
    meta = pipeline.metadata(data)
    probabilities = predict_probabilities(model, data, layout.image_size, plan)
    y_true, y_pred = np.asarray(meta["labels"]), probabilities.argmax(axis=1)
    metrics = metrics_lib.classification_metrics(y_true, y_pred, layout.class_names)
    metrics["split"] = split
    return Evaluation(metrics, meta["ids"], y_true, y_pred, probabilities)


def write(evaluation: Evaluation, layout: layout_lib.Layout, out_dir: Path,
          samples: int = 18) -> dict[str, Path]:
    """metrics.json, the confusion matrix, the training curves (if a history exists) and a grid
    of sample predictions."""
    names = layout.class_names
    matrix, labels = metrics_lib.confusion(evaluation.y_true, evaluation.y_pred)
    written = {
        "metrics": report.write_json(evaluation.metrics, out_dir / rundir.METRICS),
        "confusion_matrix": report.plot_confusion_matrix(
            matrix, [names[i] for i in labels], out_dir / rundir.CONFUSION),
    }
    if (out_dir / rundir.HISTORY).is_file():
        curves = report.plot_history(out_dir / rundir.HISTORY, out_dir / rundir.CURVES)
        if curves:
            written["curves"] = curves
    split = layout.split(evaluation.metrics["split"])
    images = np.stack([e["image"].numpy() for e in
                       pipeline.read(split, layout.image_size, ordered=True).take(samples)])
    written["samples"] = report.plot_samples(images, evaluation.y_true[:samples],
                                             evaluation.y_pred[:samples], names,
                                             out_dir / rundir.SAMPLES)
    return written


def evaluate_run(run_dir, plan: Plan, data_path: str | None = None, model=None, log=print):
    """`corolla evaluate`: loads the run's model (unless given), scores it on val, writes files
    into the run directory and returns the metrics."""
    run_dir, _, layout = open_run(run_dir, data_path)
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names))
    evaluation = evaluate(model, layout, plan)
    written = write(evaluation, layout, run_dir)
    m = evaluation.metrics
    log(f"val: accuracy {m['accuracy']:.4f}  macro F1 {m['f1_macro']:.4f}  "
        f"precision {m['precision_macro']:.4f}  recall {m['recall_macro']:.4f}  "
        f"({m['num_examples']} images, {m['num_classes_present']} classes)")
    for path in written.values():
        log(f"wrote {path}")
    return m
