"""The labels to review (`corolla.evaluation.label_review`) as files a person reads: every
doubted image in `label_review.csv` (rank, id, given and suggested class, their
probabilities), the most doubtful ones' thumbnails in `label_review.png` when the images can
be read. report.html shows both."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from corolla.data import pipeline
from corolla.evaluation import label_review
from corolla.evaluation.predictions import Predictions
from corolla.files import write_text_atomic
from corolla.report.plots import image_grid, save_figure
from corolla.runs import paths

SHOWN = 24  # thumbnails in the picture
COLUMNS = ("rank", "id", "given", "suggested", "p_given", "p_suggested")


def write(folder: str | Path, scored: Predictions, layout=None,
          skip_bad_records: bool = False) -> dict[str, Path]:
    """Writes FOLDER/label_review.csv and, with the `layout` the predictions' images come
    from, label_review.png; returns what was written, by kind."""
    folder = Path(folder)
    if not scored.labelled:
        return {}
    doubts = label_review.review(scored)
    names = [n.strip() for n in scored.class_names]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    for rank, d in enumerate(doubts, 1):
        writer.writerow([rank, d.id, names[d.given], names[d.suggested], f"{d.p_given:.4f}",
                         f"{d.p_suggested:.4f}"])
    written = {"label_review": write_text_atomic(folder / paths.LABEL_REVIEW, text.getvalue())}
    stale = folder / paths.LABEL_REVIEW_PICTURE
    if layout is None or not doubts:
        stale.unlink(missing_ok=True)  # a picture of an earlier review would mislead
        return written
    images = _images(layout, {d.id for d in doubts[:SHOWN]}, skip_bad_records)
    shown = [d for d in doubts[:SHOWN] if d.id in images]
    if shown:
        written["label_review_picture"] = _plot(shown, images, names, stale)
    return written


def _images(layout, ids: set[str], skip_bad_records: bool) -> dict[str, np.ndarray]:
    """The images of `ids`, from the labelled splits of `layout` (val first: a run's val
    predictions are there; out-of-fold ones are in train and val); stops once all are found."""
    found = {}
    for name in ("val", "train"):
        if not layout.has_split(name):
            continue
        for example in pipeline.read(layout.split(name), layout.image_size, ordered=True,
                                     skip_bad_records=skip_bad_records):
            example_id = example["id"].numpy().decode(errors="replace")
            if example_id in ids:
                found[example_id] = example["image"].numpy()
                if len(found) == len(ids):
                    return found
    return found


# A title line's characters at fontsize 7 over a 2.3-inch column: longer ones ran into the
# next column's title (a folder's ids are paths; the competition's names run to 26 characters).
TITLE_CHARS = 32


def _fit(text: str, width: int = TITLE_CHARS - 12, keep_end: bool = False) -> str:
    """`text` cut to `width` characters with an ellipsis: its end kept for an id (the file's
    name), its start for a class name."""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1):] if keep_end else text[:width - 1] + "…"


def _plot(doubts, images: dict, names: list[str], path: Path) -> Path:
    columns = 6
    rows = -(-len(doubts) // columns)
    fig, axes = image_grid(rows, columns, (2.3 * columns, 2.6 * rows + 0.6))
    for k, (ax, d) in enumerate(zip(axes.flat, doubts)):
        ax.imshow(np.clip(images[d.id], 0, 255).astype(np.uint8))
        ax.set_title(f"#{k + 1} {_fit(d.id, TITLE_CHARS - 4, keep_end=True)}\n"
                     f"given: {_fit(names[d.given].strip())} {d.p_given:.0%}\n"
                     f"model: {_fit(names[d.suggested].strip())} {d.p_suggested:.0%}",
                     fontsize=7, color="firebrick")
    fig.suptitle("Labels to review: the given class, and the class the model is confident of "
                 "instead (most doubtful first)", fontsize=10)
    return save_figure(fig, path)
