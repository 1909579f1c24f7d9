"""Evaluation on the labelled validation split: returns plain data; `write` makes the files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla import rundir
from corolla.data import check
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.evaluation import metrics as metrics_lib
from corolla.evaluation import predictions
from corolla.evaluation import tta as tta_lib
from corolla.evaluation.inference import (input_size, load_model, open_run, output_dir,
                                          predict_probabilities)
from corolla.report import html as html_report
from corolla.report import plots
from corolla.runtime import Plan


@dataclass
class Evaluation:
    metrics: dict
    ids: list[str]
    y_true: np.ndarray
    y_pred: np.ndarray
    probabilities: np.ndarray


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
    themselves (`corolla.evaluation.predictions`), from which later steps score without the
    model."""
    names = layout.class_names
    plots.make_folder(out_dir)  # RUN/eval-<data>/ the first time
    matrix, labels = metrics_lib.confusion(evaluation.y_true, evaluation.y_pred)
    written = {
        "predictions": predictions.save(
            predictions.path_in(out_dir, evaluation.metrics["split"]), evaluation.ids,
            evaluation.y_true, evaluation.probabilities, names,
            tta=evaluation.metrics.get("tta", 1)),
        "metrics": plots.write_json(evaluation.metrics, out_dir / rundir.METRICS),
        "confusion_matrix": plots.plot_confusion_matrix(
            matrix, [names[i] for i in labels], out_dir / rundir.CONFUSION),
    }
    if history is not None and history.is_file():
        curves = plots.plot_history(history, out_dir / rundir.CURVES)
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
    written["samples"] = plots.plot_samples(np.stack([found[i] for i in shown]),
                                            evaluation.y_true[:samples],
                                            evaluation.y_pred[:samples], names,
                                            out_dir / rundir.SAMPLES)
    if len(mistakes):
        confidence = evaluation.probabilities[mistakes, evaluation.y_pred[mistakes]]
        written["mistakes"] = plots.plot_samples(
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
    mean of that many views of each image, see `corolla.evaluation.tta`), writes files into the
    run directory (see `inference.output_dir`) and returns the metrics."""
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
    for line in plots.per_class_table(m["per_class"]):
        log(f"  {line}")
    for path in written.values():
        log(f"wrote {path}")
    if report_skipped:
        for line in check.skipped_summary([layout.split("val")]):
            log(line)
    return m
