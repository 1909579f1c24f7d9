"""Prediction on the unlabelled test split: ids, classes and probabilities as plain data (the
submission is `corolla.report.submission`'s to write)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corolla.data import check
from corolla.data.layout import Layout
from corolla.data import pipeline
from corolla.scoring.tta import NO_TTA
from corolla.evaluation.inference import input_size
from corolla.scoring.batched import predict_probabilities
from corolla.runtime import Plan


@dataclass
class Prediction:
    split: str
    ids: list[str]
    y_pred: np.ndarray
    probabilities: np.ndarray  # [N, C], row i for ids[i]
    tta: int = NO_TTA  # views averaged (1: none)


def predict(model, layout: Layout, plan: Plan, split: str = "test",
            skip_bad_records: bool = False, tta: int = NO_TTA, log=None) -> Prediction:
    """Ids, predicted labels and class probabilities, in the split's file order (`tta`: the
    mean of that many views of each image, see `corolla.scoring.tta`)."""
    data = check.check_split(layout.split(split), len(layout.class_names), skip_bad_records)
    ids = pipeline.metadata(data, skip_bad_records)["ids"]
    size = input_size(model, layout.image_size)
    probabilities = predict_probabilities(model, data, size, plan, skip_bad_records, tta=tta,
                                          log=log)
    return Prediction(split, ids, probabilities.argmax(axis=1), probabilities, tta)
