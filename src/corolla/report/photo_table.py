"""Predictions on anyone's photos, for people: the top-k classes of each photo by name (the
class's index, its line in classes.txt from 0, beside it as `class_index`: never a column
called `label`, which readers take for the class itself), as a table, a CSV (one row a photo)
and a JSON file."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np

from corolla.files import atomic_path


def top_k(probabilities: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(class indices [N, k], their probabilities [N, k]), the likeliest first; ties by
    index, so the order is the same on every machine."""
    k = min(k, probabilities.shape[1])
    order = np.argsort(-probabilities, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(probabilities, order, axis=1)


def records(paths, probabilities: np.ndarray, class_names, k: int) -> list[dict]:
    """One dict a photo: its path and its top-k classes (name, index, probability)."""
    order, probs = top_k(probabilities, k)
    return [{"path": path,
             "top": [{"class": class_names[c], "class_index": int(c), "probability": float(p)}
                     for c, p in zip(row, prow)]}
            for path, row, prow in zip(paths, order, probs)]


def _shown(path: str) -> str:
    """A path as short as it is clear: relative to the current folder when under it."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    except ValueError:  # another drive (Windows)
        return path


def table(rows: list[dict]) -> list[str]:
    """Lines of a table: each photo, then its classes with their probabilities."""
    if not rows:
        return []
    width = max(len(_shown(r["path"])) for r in rows)
    return [f"{_shown(r['path']):{width}s}  " + "  ".join(
        f"{t['class'].strip() or repr(t['class'])} {t['probability']:.3f}" for t in r["top"])
        for r in rows]


def csv_text(rows: list[dict]) -> str:
    """path, class_1, class_index_1, probability_1, ..., class_k, class_index_k, probability_k."""
    k = max((len(r["top"]) for r in rows), default=0)
    header = ["path"] + [f"{what}_{i}" for i in range(1, k + 1)
                         for what in ("class", "class_index", "probability")]
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    for r in rows:
        writer.writerow([r["path"]] + [x for t in r["top"] for x in
                                       (t["class"], t["class_index"], f"{t['probability']:.6f}")])
    return text.getvalue()


def write_csv(rows: list[dict], path: str | Path) -> Path:
    """`csv_text` of the rows, at `path`."""
    with atomic_path(path) as tmp, tmp.open("w", newline="") as f:
        f.write(csv_text(rows))
    return Path(path)


def json_text(rows: list[dict], skipped: dict[str, str], **about) -> str:
    """{"run", ..., "predictions": rows, "skipped": [{"path", "reason"}]}."""
    data = {**about, "predictions": rows,
            "skipped": [{"path": p, "reason": r} for p, r in skipped.items()]}
    return json.dumps(data, indent=1) + "\n"


def write_json(rows: list[dict], skipped: dict[str, str], path: str | Path, **about) -> Path:
    """`json_text` of the rows, at `path`."""
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(rows, skipped, **about))
    return Path(path)


def skipped_lines(skipped: dict[str, str]) -> list[str]:
    """The files that did not decode, one line each, for the end of a command."""
    if not skipped:
        return []
    return [f"skipped {len(skipped)} file(s) that are not readable images:"] + [
        f"  warning: {path}: {why}" for path, why in skipped.items()]
