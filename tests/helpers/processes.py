"""Where things are, and other processes: the repository, the helper scripts, a fresh
interpreter, free ports on the loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent  # tests/helpers/*.py run as `python SCRIPT ...`
FIXTURES = REPO / "tests" / "fixtures"
SHARED = REPO.parent / "shared"  # the real data and weights beside the repository, in CI


def run_python(code: str, env: dict | None = None, timeout: int = 300, cwd=None):
    """Runs `code` in a fresh interpreter (own TensorFlow runtime, own Keras backend)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], env=full_env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def crash_train(point: str, *command, env: dict | None = None, timeout: int = 300):
    """`corolla COMMAND...` in a fresh process that dies at `point` (helpers/crash_train.py
    says which points: "epoch_end:1", "mid_epoch:0", "save", ...; "none" to run it through)."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPTS / "crash_train.py"), point,
                           *map(str, command)], cwd=REPO, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
