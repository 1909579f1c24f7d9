"""Anyone's photos, for a trained model: the files a user names (image files, folders searched
recursively, CSVs of paths) listed, and each read as `corolla convert` reads images (Pillow:
EXIF rotation, CMYK, greyscale, palette, alpha over white; `convert.load_image`), fitted to the
model's input size the way the run's data was fitted (`fit_of`).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from corolla.data import convert
from corolla.data.sources import is_image_file
from corolla.errors import UserError


def _csv_paths(path: Path) -> list[str]:
    """The `path` column of a CSV (or its first column when no header names `path`), relative
    to the CSV's folder unless absolute."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = [row for row in csv.reader(f) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise UserError(f"{path} lists no images; write one image path a line (or a `path` "
                        f"column)")
    header = [cell.strip().lower() for cell in rows[0]]
    column = header.index("path") if "path" in header else 0
    if "path" in header or not Path(rows[0][0].strip()).suffix:  # a header row, not a path
        rows = rows[1:]
    return [str((path.parent / row[column].strip()).resolve()) for row in rows
            if len(row) > column and row[column].strip()]


def as_paths(given, argument: str = "photos") -> list[str]:
    """`given` (a path, or an iterable of them) as strings; anything else (an image in memory,
    an array, None) is a one-line UserError naming `argument`: photos are read from files, as
    the run's data was, so that they are fitted to the model the same way."""
    items = [given] if isinstance(given, (str, os.PathLike)) else given
    try:
        items = list(items)
    except TypeError:
        items = [given]
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            kind = "None" if item is None else f"{type(item).__module__}.{type(item).__qualname__}"
            raise UserError(f"{argument} takes image files, folders of them or CSVs of paths "
                            f"(str or pathlib.Path), got {kind}; save an image in memory to a "
                            f"file first")
    return [os.fspath(item) for item in items]


def list_photos(paths) -> list[str]:
    """Absolute paths of the images named by `paths` (files, folders searched recursively for
    image files, CSVs of paths), in the given order (a folder's files sorted), each once. A
    path that does not exist is an error; an image file that does not decode is not (see
    `read`)."""
    found: dict[str, None] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and is_image_file(p))
            if not files:
                raise UserError(f"{given} holds no image files; pass image files, folders of "
                                f"them, or a CSV of their paths")
            found.update((str(p.resolve()), None) for p in files)
        elif path.is_file() and path.suffix.lower() == ".csv":
            found.update((p, None) for p in _csv_paths(path))
        elif path.is_file():
            found[str(path.resolve())] = None
        else:  # a device or a pipe (also behind a link) is there, but no photo
            what = "is not a regular file (a device, pipe or socket)" if path.exists() else \
                "does not exist"
            raise UserError(f"{given} {what}; pass image files, folders of them, or a CSV of "
                            f"their paths")
    return list(found)


def fit_of(data_root: str | Path) -> str:
    """How the run's images were fitted to a square ("crop" or "pad"): the setting of the
    conversion that made its data (convert.json), else "crop" (the competition's images, and
    Corolla's default)."""
    manifest = Path(data_root) / convert.MANIFEST
    try:
        return json.loads(manifest.read_text())["settings"]["fit"]
    except (OSError, ValueError, KeyError, TypeError):
        return "crop"


def read(path: str, size: int, fit: str = "crop") -> np.ndarray:
    """uint8 [size, size, 3]: the photo as a conversion at `size` would store it. Raises
    OSError / ValueError (Pillow's) for a file that does not decode."""
    return convert.load_image(path, size, fit)


def read_many(paths: list[str], size: int, fit: str = "crop"):
    """(uint8 [N, size, size, 3] of the photos that decode, {path: why} of those that do
    not), in order."""
    images, failed = [], {}
    for path in paths:
        try:
            images.append(read(path, size, fit))
        except Exception as e:  # noqa: BLE001 - any failure means this file cannot be used
            failed[path] = " ".join(str(e).split()) or type(e).__name__
    array = np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8)
    return array, failed
