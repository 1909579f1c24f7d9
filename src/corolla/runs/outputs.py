"""Where evaluate and predict may write, decided (and checked) before a model is loaded: a
refusal after the work would waste it, and a run's own record is never written over by scores
on other data."""

from __future__ import annotations

import re
from pathlib import Path

from corolla.errors import UserError
from corolla.files import check_folder
from corolla.runs.paths import EVAL_PREFIX, SUBMISSION


def data_root(path: str) -> str:
    """A data path as a comparable place: the folder above tfrecords-jpeg-SxS/, resolved."""
    path = path.rstrip("/")
    if re.fullmatch(r"tfrecords-jpeg-\d+x\d+", path.rsplit("/", 1)[-1]):
        path = path.rsplit("/", 1)[0]
    return path if "://" in path else str(Path(path).resolve())


def output_dir(run_dir: Path, config, layout, out=None) -> Path:
    """Where evaluation of `run_dir` (its `config`) on the data `layout` writes. Scores on the
    run's own data refresh the run's metrics.json and plots; scores on other data go beside
    them, into RUN/eval-<data folder>/ (or `out`), so that the run keeps the record of its own
    val split.
    Inside a run, `out` may be only that place or another eval-* folder: never the run's own
    files, its backup or its logs."""
    own = bool(config.data.path) and \
        data_root(layout.source or layout.root) == data_root(config.data.path)
    name = data_root(layout.root).rstrip("/").rsplit("/", 1)[-1] or "data"
    default = run_dir if own else run_dir / f"{EVAL_PREFIX}{name}"
    if out is None:
        target = default
    else:
        target, run = Path(out), run_dir.resolve()
        resolved = target.resolve()
        inside = resolved == run or run in resolved.parents
        if inside and resolved != default.resolve() and not (
                resolved.parent == run and resolved.name.startswith(EVAL_PREFIX)):
            raise UserError(f"--out {out} is inside the run folder {run_dir}, where evaluate "
                            f"writes only into {default} or another eval-* folder; choose one "
                            f"of those or a folder outside the run")
        if target.exists() and not target.is_dir():
            raise UserError(f"--out {out} is a file; evaluate writes a folder (metrics.json "
                            f"and plots): pass a folder's name")
    check_folder(target if target.is_dir() else target.parent, "--out")
    return target


def output_path(run_dir: Path, out: str | Path | None = None, force: bool = False) -> Path:
    """Where predict writes, checked before a model is loaded (a refusal after the prediction
    would waste it). The run's own submission.csv is refreshed: it is predict's own output.
    Any other file inside the run folder (config, model, history, backup, ...) is refused even
    with `force`: those are the run's record, and nothing rebuilds them. Elsewhere an existing
    file is replaced only with `force`."""
    default = run_dir / SUBMISSION
    if out is None or Path(out).resolve() == default.resolve():
        check_folder(run_dir, "--out")
        return default
    out, run = Path(out), run_dir.resolve()
    resolved = out.resolve()
    if resolved == run or run in resolved.parents:
        raise UserError(f"--out {out} is inside the run folder {run_dir}, where predict writes "
                        f"only {default} (the default), never over the run's own files, even "
                        f"with --force; choose a path outside the run")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; pass a file name, e.g. "
                        f"{out / SUBMISSION}")
    if (out.exists() or out.is_symlink()) and not force:
        raise UserError(f"--out {out} already exists; pass --force to overwrite it")
    check_folder(out.parent, "--out")
    return out
