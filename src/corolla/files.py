"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never half
of one. Everything a run writes goes through here: the file is written under a temporary name
in the same folder, flushed to disk, then renamed over the target (`os.replace` is atomic
within one file system)."""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from pathlib import Path

from corolla.errors import UserError


# A full disk, a quota, a folder made read-only: the old file stays as it was, and the user is
# told in one line.
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yields a temporary path beside `path` with the same suffix (writers such as Keras check
    it); on success the file is synced and renamed to `path`, on failure it is removed."""
    path = Path(path)
    base, dot, suffixes = path.name.partition(".")
    tmp = path.with_name(f".{base}.{uuid.uuid4().hex[:8]}.partial{dot}{suffixes}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except OSError as e:
        if e.errno not in _DISK_ERRORS:  # a bug keeps its traceback
            raise
        raise UserError(f"could not write {path} ({e.strerror or e}); free space or fix the "
                        f"folder's permissions, then run the command again") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def remove_partials(folder: str | Path) -> list[str]:
    """Removes the temporary files of writes that a killed process never finished; call it
    only as the folder's one writer. Returns their names."""
    found = sorted(Path(folder).glob(".*.partial*"))
    for path in found:
        path.unlink(missing_ok=True)
    return [p.name for p in found]


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
