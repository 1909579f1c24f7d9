"""Prediction on the unlabelled test split -> the competition's submission.csv."""

from __future__ import annotations

from pathlib import Path

from corolla import rundir, submission
from corolla.data import check
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.evaluate import load_model, open_run, predict_probabilities
from corolla.runtime import Plan


def predict(model, layout: layout_lib.Layout, plan: Plan, split: str = "test"):
    """(ids, predicted labels) in the split's file order."""
    data = layout.split(split)
    check.check_split(data, len(layout.class_names))
    ids = pipeline.metadata(data)["ids"]
    probabilities = predict_probabilities(model, data, layout.image_size, plan)
    return ids, probabilities.argmax(axis=1)


def predict_run(run_dir, plan: Plan, data_path: str | None = None, model=None,
                out: str | Path | None = None, log=print) -> Path:
    """`corolla predict`: writes submission.csv (into the run directory unless `out` is given)."""
    run_dir, _, layout = open_run(run_dir, data_path)
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names))
    ids, labels = predict(model, layout, plan)
    path = submission.write(ids, labels, out or run_dir / rundir.SUBMISSION)
    log(f"wrote {path} ({len(ids)} test images)")
    return path
