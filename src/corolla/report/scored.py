"""The one writer of a scored folder: a run, an eval-* folder, an ensemble or a k-fold parent
all get the same files from their scores.

    predictions/<split>.npz (and test.npz)   the probabilities, `corolla.evaluation.predictions`
    metrics.json  confusion_matrix.png       the scores of the labelled split
    training_curves.png                      from the run's history.csv, when it has one
    sample_predictions.png                   when the images can be read: the first ones, and
    confident_mistakes.png                   the wrong predictions the model was surest of
    label_review.csv  label_review.png       labels the model doubts (`report.label_review`)
    submission.csv                           from the test predictions, checked (when asked)
    report.html                              last: it embeds the pictures just written
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from corolla.data import pipeline
from corolla.scoring.metrics import confusion_table
from corolla.scoring.tta import NO_TTA
from corolla.evaluation.labelled import Evaluation, most_confident_mistakes
from corolla.evaluation.predictions import Predictions, make
from corolla.files import atomic_path, make_folder, write_json
from corolla.report import html as html_report
from corolla.report import label_review, plots, submission
from corolla.runs import paths

SAMPLES = 18  # images in the sample grid, and at most in the grid of mistakes
EXPLAINED = 6  # of each, explained in explanations.png


def save_predictions(path: str | Path, ids, labels, probabilities, class_names,
                     tta: int = NO_TTA) -> Path:
    """Writes one split's predictions (see `corolla.evaluation.predictions` for the format),
    atomically: a reader gets the old file or the new one. Arrays that are not one split's
    predictions are a bug of the caller (ValueError), refused before anything is written."""
    p = make(ids, labels, probabilities, class_names, tta)
    path = Path(path)
    make_folder(path.parent, own=True)
    # np.savez appends ".npz" to a name that lacks it, and would miss the temporary file:
    # it is given the open file instead.
    with atomic_path(path) as tmp, tmp.open("wb") as f:
        np.savez(f, ids=np.array(p.ids, dtype=str), labels=p.labels,
                 probabilities=p.probabilities, class_names=np.array(p.class_names, dtype=str),
                 tta=np.int64(p.tta))
    return path


def write(folder: str | Path, metrics: dict, scored: Predictions, *,
          test: Predictions | None = None, write_submission: bool = False,
          history: Path | None = None, layout=None, skip_bad_records: bool = False,
          title: str | None = None, review_layout=None, explain=None) -> dict[str, Path]:
    """Writes the folder's files (see the module) from `metrics` (metrics["split"] names the
    labelled split `scored` holds: val, or oof for a k-fold parent). `test`: the test
    predictions, saved, and with `write_submission` also submission.csv. `history`: the run's
    history.csv for the curves; `layout`: the data the scored split came from, to show its
    images; `review_layout`: where the images of the labels to review are, when `layout` is
    not given (a k-fold parent's out-of-fold predictions); `explain`: with it,
    explanations.png (`evaluation.gradcam.explainer`'s callable). Returns what was written, by
    kind."""
    folder = make_folder(folder)  # RUN/eval-<data>/ the first time
    names = scored.class_names
    written = {"predictions": save_predictions(
        paths.predictions_file(folder, metrics["split"]), scored.ids, scored.labels,
        scored.probabilities, names, tta=scored.tta)}
    if test is not None:
        written["test_predictions"] = save_predictions(
            paths.predictions_file(folder, "test"), test.ids, None, test.probabilities, names,
            tta=test.tta)
    written["metrics"] = write_json(metrics, folder / paths.METRICS)
    matrix, labels = confusion_table(scored.labels, scored.predicted)
    written["confusion_matrix"] = plots.plot_confusion_matrix(
        matrix, [names[i] for i in labels], folder / paths.CONFUSION,
        **({"title": title} if title else {}))
    if history is not None and history.is_file():
        curves = plots.plot_history(history, folder / paths.CURVES)
        if curves:
            written["curves"] = curves
    if layout is not None:
        written.update(_pictures(metrics, scored, layout, folder, skip_bad_records, explain))
    written.update(label_review.write(folder, scored, layout or review_layout,
                                      skip_bad_records))
    if test is not None and write_submission:
        written["submission"] = submission.write(test.ids, test.predicted,
                                                 folder / paths.SUBMISSION,
                                                 num_classes=len(names))
    written["report"] = html_report.write(folder)  # last: it embeds the pictures just written
    return written


def _pictures(metrics: dict, scored: Predictions, layout, folder: Path,
              skip_bad_records: bool, explain=None) -> dict[str, Path]:
    """The grid of the first images and the grid of the most confident mistakes, from one pass
    over the split's images (the mistakes kept alone, so memory stays small at 512 px)."""
    evaluation = Evaluation(metrics, list(scored.ids), scored.labels, scored.predicted,
                            scored.probabilities)
    names, written = scored.class_names, {}
    mistakes = most_confident_mistakes(evaluation, SAMPLES)
    wanted = set(mistakes.tolist())
    split = layout.split(metrics["split"])
    found = {i: e["image"].numpy() for i, e in enumerate(
        pipeline.read(split, layout.image_size, ordered=True,
                      skip_bad_records=skip_bad_records).take(
            max(SAMPLES, int(mistakes.max(initial=-1)) + 1)))
        if i < SAMPLES or i in wanted}
    shown = [i for i in range(SAMPLES) if i in found]  # fewer when the split is smaller
    written["samples"] = plots.plot_samples(np.stack([found[i] for i in shown]),
                                            evaluation.y_true[:SAMPLES],
                                            evaluation.y_pred[:SAMPLES], names,
                                            folder / paths.SAMPLES)
    if len(mistakes):
        confidence = evaluation.probabilities[mistakes, evaluation.y_pred[mistakes]]
        written["mistakes"] = plots.plot_samples(
            np.stack([found[i] for i in mistakes]), evaluation.y_true[mistakes],
            evaluation.y_pred[mistakes], names, folder / paths.MISTAKES,
            title="Most confident mistakes", confidence=confidence)
    if explain is not None:
        chosen = shown[:EXPLAINED] + [i for i in mistakes[:EXPLAINED].tolist()]
        maps, _, _ = explain(np.stack([found[i] for i in chosen]),
                             evaluation.y_pred[chosen])
        titles = [names[evaluation.y_pred[i]].strip() + (
            "" if evaluation.y_pred[i] == evaluation.y_true[i] else
            f" (true: {names[evaluation.y_true[i]].strip()})") for i in chosen]
        written["explanations"] = plots.plot_explanations(
            np.stack([found[i] for i in chosen]), maps, titles, folder / paths.EXPLANATIONS,
            title=f"Grad-CAM of the predicted class: the first {min(len(shown), EXPLAINED)} "
                  f"images, then the {min(len(mistakes), EXPLAINED)} most confident mistakes",
            wrong=[evaluation.y_pred[i] != evaluation.y_true[i] for i in chosen])
    return written
