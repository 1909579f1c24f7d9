"""Where evaluate and predict may write, decided (and checked) before a model is loaded: a
refusal after the work would waste it, and a run's own record is never written over by scores
on other data."""

from __future__ import annotations

import os
import re
from pathlib import Path

from corolla.errors import UserError
from corolla.files import check_folder, is_image_file, is_remote
from corolla.runs.paths import CONFIG, EVAL_PREFIX, METRICS, MODEL, SUBMISSION

# What makes a folder a run's record (a run, a k-fold parent, an ensemble, an eval-* folder):
# Corolla writes into no such folder but the one of the run in use, and there only where the
# command's own files go.
RUN_MARKS = (CONFIG, METRICS, MODEL)
LOOK = 500  # entries of a folder looked at for images (a data set shows them early)
LAYOUT = re.compile(r"tfrecords-jpeg-\d+x\d+")  # a competition layout's size folder


def data_root(path: str) -> str:
    """A data path as a comparable place: the folder above tfrecords-jpeg-SxS/, resolved."""
    path = path.rstrip("/")
    if LAYOUT.fullmatch(path.rsplit("/", 1)[-1]):
        path = path.rsplit("/", 1)[0]
    return path if is_remote(path) else str(Path(path).resolve())


def output_dir(run_dir: Path, config, layout, out=None) -> Path:
    """Where evaluation of `run_dir` (its `config`) on the data `layout` writes. Scores on the
    run's own data refresh the run's metrics.json and plots; scores on other data go beside
    them, into RUN/eval-<data folder>/ (or `out`), so that the run keeps the record of its own
    val split.
    Inside a run, `out` may be only that place or another eval-* folder: never the run's own
    files, its backup or its logs."""
    own = bool(config.data.path) and \
        data_root(layout.source or layout.root) == data_root(config.data.path)
    # Named after the data the user gave (a folder, a CSV), not its conversion in the cache.
    name = Path(data_root(layout.source or layout.root).rstrip("/").rsplit("/", 1)[-1]).stem \
        or "data"
    default = run_dir if own else run_dir / f"{EVAL_PREFIX}{name}"
    if out is None:
        target = default
    else:
        target, run = Path(out), run_dir.resolve()
        resolved = target.resolve()
        if inside(resolved, run):
            if resolved != default.resolve() and not (
                    resolved.parent == run and resolved.name.startswith(EVAL_PREFIX)):
                raise UserError(f"--out {out} is inside the run folder {run_dir}, where "
                                f"evaluate writes only into {default} or another eval-* "
                                f"folder; choose one of those or a folder outside the run")
        else:
            if target.exists() and not target.is_dir():
                raise UserError(f"--out {out} is a file; evaluate writes a folder "
                                f"(metrics.json and plots): pass a folder's name")
            refuse_foreign(target, run_dir, data=_data_of(config, layout), images=True)
            if target.is_dir() and any(target.iterdir()):
                raise UserError(f"--out {out} is a folder that holds files already; evaluate "
                                f"writes a new folder (or an empty one): choose another name")
    check_folder(target if target.is_dir() else target.parent, "--out")
    return target


def inside(path: Path, folder: Path) -> bool:
    """Whether the resolved `path` is the resolved `folder` or under it."""
    return path == folder or folder in path.parents


def _data_of(config, layout=None) -> list[str]:
    """The data places a run reads (its recorded data and conversion, and the data being
    scored): never an output's place."""
    found = [config.data.path, config.data.converted]
    if layout is not None:
        found += [layout.root, layout.source or ""]
    return [p for p in found if p and not is_remote(p)]


def refuse_foreign(target: Path, run_dir: Path, inputs=(), data=(), images: bool = False,
                   flag: str = "--out", mark: str = "") -> None:
    """Refuses an output place outside the run in use (`run_dir`) that belongs to something
    else, with or without --force: a place inside another run's folder (its record would mix
    two runs), one of the command's `inputs`, a place inside the `data` a run reads, and with
    `images` (the output holds pictures) a place inside a data set (`_data_set_around`: a
    class folder, a TFRecord layout, or a new folder beside two or more class folders, which
    the next `train --data` would read as a class). A `target` folder holding the file `mark`
    is the command's own earlier output: its pictures are no data set."""
    resolved = Path(target).resolve()
    for folder in (resolved, *resolved.parents):
        if any((folder / mark).is_file() for mark in RUN_MARKS):
            raise UserError(f"{flag} {target} is inside {folder}, the folder of another run "
                            f"(or ensemble, or evaluation), which Corolla never writes into "
                            f"for {run_dir}, even with --force; choose a path outside it")
    for path in inputs:
        path = Path(path).resolve()
        if resolved == path or (images and path.is_dir() and inside(resolved, path)):
            raise UserError(f"{flag} {target} is {'one' if resolved == path else 'inside one'} "
                            f"of the inputs ({path}); choose a path outside them")
    for place in data:
        place = Path(place).resolve()
        if inside(resolved, place):  # (a CSV's own file included: it is `place` itself)
            raise UserError(f"{flag} {target} is inside the data {place}, which Corolla never "
                            f"writes into; choose a path outside it")
    if images:
        data_set = _data_set_around(resolved, mark)
        if data_set is not None:
            raise UserError(f"{flag} {target} is inside {data_set}, which holds a data set's "
                            f"images: pictures written there would be read as photos next "
                            f"time; choose a folder outside it")


