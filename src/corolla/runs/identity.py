"""Which run a saved model is: its run's id and its input size, written into the model's own
.keras archive (an entry Keras does not read), so that the record travels with the file.

A model.keras copied from another run over this run's (the same classes, another size or
another training) would otherwise be scored, exported and predicted with as this run's, and
its scores written into this run's metrics. Models saved before the record existed have none:
their input size is still held against the run's."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from corolla.errors import UserError

ENTRY = "corolla.json"  # inside the .keras zip archive, beside Keras' config.json


def stamp(path: str | Path, run_id: str, input_size: int) -> None:
    """Adds the record to the .keras archive at `path` (a file just written by Keras)."""
    record = {"run_id": run_id, "input_size": int(input_size)}
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(ENTRY, json.dumps(record))


def read(path: str | Path) -> dict | None:
    """The record of the .keras archive at `path`, or None for a model saved without one; one
    that is not a record `stamp` writes is a one-line UserError naming the file."""
    with zipfile.ZipFile(path) as archive:
        if ENTRY not in archive.namelist():
            return None
        if archive.getinfo(ENTRY).file_size > 4096:  # stamp writes a few dozen bytes
            record = None
        else:
            try:
                record = json.loads(archive.read(ENTRY))
            except (ValueError, UnicodeDecodeError):
                record = None
    if not (isinstance(record, dict) and isinstance(record.get("run_id", ""), str)
            and type(record.get("input_size", 0)) is int):
        raise UserError(f"{path} holds a damaged {ENTRY} (not the run id and input size Corolla "
                        f"writes); put the run's own model back, or train the run again")
    return record


def check(path: Path, run_dir: Path, config, model_size: int | None) -> None:
    """Refuses the model at `path` (input `model_size`) unless it is the run's: saved by the
    run of `config` (its id) at the run's input size."""
    record = read(path) or {}
    run_id, size = config.output.run_id, config.model.input_size
    if record.get("run_id") and run_id and record["run_id"] != run_id:
        raise UserError(f"{path} was saved by another run (id {record['run_id']}), not by "
                        f"{run_dir} (id {run_id}); put this run's own model back, or open "
                        f"the run that model belongs to")
    sizes = {s for s in (record.get("input_size"), model_size) if s}
    if size and sizes and sizes != {size}:
        raise UserError(f"{path} takes {max(sizes)} px images but {run_dir} was trained at "
                        f"{size} px; it is not this run's model: put the run's own model back")
