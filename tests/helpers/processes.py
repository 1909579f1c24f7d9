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


def run_capped(code: str, gib: float, setup: str = "", timeout: int = 300):
    """`run_python` with `gib` GiB of address space left to `code` (RLIMIT_AS, set once `setup`
    has run, e.g. TensorFlow's import, which maps gigabytes of its own): code that would take
    more fails there with a MemoryError (or an abort) instead of taking the host's memory."""
    return run_python(f"{setup}\nimport resource\n"
                      "status = open('/proc/self/status').read()\n"
                      "mapped = int(status.split('VmSize:')[1].split()[0])\n"
                      f"cap = mapped * 1024 + int({gib} * 2**30)\n"
                      "resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n" + code,
                      env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=timeout)


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
