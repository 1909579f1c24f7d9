"""`corolla convert`: an image folder or a CSV of path,label -> sharded TFRecords in the
competition layout."""

from __future__ import annotations

from pathlib import Path

from corolla.data import convert as convert_lib
from corolla.data import datasets, sources, survey
from corolla.errors import UserError


def convert(src: str, out: str, settings: convert_lib.Settings) -> Path:
    """Converts `src` into the new folder `out` (never an existing one)."""
    settings = settings.check()
    if Path(out).exists():  # before the source is listed
        raise UserError(f"{out} already exists; convert never overwrites: remove it or "
                        f"choose another OUT")
    source = sources.scan(src)
    copies = None
    if settings.dedupe or convert_lib.needs_split(source):  # copies are kept in one split
        copies = survey.copies(src, datasets.checks_dir())
    convert_lib.convert(source, out, settings, copies=copies)
    return Path(out)
