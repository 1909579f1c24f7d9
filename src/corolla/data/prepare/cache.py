"""The conversion cache: an image folder or CSV converted once (`cached`) into a folder named by
a key of its files and the settings, reused while neither changes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from corolla.data.prepare.sharding import convert
from corolla.data.prepare.settings import MANIFEST, VERSION, Settings
from corolla.data.prepare.sources import ImageSource
from corolla.errors import UserError
from corolla.files import UNMAKEABLE

# Cache folders this process has said it reads: one command opens its data in several steps
# (train, evaluate, predict), and says so once.
_ANNOUNCED: set[Path] = set()


def cache_folder(source: ImageSource, settings: Settings, root: Path) -> Path:
    """Where `cached` keeps `source` converted with `settings`: a folder named by a key of the
    source's files (paths, sizes, modification times, labels) and the settings, so that the
    same files give the same folder, and the same split."""
    key = hashlib.sha256(json.dumps({"version": VERSION, "source": source.fingerprint(),
                                     "settings": settings.check().key()},
                                    sort_keys=True).encode())
    return Path(root) / key.hexdigest()[:16]


def announce_reuse(source_path: str, out: Path, log=print) -> None:
    """Says once per process that a conversion is read again (and what it left out)."""
    if out in _ANNOUNCED:
        return
    manifest = json.loads((out / MANIFEST).read_text())
    skipped = len(manifest.get("skipped", ()))
    note = f"; {skipped} unreadable file(s) left out (see {out / MANIFEST})" if skipped else ""
    log(f"data: {source_path} unchanged since its conversion: reading {out}{note}")
    _ANNOUNCED.add(out)


def cached(source: ImageSource, settings: Settings, root: Path, log=print,
           copies=None) -> Path:
    """`source` converted with `settings` under `root/<key>` (`cache_folder`): reused while
    neither the source's files nor the settings change. `copies`: a function that finds the
    source's copies (`Copies`), called only when it is converted."""
    settings = settings.check()
    out = cache_folder(source, settings, root)
    if (out / MANIFEST).is_file():
        announce_reuse(source.path, out, log)
        return out
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno not in UNMAKEABLE:
            raise
        raise UserError(f"cannot make the conversion cache {root} ({e.strerror}); set "
                        f"COROLLA_CACHE_DIR to a writable folder") from None
    log(f"data: converting {source.path} into the cache {out} (reused while the files and "
        f"settings are unchanged)")
    try:
        convert(source, out, settings, log=log, copies=copies() if copies else None)
    except UserError:
        if (out / MANIFEST).is_file():  # another process converted it first
            return out
        raise
    return out
