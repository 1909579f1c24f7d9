"""`corolla evaluate`: a trained run scored on val (or other data), with its files written by
`report.scored` into the run, or into RUN/eval-<data>/ for other data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from corolla.config.flags import Given
from corolla.errors import UserError
from corolla.evaluation import gradcam, predictions
from corolla.scoring.tta import NO_TTA, check_views
from corolla.files import read_json, write_json
from corolla.runs import paths, rundir, tracking
from corolla.runs.kfold import is_parent
from corolla.runs.outputs import output_dir

if TYPE_CHECKING:  # the module loads Keras: flows import it where they run
    from corolla.evaluation.inference import OpenedRun


def evaluate(run, given: Given = Given(), data: str | None = None,
             out: str | Path | None = None, tta: int = NO_TTA,
             fit_bias: bool = False, log=print) -> dict:
    """`corolla evaluate`: scores the run on val (metrics.json, pictures, predictions,
    report.html); returns the metrics. `tta`: test-time augmentation views (1: none).
    `fit_bias`: then fits per-class offsets for macro F1 on the val predictions (a k-fold
    run: on its out-of-fold ones, without evaluating again) into RUN/bias.json."""
    tta = check_views(tta)  # before the run is opened and a backend picked
    if fit_bias and (data or out):
        raise UserError("--fit-bias fits the offsets on the run's own val split; leave out "
                        "--data and --out")
    run_dir, config = rundir.read(run)
    if fit_bias and is_parent(config):
        fit_offsets(run_dir, paths.OOF, log)
        return rundir_metrics(run_dir)
    from corolla.evaluation.inference import open_run

    opened = open_run(run, given, data_path=data, config=config, log=log)
    try:
        metrics = evaluate_run(opened, log=log, out=out, tta=tta)
        if fit_bias:
            fit_offsets(run_dir, "val", log)
    finally:
        tracking.finish(run_dir, log)  # the run's tracked run, if evaluate_run joined it
    return metrics


def _explainer(model, log):
    """Grad-CAM for the report (explanations.png), or None where the model has no spatial
    feature map to explain."""
    try:
        return gradcam.explainer(model)
    except UserError as e:
        log(f"no explanations.png: {e}")
        return None


def rundir_metrics(run_dir: Path) -> dict:
    return read_json(run_dir / paths.METRICS, f"write it again with `corolla train --resume "
                                              f"{run_dir}`")


def fit_offsets(run_dir: Path, split: str, log=print) -> dict:
    """Fits the per-class offsets for macro F1 on the run's saved `split` predictions
    (`evaluation.bias`), writes RUN/bias.json, and says the held-out figures."""
    from corolla.evaluation import bias

    held = predictions.load(predictions.path_in(run_dir, split))
    if not held.labelled:
        raise UserError(f"{predictions.path_in(run_dir, split)} has no labels to fit on")
    log(f"fitting one offset per class for macro F1 on {len(held)} {split} images ...")
    offsets = bias.fit(held.probabilities, held.labels)
    held_out = bias.cross_fitted(held.probabilities, held.labels)
    record = bias.record(offsets, held.class_names, split, held_out)
    write_json(record, run_dir / paths.BIAS)
    log(f"held-out macro F1 (each half scored with offsets fitted on the other): "
        f"{held_out['argmax']:.4f} argmax -> {held_out['fitted']:.4f} with offsets")
    present = set(held.labels.tolist())
    raised = sorted((b, name) for c, (b, name) in enumerate(zip(offsets, held.class_names))
                    if c in present)[::-1][:3]
    log("largest offsets: " + ", ".join(f"{name.strip()} {b:+.2f}" for b, name in raised))
    log(f"wrote {run_dir / paths.BIAS} (use it: corolla predict {run_dir} --bias fitted)")
    return record


def evaluate_run(opened: OpenedRun, model=None, log=print, out: str | Path | None = None,
                 report_skipped: bool = True, tta: int = NO_TTA):
    """`corolla evaluate` of an opened run on its data: loads the run's model (unless given),
    scores it on val (`tta`, as `evaluate` checked it: the mean of that many views of each
    image, see `corolla.scoring.tta`), writes files into the run directory (see
    `runs.outputs.output_dir`) and returns the metrics."""
    from corolla.data import check
    from corolla.data.folds import WholeLayout
    from corolla.evaluation import labelled
    from corolla.scoring.metrics import f1_text
    from corolla.evaluation.inference import load_model
    from corolla.report import plots, scored

    run_dir, config, layout, plan = opened.folder, opened.config, opened.layout, opened.plan
    out_dir = output_dir(run_dir, config, layout, out)
    into_run = out_dir.resolve() == run_dir.resolve()
    if not into_run:
        scored_split = layout.split("val")
        what = f"all {scored_split.count} labelled images of {layout.source}" \
            if isinstance(layout, WholeLayout) else \
            f"the {scored_split.count} images of the val split of {layout.root}"
        log(f"scores on {what} go to {out_dir}, not over the run's own metrics")
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names),
                                                       config)
    skip = config.data.skip_bad_records
    evaluation = labelled.evaluate(model, layout, plan, skip_bad_records=skip, tta=tta,
                                   log=log)
    evaluation.metrics["data"] = layout.source or layout.root  # the user's, not the cache's
    if layout.source:
        evaluation.metrics["data_converted"] = layout.root
    evaluation.metrics["run"] = str(run_dir.resolve())  # the report of an --out folder finds it
    refit = (run_dir / paths.REFIT).is_file()
    if refit:  # the scores are the validated model's: the refit trained on val
        evaluation.metrics["model"] = f"{paths.MODEL} (validated; {paths.REFIT}, trained " \
            f"again on train + val, predicts the test split)"
    result = predictions.make(evaluation.ids, evaluation.y_true, evaluation.probabilities,
                              layout.class_names, tta=tta)
    # Training curves belong with the run's own record, not with scores on other data.
    written = scored.write(out_dir, evaluation.metrics, result,
                           history=run_dir / paths.HISTORY if into_run else None,
                           layout=layout, skip_bad_records=skip, explain=_explainer(model, log))
    m = evaluation.metrics
    log(f"val: accuracy {m['accuracy']:.4f}  {f1_text(m)}  "
        f"precision {m['precision_macro']:.4f}  recall {m['recall_macro']:.4f}  "
        f"({m['num_examples']} images, {m['num_classes_present']} classes"
        f"{f', mean of {tta} views' if tta > 1 else ''}"
        f"{'; the validated model, before its refit on train + val' if refit else ''})")
    for line in plots.per_class_table(m["per_class"]):
        log(f"  {line}")
    for path in written.values():
        log(f"wrote {path}")
    tracking.send_scored(run_dir, out_dir, m, log)  # a tracked run gets them too
    if report_skipped:
        for line in check.skipped_summary([layout.split("val")]):
            log(line)
    return m
