"""One run end to end, as `corolla train` and `corolla demo` do it: train, then (on the chief)
evaluate on val and, when the data has a test split, write submission.csv; FINISHED is written
last."""

from __future__ import annotations

from pathlib import Path

from corolla.config import RunConfig
from corolla import training
from corolla.flows.evaluate import evaluate_run
from corolla.flows.predict import predict_run
from corolla.data import check
from corolla.evaluation import inference
from corolla.files import read_json
from corolla.report import plots
from corolla.runs import paths, rundir, tracking
from corolla.runtime import Plan, collective
from corolla.training import refit, saving


def train_evaluate_predict(config: RunConfig, plan: Plan, log=print,
                           resume: Path | None = None,
                           lr_find=None, began: float | None = None
                           ) -> tuple[Path | None, dict | None]:
    """Returns (run directory, val metrics); (None, None) on a worker that is not the chief.
    `resume`: an unfinished run directory to continue (see `training.run`): from its last
    completed epoch, or, if it was killed after its training, from its evaluation. `lr_find`:
    the range test's settings, for a new run whose rate is found first (`training.run`).
    `began`: when the command started, where its time budget counts from (`training.run`)."""
    if resume is not None and rundir.status(resume) == rundir.TRAINED:
        if not plan.is_chief:
            collective.wait_for_each_other(plan)  # until the chief is done (see there)
            return None, None
        run_dir, model, refits = Path(resume), None, config.train.refit == "on"
        refit_deadline = None  # a refit's time plan holds only in the session that made it
        rundir.claim(run_dir, log)
        log(f"{run_dir} finished training before it stopped: evaluating and predicting")
    else:
        result = training.run(config, plan, log=log, resume=resume, lr_find=lr_find,
                              began=began)
        if not plan.is_chief:
            collective.wait_for_each_other(plan)
            return None, None
        # Single process: the trained model is used as it is. Several processes: the chief
        # reloads the saved model to run alone, outside the collective strategy.
        run_dir, model = result.run_dir, None if plan.multi_worker else result.model
        refits = result.refit  # "auto" decided: the run's own config says, not `config`
        refit_deadline = result.refit_deadline
    try:
        # A Ctrl-C raises `Interrupted`, whose message says how to finish the run (it is
        # trained); the tracked run ends KILLED (FAILED on an error) here.
        with tracking.ended_on_error(run_dir, log):
            read = None  # the run's config, where read here (evaluation reads it once)
            written = (run_dir / paths.REFIT).is_file()
            if not written and (run_dir / paths.LINEAR_HEAD_ALL).is_file() and \
                    refit.kept_linear_head(run_dir):
                # A kept head's refit, or what a run without one predicts: fit on train + val
                # when the head was, from the features at hand (seconds, nothing extracted).
                read = rundir.load(run_dir)[1]
                saving.head_refit(run_dir, plan, read, log, inference.load_model)
            elif not written and refits:  # (continued, where a kill stopped it)
                refit.train(run_dir, plan, log, refit_deadline)
            return run_dir, _evaluate_predict(run_dir, plan, model, log, read)
    finally:
        rundir.release(run_dir)
        collective.wait_for_each_other(plan)  # the others may leave now, failed or not


def draw_lr_find(run_dir: Path) -> None:
    """The picture of the run's range test (`--lr find`), from its lr_find.json, once."""
    record, picture = run_dir / paths.LR_FIND, run_dir / paths.LR_FIND_PICTURE
    if record.is_file() and not picture.is_file():
        plots.plot_lr_find(read_json(record, "train a new run"), picture)


def _evaluate_predict(run_dir: Path, plan: Plan, model, log, config=None) -> dict:
    """Scores the trained run on val, predicts its test split, writes FINISHED last; returns the
    val metrics. `config`: the run's, where the caller has read it."""
    draw_lr_find(run_dir)
    opened = inference.open_run(run_dir, plan=plan, log=log, config=config)  # once, for both
    layout = opened.layout
    metrics = evaluate_run(opened, model=model, log=log, report_skipped=False)
    if layout.has_split("test"):  # with the refit where the run has one
        predict_run(opened, model=None if (run_dir / paths.REFIT).is_file() else model,
                    log=log, report_skipped=False)
    else:
        # (the data as the user named it, not the converted cache it was read from)
        log(f"no test split in {layout.source}: no submission.csv written; predict "
            f"new photos with `corolla predict {run_dir} PHOTOS`")
    # Damaged records skipped (data.skip_bad_records): one line per file, at the end.
    for line in check.skipped_summary([layout.split(name) for name in
                                       ("train", "val", "test") if layout.has_split(name)]):
        log(line)
    rundir.mark_finished(run_dir)
    return metrics
