"""`corolla convert`: an image folder or a CSV of path,label -> sharded TFRecords in the
competition layout, in a new folder (never an existing one)."""

from __future__ import annotations

from pathlib import Path

from corolla.data.audit import survey
from corolla.data.prepare import sharding
from corolla.data.prepare import sources
from corolla.data.prepare.settings import Settings
from corolla.data.prepare.splits import needs_split
from corolla.errors import UserError


def convert(src: str, out: str, settings: Settings) -> Path:
    """Converts `src` into the new folder `out` (never an existing one)."""
    settings = settings.check()
    if Path(out).exists():  # before the source is listed
        raise UserError(f"{out} already exists; convert never overwrites: remove it or "
                        f"choose another OUT")
    source = sources.scan(src)
    sources.check_classes(source)
    copies = None
    if settings.dedupe or needs_split(source):  # copies are kept in one split
        from corolla.data import datasets  # loads TensorFlow: after the source is checked

        copies = survey.copies(src, datasets.checks_dir(),
                               max_megapixels=settings.max_megapixels)
    sharding.convert(source, out, settings, copies=copies)
    return Path(out)
