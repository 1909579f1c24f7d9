"""One run end to end, as `corolla train` and `corolla demo` do it: train, then (on the chief)
evaluate on val and, when the data has a test split, write submission.csv; FINISHED is written
last."""

from __future__ import annotations

from pathlib import Path

from corolla import config as config_lib
from corolla import training
from corolla.commands.evaluate import evaluate_run
from corolla.commands.predict import predict_run
from corolla.data import check
from corolla.errors import Interrupted
from corolla.evaluation import inference
from corolla.runs import rundir, tracking
from corolla.runtime import Plan, collective


def train_evaluate_predict(config: config_lib.RunConfig, plan: Plan, log=print,
                           resume: Path | None = None) -> tuple[Path | None, dict | None]:
    """Returns (run directory, val metrics); (None, None) on a worker that is not the chief.
    `resume`: an unfinished run directory to continue (see `training.run`): from its last
    completed epoch, or, if it was killed after its training, from its evaluation."""
    if resume is not None and rundir.status(resume) == rundir.TRAINED:
        if not plan.is_chief:
            collective.wait_for_each_other(plan)  # until the chief is done (see there)
            return None, None
        run_dir, model = Path(resume), None
        rundir.claim(run_dir, log)
        log(f"{run_dir} finished training before it stopped: evaluating and predicting")
    else:
        result = training.run(config, plan, log=log, resume=resume)
        if not plan.is_chief:
            collective.wait_for_each_other(plan)
            return None, None
        # Single process: the trained model is used as it is. Several processes: the chief
        # reloads the saved model to run alone, outside the collective strategy.
        run_dir, model = result.run_dir, None if plan.multi_worker else result.model
    try:
        return run_dir, _evaluate_predict(run_dir, plan, model, log)
    except KeyboardInterrupt:  # say how to finish the run: it is trained
        tracking.finish(run_dir, log, status="KILLED")
        raise Interrupted(run_dir) from None
    except BaseException:
        tracking.finish(run_dir, log, status="FAILED")
        raise
    finally:
        rundir.release(run_dir)
        collective.wait_for_each_other(plan)  # the others may leave now, failed or not


def _evaluate_predict(run_dir: Path, plan: Plan, model, log) -> dict:
    """Scores the trained run on val, predicts its test split, writes FINISHED last; returns the
    val metrics."""
    opened = inference.open_run(run_dir, plan=plan, log=log)  # once, for both
    layout = opened.layout
    metrics = evaluate_run(opened, model=model, log=log, report_skipped=False)
    if layout.has_split("test"):
        predict_run(opened, model=model, log=log, report_skipped=False)
    else:
        log(f"no test split in {layout.size_dir}: no submission.csv written")
    # Damaged records skipped (data.skip_bad_records): one line per file, at the end.
    for line in check.skipped_summary([layout.split(name) for name in
                                       ("train", "val", "test") if layout.has_split(name)]):
        log(line)
    rundir.mark_finished(run_dir)
    return metrics
