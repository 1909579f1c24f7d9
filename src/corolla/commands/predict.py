"""`corolla predict`: a trained run's checked submission.csv for the test split, and the test
predictions saved where evaluate saves val's."""

from __future__ import annotations

from pathlib import Path

from corolla.commands.evaluate import inference_plan
from corolla.data import check
from corolla.errors import UserError
from corolla.evaluation import predict as predict_lib
from corolla.evaluation import tta as tta_lib
from corolla.evaluation.inference import load_model, open_run
from corolla.files import make_folder
from corolla.report import scored, submission
from corolla.runs import paths
from corolla.runs.outputs import output_dir, output_path
from corolla.runtime import Plan


def predict(run, flags: dict | None = None, names: dict | None = None,
            data: str | None = None, out: str | Path | None = None, force: bool = False,
            tta: int = 1, log=print) -> Path:
    """`corolla predict`: writes the run's checked submission.csv; returns its path. `tta`:
    test-time augmentation views (1: none)."""
    tta_lib.check(tta)
    plan = inference_plan(run, flags, names)
    return predict_run(run, plan, data_path=data, out=out, force=force, log=log, tta=tta)


def predict_run(run_dir, plan: Plan, data_path: str | None = None, model=None,
                out: str | Path | None = None, log=print, force: bool = False,
                report_skipped: bool = True, tta: int = 1) -> Path:
    """`corolla predict`: writes submission.csv (into the run directory unless `out` is given;
    see `runs.outputs.output_path` for what `out` and `force` may replace), checked against the
    test ids. The test predictions are saved where evaluate saves val's (the run, or
    RUN/eval-<data>/ for other data; see `runs.outputs.output_dir`), whatever `out` is: they are
    the run's record of its model on that data, which ensembles read. `tta`: the mean of that
    many views of each image (see `corolla.evaluation.tta`), recorded in the saved
    predictions."""
    tta = tta_lib.check(tta)
    run_dir, config, layout = open_run(run_dir, data_path, log)
    if layout.source and not layout.has_split("test"):  # an image folder or CSV, converted
        raise UserError(f"the data {layout.source} has no test split to predict: put unlabelled "
                        f"images in a test/ folder beside train/ (or rows with split = test in "
                        f"the CSV) and train a new run, or pass --data with data that has one")
    path = output_path(run_dir, out, force)
    try:
        saved_in = output_dir(run_dir, config, layout)
    except UserError:
        if out is None:
            raise
        saved_in = None  # a run this user may not write into: the submission goes to `out`
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names))
    result = predict_lib.predict(model, layout, plan,
                                 skip_bad_records=config.data.skip_bad_records, tta=tta, log=log)
    if saved_in is not None:
        make_folder(saved_in)
        saved = scored.save_predictions(paths.predictions_file(saved_in, result.split),
                                        result.ids, None, result.probabilities,
                                        layout.class_names, tta=tta)
    log(f"wrote {saved}" if saved_in is not None else
        f"test predictions not saved: cannot write into {run_dir}")
    submission.write(result.ids, result.y_pred, path, num_classes=len(layout.class_names))
    log(f"wrote {path} ({len(result.ids)} test images"
        f"{f', mean of {tta} views' if tta > 1 else ''}; checked)")
    if report_skipped:
        for line in check.skipped_summary([layout.split("test")]):
            log(line)
    return path
