"""The competition's submission file: `id,label`, one row per test id."""

from __future__ import annotations

import csv
from pathlib import Path

from corolla.files import atomic_path


def write(ids, labels, path: str | Path) -> Path:
    """Writes the rows in the order given. Duplicate or missing ids would be scored wrong on
    Kaggle, so they are refused here rather than written. Written atomically: an upload taken
    while predict runs again gets the old file or the new one, never a truncated one."""
    ids, labels = list(ids), [int(x) for x in labels]
    if len(ids) != len(labels):
        raise ValueError(f"{len(ids)} ids but {len(labels)} labels")
    if len(set(ids)) != len(ids):
        raise ValueError(f"the test split has {len(ids) - len(set(ids))} duplicate ids")
    path = Path(path)
    with atomic_path(path) as tmp, tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "label"])
        writer.writerows(zip(ids, labels))
    return path


def read(path: str | Path) -> dict[str, int]:
    with Path(path).open(newline="") as f:
        return {row["id"]: int(row["label"]) for row in csv.DictReader(f)}
