"""`corolla predict`: a trained run's checked submission.csv for the test split, and the test
predictions saved where evaluate saves val's. (The top classes of anyone's photos, `corolla
predict RUN PATH...`, are `flows.photos`'.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from corolla.config.flags import Given
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.scoring.tta import NO_TTA, check_views
from corolla.files import make_folder
from corolla.report import submission
from corolla.runs import paths, rundir
from corolla.runs.kfold import is_parent
from corolla.runs.outputs import output_dir, output_path

if TYPE_CHECKING:  # the module loads Keras: flows import it where they run
    from corolla.evaluation.inference import OpenedRun

BIAS_CHOICES = ("none", "fitted")  # --bias: argmax, or the offsets of evaluate --fit-bias


def predict(run, given: Given = Given(),
            data: str | None = None, out: str | Path | None = None, force: bool = False,
            tta: int = NO_TTA, bias: str = "none", log=print) -> Path:
    """`corolla predict`: writes the run's checked submission.csv; returns its path. `tta`:
    test-time augmentation views (1: none). `bias`: "fitted" decides with the offsets of
    `corolla evaluate RUN --fit-bias` (a k-fold run: on its averaged test predictions)."""
    tta = check_views(tta)
    check_bias(bias)
    if is_stdout(out):  # the run's checked submission.csv, then its text on stdout
        path = _predict(run, given, data, None, force, tta, bias, to_stderr)
        sys.stdout.write(path.read_text())
        return path
    return _predict(run, given, data, out, force, tta, bias, log)


def _predict(run, given: Given, data, out, force: bool, tta: int, bias: str, log) -> Path:
    """`predict` with its arguments checked."""
    run_dir, config = rundir.read(run)
    if bias == "fitted" and is_parent(config):
        return _parent_with_offsets(run_dir, out, force, log)
    from corolla.evaluation.inference import open_run

    opened = open_run(run, given, data_path=data, config=config, log=log)
    return predict_run(opened, out=out, force=force, log=log, tta=tta, bias=bias)


def is_stdout(out) -> bool:
    """`--out -`: standard output, as `-` means on every command line."""
    return isinstance(out, str) and out == "-"


def to_stderr(*args) -> None:  # the log, when stdout carries the output itself
    print(*args, file=sys.stderr)


def check_bias(bias: str) -> None:
    if bias not in BIAS_CHOICES:
        raise UserError(f"--bias must be one of {', '.join(BIAS_CHOICES)}, got {bias!r}")


def _parent_with_offsets(parent: Path, out, force: bool, log) -> Path:
    """A k-fold run's submission from its averaged test predictions, decided with its
    offsets (fitted on its out-of-fold predictions)."""
    from corolla.evaluation import bias as bias_lib

    test = predictions.load(predictions.path_in(parent, "test"))
    path = output_path(parent, out, force)
    labels = bias_lib.decide(test.probabilities, bias_lib.load_offsets(parent, test.class_names))
    submission.write(test.ids, labels, path, num_classes=len(test.class_names))
    log(f"wrote {path} ({len(test.ids)} test images, the folds' mean, decided with the "
        f"offsets of {parent / paths.BIAS}; checked)")
    return path


def predict_run(opened: OpenedRun, model=None, out: str | Path | None = None, log=print,
                force: bool = False, report_skipped: bool = True, tta: int = NO_TTA,
                bias: str = "none") -> Path:
    """`corolla predict` of an opened run on its data (`tta` and `bias` as `predict` checked
    them): writes submission.csv (into the run directory unless `out` is given; see
    `runs.outputs.output_path` for what `out` and `force` may replace), checked against the
    test ids. The test predictions are saved where evaluate saves val's (the run, or
    RUN/eval-<data>/ for other data; see `runs.outputs.output_dir`), whatever `out` is: they are
    the run's record of its model on that data, which ensembles read. `tta`: the mean of that
    many views of each image (see `corolla.scoring.tta`), recorded in the saved
    predictions. `bias` "fitted": the submission's classes are decided with the run's fitted
    offsets (`corolla.evaluation.bias`); the saved probabilities stay the model's own."""
    from corolla.data import check
    from corolla.evaluation import bias as bias_lib
    from corolla.evaluation import unlabelled
    from corolla.evaluation.inference import load_model, model_path
    from corolla.report import scored

    run_dir, config, layout, plan = opened.folder, opened.config, opened.layout, opened.plan
    offsets = bias_lib.load_offsets(run_dir, layout.class_names) if bias == "fitted" else None
    if layout.source and not layout.has_split("test"):  # an image folder or CSV, converted
        raise UserError(f"the data {layout.source} has no test split to predict: put unlabelled "
                        f"images in a test/ folder beside train/ (or rows with split = test in "
                        f"the CSV) and train a new run, or pass --data with data that has one")
    path = output_path(run_dir, out, force, config=config)
    try:
        saved_in = output_dir(run_dir, config, layout)
    except UserError:
        if out is None:
            raise
        saved_in = None  # a run this user may not write into: the submission goes to `out`
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names),
                                                       config, final=True)
    result = unlabelled.predict(model, layout, plan,
                                skip_bad_records=config.data.skip_bad_records, tta=tta, log=log)
    if saved_in is not None:
        make_folder(saved_in)
        saved = scored.save_predictions(paths.predictions_file(saved_in, result.split),
                                        result.ids, None, result.probabilities,
                                        layout.class_names, tta=tta)
    log(f"wrote {saved}" if saved_in is not None else
        f"test predictions not saved: cannot write into {run_dir}")
    y_pred = result.y_pred if offsets is None else bias_lib.decide(result.probabilities, offsets)
    submission.write(result.ids, y_pred, path, num_classes=len(layout.class_names))
    by_refit = model_path(run_dir, final=True).name == paths.REFIT
    log(f"wrote {path} ({len(result.ids)} test images"
        f"{', by the refit on train + val' if by_refit else ''}"
        f"{f', mean of {tta} views' if tta > 1 else ''}"
        f"{'; decided with the fitted offsets' if offsets is not None else ''}; checked)")
    if report_skipped:
        for line in check.skipped_summary([layout.split("test")]):
            log(line)
    return path
