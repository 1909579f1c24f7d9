"""Prediction on the unlabelled test split -> the competition's submission.csv."""

from __future__ import annotations

from pathlib import Path

from corolla import report, rundir, submission
from corolla.data import check
from corolla.data import layout as layout_lib
from corolla.data import pipeline
from corolla.errors import UserError
from corolla.evaluate import load_model, open_run, predict_probabilities
from corolla.runtime import Plan


def predict(model, layout: layout_lib.Layout, plan: Plan, split: str = "test"):
    """(ids, predicted labels) in the split's file order."""
    data = layout.split(split)
    check.check_split(data, len(layout.class_names))
    ids = pipeline.metadata(data)["ids"]
    probabilities = predict_probabilities(model, data, layout.image_size, plan)
    return ids, probabilities.argmax(axis=1)


def output_path(run_dir: Path, out: str | Path | None = None, force: bool = False) -> Path:
    """Where predict writes, checked before a model is loaded (a refusal after the prediction
    would waste it). The run's own submission.csv is refreshed: it is predict's own output.
    Any other file inside the run folder (config, model, history, backup, ...) is refused even
    with `force`: those are the run's record, and nothing rebuilds them. Elsewhere an existing
    file is replaced only with `force`."""
    default = run_dir / rundir.SUBMISSION
    if out is None or Path(out).resolve() == default.resolve():
        report.check_folder(run_dir, "--out")
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
    report.check_folder(out.parent, "--out")
    return out


def predict_run(run_dir, plan: Plan, data_path: str | None = None, model=None,
                out: str | Path | None = None, log=print, force: bool = False) -> Path:
    """`corolla predict`: writes submission.csv (into the run directory unless `out` is given;
    see `output_path` for what `out` and `force` may replace)."""
    run_dir, _, layout = open_run(run_dir, data_path)
    path = output_path(run_dir, out, force)
    model = model if model is not None else load_model(run_dir, plan, len(layout.class_names))
    ids, labels = predict(model, layout, plan)
    submission.write(ids, labels, path)
    log(f"wrote {path} ({len(ids)} test images)")
    return path
