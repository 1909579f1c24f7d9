"""Folders built once for the whole test session and shared by every pytest-xdist worker."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `build(folder)` fills, built once for the whole test session: under
    pytest-xdist the first worker to ask builds it and the others wait for it and share it (a
    session fixture is otherwise built once per worker). Tests only read it, as they read every
    session fixture's folder."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's own
    folder = root / f"once-{name}"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".built").is_file():  # (a worker whose build failed left no mark)
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder
