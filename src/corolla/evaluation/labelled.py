"""Evaluation on a labelled split: the model's scores as plain data (the files are
`corolla.report.scored`'s to write)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corolla.data import check
from corolla.data.layout import Layout
from corolla.data import pipeline
from corolla.scoring.metrics import classification_metrics
from corolla.scoring.tta import NO_TTA
from corolla.evaluation.inference import input_size
from corolla.scoring.batched import predict_probabilities
from corolla.runtime import Plan


@dataclass
class Evaluation:
    metrics: dict
    ids: list[str]
    y_true: np.ndarray
    y_pred: np.ndarray
    probabilities: np.ndarray


def evaluate(model, layout: Layout, plan: Plan, split: str = "val",
             skip_bad_records: bool = False, tta: int = NO_TTA, log=None) -> Evaluation:
    # The checked split counts the records the pipelines yield (less any skipped ones).
    data = check.check_split(layout.split(split), len(layout.class_names), skip_bad_records)
    meta = pipeline.metadata(data, skip_bad_records)
    size = input_size(model, layout.image_size)
    probabilities = predict_probabilities(model, data, size, plan, skip_bad_records, tta=tta,
                                          log=log)
    y_true, y_pred = np.asarray(meta["labels"]), probabilities.argmax(axis=1)
    metrics = classification_metrics(y_true, y_pred, layout.class_names)
    metrics["split"] = split
    metrics["tta"] = tta  # views averaged (1: none)
    return Evaluation(metrics, meta["ids"], y_true, y_pred, probabilities)


def most_confident_mistakes(evaluation: Evaluation, limit: int) -> np.ndarray:
    """Indices of the wrong predictions, most confident first."""
    wrong = np.flatnonzero(evaluation.y_true != evaluation.y_pred)
    confidence = evaluation.probabilities[wrong, evaluation.y_pred[wrong]]
    return wrong[np.argsort(-confidence, kind="stable")][:limit]
