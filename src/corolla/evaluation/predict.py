"""Prediction on the unlabelled test split -> the competition's submission.csv."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from corolla import rundir
from corolla.data import check
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.errors import UserError
from corolla.evaluation import predictions
from corolla.evaluation import tta as tta_lib
from corolla.evaluation.inference import (input_size, load_model, open_run, output_dir,
                                          predict_probabilities)
from corolla.report import plots, submission
from corolla.runtime import Plan


@dataclass
class Prediction:
    split: str
    ids: list[str]
    y_pred: np.ndarray
    probabilities: np.ndarray  # [N, C], row i for ids[i]
    tta: int = 1  # views averaged (1: none)


def predict(model, layout: layout_lib.Layout, plan: Plan, split: str = "test",
            skip_bad_records: bool = False, tta: int = 1, log=None) -> Prediction:
    """Ids, predicted labels and class probabilities, in the split's file order (`tta`: the
    mean of that many views of each image, see `corolla.evaluation.tta`)."""
    data = check.check_split(layout.split(split), len(layout.class_names), skip_bad_records)
    ids = pipeline.metadata(data, skip_bad_records)["ids"]
    probabilities = predict_probabilities(model, data, input_size(model, layout), plan,
                                          skip_bad_records, tta=tta, log=log)
    return Prediction(split, ids, probabilities.argmax(axis=1), probabilities, tta)


def output_path(run_dir: Path, out: str | Path | None = None, force: bool = False) -> Path:
    """Where predict writes, checked before a model is loaded (a refusal after the prediction
    would waste it). The run's own submission.csv is refreshed: it is predict's own output.
    Any other file inside the run folder (config, model, history, backup, ...) is refused even
    with `force`: those are the run's record, and nothing rebuilds them. Elsewhere an existing
    file is replaced only with `force`."""
    default = run_dir / rundir.SUBMISSION
    if out is None or Path(out).resolve() == default.resolve():
        plots.check_folder(run_dir, "--out")
        return default
    out, run = Path(out), run_dir.resolve()
    resolved = out.resolve()
    if resolved == run or run in resolved.parents:
        raise UserError(f"--out {out} is inside the run folder {run_dir}, where predict writes "
                        f"only {default} (the default), never over the run's own files, even "
                        f"with --force; choose a path outside the run")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; pass a file name, e.g. "
                        f"{out / rundir.SUBMISSION}")
    if (out.exists() or out.is_symlink()) and not force:
        raise UserError(f"--out {out} already exists; pass --force to overwrite it")
    plots.check_folder(out.parent, "--out")
    return out


def predict_run(run_dir, plan: Plan, data_path: str | None = None, model=None,
                out: str | Path | None = None, log=print, force: bool = False,
                report_skipped: bool = True, tta: int = 1) -> Path:
    """`corolla predict`: writes submission.csv (into the run directory unless `out` is given;
    see `output_path` for what `out` and `force` may replace), checked against the test ids.
    The test predictions are saved where evaluate saves val's (the run, or RUN/eval-<data>/ for
    other data; see `inference.output_dir`), whatever `out` is: they are the run's record of its
    model on that data, which ensembles read. `tta`: the mean of that many views of each
    image (see `corolla.evaluation.tta`), recorded in the saved predictions."""
    tta = tta_lib.check(tta)
    run_dir, config, layout = open_run(run_dir, data_path)
    path = output_path(run_dir, out, force)
    try:
        saved_in = output_dir(run_dir, config, layout)
    except UserError:
        if out is None:
            raise
        saved_in = None  # a run this user may not write into: the submission goes to `out`
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names))
    result = predict(model, layout, plan, skip_bad_records=config.data.skip_bad_records,
                     tta=tta, log=log)
    if saved_in is not None:
        plots.make_folder(saved_in)
        saved = predictions.save(predictions.path_in(saved_in, result.split), result.ids, None,
                                 result.probabilities, layout.class_names, tta=tta)
    log(f"wrote {saved}" if saved_in is not None else
        f"test predictions not saved: cannot write into {run_dir}")
    submission.write(result.ids, result.y_pred, path, num_classes=len(layout.class_names))
    log(f"wrote {path} ({len(result.ids)} test images"
        f"{f', mean of {tta} views' if tta > 1 else ''}; checked)")
    if report_skipped:
        for line in check.skipped_summary([layout.split("test")]):
            log(line)
    return path
