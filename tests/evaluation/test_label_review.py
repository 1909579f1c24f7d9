"""Labels that look wrong: the review ranks the labels a model doubts most (the most likely
flipped first), writes them as a CSV and thumbnails, and shows them in the report."""

from __future__ import annotations

import numpy as np

from corolla.evaluation import label_review, predictions
from corolla.runs import paths


def _noisy_predictions(n: int = 1000, classes: int = 5, flip: float = 0.05, seed: int = 0):
    """A model's probabilities for images whose true class it mostly knows, with `flip` of
    the labels changed to another class. Returns (predictions, indices flipped)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, classes, n)
    logits = rng.normal(0, 1.2, (n, classes))
    logits[np.arange(n), truth] += 4.0
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    flipped = rng.choice(n, int(flip * n), replace=False)
    labels = truth.copy()
    labels[flipped] = (truth[flipped] + rng.integers(1, classes, len(flipped))) % classes
    return predictions.make([f"img{i:04d}" for i in range(n)], labels, probabilities,
                            [f"c{k}" for k in range(classes)]), set(flipped.tolist()), truth


def test_label_review_ranks_most_flipped_labels_first():
    scored, flipped, truth = _noisy_predictions()
    doubts = label_review.review(scored)
    top = [d.index for d in doubts[:len(flipped)]]
    assert len(set(top) & flipped) >= 0.9 * len(flipped)  # precision at 50
    assert {d.index for d in doubts[:20]} <= flipped  # the first ones are all flipped
    assert all(d.suggested == truth[d.index] for d in doubts[:20])  # and the right class said
    margins = [d.margin for d in doubts]
    assert margins == sorted(margins, reverse=True)


def test_label_review_files_and_report_section(tiny_petals, tmp_path):
    """The CSV and the thumbnails of the doubted images, from a run's val predictions."""
    from corolla.data import layout as layout_lib
    from corolla.data import pipeline
    from corolla.report import html as html_report
    from corolla.report import label_review as review_files

    data = layout_lib.open_layout(str(tiny_petals))
    examples = [(e["id"].numpy().decode(), int(e["label"].numpy())) for e in
                pipeline.read(data.split("val"), data.image_size, ordered=True)]
    ids, labels = zip(*examples)
    c = len(data.class_names)
    probabilities = np.full((len(ids), c), 0.02)
    probabilities[np.arange(len(ids)), labels] = 0.9
    wrong = [3, 11]  # the model is sure of another class than the label
    for i in wrong:
        probabilities[i] = 0.02
        probabilities[i, (labels[i] + 1) % c] = 0.95
    scored = predictions.make(ids, labels, probabilities, data.class_names)
    written = review_files.write(tmp_path, scored, data)
    rows = (tmp_path / paths.LABEL_REVIEW).read_text().splitlines()
    assert rows[0] == "rank,id,given,suggested,p_given,p_suggested"
    assert [r.split(",")[1] for r in rows[1:]] == [ids[3], ids[11]]
    assert written["label_review_picture"].is_file()
    section = html_report._label_review(html_report.Sources(tmp_path, "evaluation", {}, None))
    assert "<h2>Labels to review</h2>" in section and ids[11] in section


def test_label_review_titles_are_cut_to_their_column():
    """Long ids (a folder's paths) and names ran into the next column's title."""
    from corolla.report import label_review as review_files

    long_id = "train/hard-leaved pocket orchid/IMG_20231012_123456.jpg"
    cut = review_files._fit(long_id, review_files.TITLE_CHARS - 4, keep_end=True)
    assert len(cut) == review_files.TITLE_CHARS - 4 and cut.endswith("123456.jpg")
    assert cut.startswith("…")
    name = review_files._fit("hard-leaved pocket orchid")
    assert len(name) <= review_files.TITLE_CHARS - 12 and name.startswith("hard-leaved")
    assert review_files._fit("daisy") == "daisy"
