"""`corolla submit`: a run's checked submission.csv sent to a Kaggle competition."""

from __future__ import annotations


def submit(run, competition: str, message: str) -> None:
    from corolla.report import kaggle

    kaggle.submit_run(run, competition, message)
