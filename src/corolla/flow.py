"""The whole run as `corolla train` does it: train, then (on the chief) evaluate on val and,
when the data has a test split, write submission.csv."""

from __future__ import annotations

from pathlib import Path

from corolla import config as config_lib
from corolla import evaluate, predict, train
from corolla.runtime import Plan


def train_evaluate_predict(config: config_lib.RunConfig, plan: Plan, log=print,
                           resume: Path | None = None) -> tuple[Path | None, dict | None]:
    """Returns (run directory, val metrics); (None, None) on a worker that is not the chief.
    `resume`: an interrupted run directory to continue (see `train.run`)."""
    result = train.run(config, plan, log=log, resume=resume)
    if not plan.is_chief:
        return None, None
    # Single process: the trained model is used as it is. Several processes: the chief reloads
    # the saved model to run alone, outside the collective strategy.
    model = None if plan.multi_worker else result.model
    metrics = evaluate.evaluate_run(result.run_dir, plan, model=model, log=log)
    _, _, layout = evaluate.open_run(result.run_dir)
    if layout.has_split("test"):
        predict.predict_run(result.run_dir, plan, model=model, log=log)
    else:
        log(f"no test split in {layout.size_dir}: no submission.csv written")
    return result.run_dir, metrics