def _data_set_around(path: Path, mark: str = "") -> Path | None:
    """The data set that pictures written at `path` would join, or None: the nearest folder at
    or above it that is a TFRecord layout (or holds one) or a class folder (see `_is_class`),
    or `path`'s parent when it holds class folders (then `path` becomes a new class). A folder
    of photos alone is no data set (a home folder with a screenshot in it; `explain photos
    --out why`), nor is a folder far above class folders (a home folder holding Pictures/ and
    Desktop/). Folders holding the file `mark` are the command's own earlier output."""
    for folder in (path, *path.parents):
        if LAYOUT.fullmatch(folder.name) or _holds(folder, layouts=True) or \
                _is_class(folder, mark):
            return folder
    own = bool(mark) and (path / mark).is_file()
    return path.parent if not own and _class_folders(path.parent, mark, path) >= 2 else None


def _is_class(folder: Path, mark: str) -> bool:
    """A folder of images that is one class of a data set: under a split folder, or beside
    another class folder."""
    return _holds(folder, mark=mark) and (folder.parent.name in ("train", "val", "test") or
                                          _class_folders(folder.parent, mark) >= 2)


def _class_folders(folder: Path, mark: str, but: Path | None = None) -> int:
    """How many of `folder`'s first LOOK sub-folders (but `but`) hold images (2 at most are
    counted); 0 when `folder` holds images itself, as a data set of class folders never does
    (`train --data` refuses an image outside a class folder)."""
    if _holds(folder, mark=mark):
        return 0
    found = 0
    try:
        with os.scandir(folder) as entries:
            for k, entry in enumerate(entries):
                if k >= LOOK or found >= 2:
                    break
                if entry.is_dir() and not entry.name.startswith(".") and \
                        Path(entry.path) != but and _holds(Path(entry.path), mark=mark):
                    found += 1
    except OSError:  # missing, not a folder, unreadable
        return 0
    return found


def _holds(folder: Path, layouts: bool = False, mark: str = "") -> bool:
    """Whether `folder` holds image files among its first LOOK entries (with `layouts`: a
    TFRecord layout, tfrecords-jpeg-SxS/, instead). A folder holding `mark`, or a run's or
    evaluation's record (RUN_MARKS), holds pictures Corolla wrote, not photos: none."""
    if any((folder / m).is_file() for m in (mark, *RUN_MARKS) if m):
        return False
    try:
        with os.scandir(folder) as entries:
            for k, entry in enumerate(entries):
                if k >= LOOK:
                    break
                if (entry.is_dir() and LAYOUT.fullmatch(entry.name)) if layouts else \
                        is_image_file(Path(entry.path)):
                    return True
    except OSError:  # missing, not a folder, unreadable
        return False
    return False


def output_path(run_dir: Path, out: str | Path | None = None, force: bool = False,
                inputs=(), config=None) -> Path:
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
    if inside(resolved, run):
        raise UserError(f"--out {out} is inside the run folder {run_dir}, where predict writes "
                        f"only {default} (the default), never over the run's own files, even "
                        f"with --force; choose a path outside the run")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; pass a file name, e.g. "
                        f"{out / SUBMISSION}")
    refuse_foreign(out, run_dir, inputs=inputs,
                   data=_data_of(config) if config is not None else ())
    if out.exists() and is_image_file(out):
        raise UserError(f"--out {out} is an image; predict writes a CSV: choose a .csv file "
                        f"name")
    if (out.exists() or out.is_symlink()) and not force:
        raise UserError(f"--out {out} already exists; pass --force to overwrite it")
    check_folder(out.parent, "--out")
    return out
