"""Corolla's cache folder, and JAX's persistent compilation cache inside it.

JAX compiles each train, eval and predict step with XLA in every new process, which can take
minutes for a train step, on a GPU mostly its autotuning (figures:
docs/benchmarks.md#figures-behind-the-defaults). Its persistent cache keeps each compiled
program (and, on GPUs, the autotuning results) on disk, so the same program in a later process
(a resumed run, the next fold, evaluate, predict, TTA) is loaded instead. `detect` sets it
before anything compiles, in every command and worker.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from corolla.errors import UserError

CACHE_ENV = "COROLLA_CACHE_DIR"
FOLDER = "jax-compile"  # under the cache root
# Least recently used programs are evicted past this (JAX's own default is no limit), where the
# `filelock` package is installed (JAX needs it to evict; the gpu extra brings it).
MAX_BYTES = 4 << 30
# Every program is kept, not only those that took 1 s or more to compile (JAX's default): the
# eager ones of loading a model and of Grad-CAM are each quick but many, small on disk, and
# together most of what a second `evaluate` would compile again (figures:
# docs/benchmarks.md#figures-behind-the-defaults). JAX's own
# JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS wins when set.
MIN_COMPILE_SECONDS = 0.0
MIN_COMPILE_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def cache_root() -> Path:
    """Corolla's cache: $COROLLA_CACHE_DIR, else $XDG_CACHE_HOME/corolla, else
    ~/.cache/corolla (conversions, data checks, compiled programs)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "corolla"


def folder(setting: str) -> Path | None:
    """runtime.compile_cache -> the folder: "auto" is JAX's own JAX_COMPILATION_CACHE_DIR when
    set, else <cache root>/jax-compile; "off" is None; anything else is a folder."""
    if setting == "off":
        return None
    if setting == "auto":
        return Path(os.environ.get("JAX_COMPILATION_CACHE_DIR") or cache_root() / FOLDER)
    return Path(setting).expanduser()


def enable_compile_cache(setting: str) -> Path | None:
    """Points JAX's persistent compilation cache at `folder(setting)` (or turns it off); returns
    the folder. Must run before the process's first compile: JAX opens the cache then."""
    import jax

    path = folder(setting)
    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"compile cache folder {str(path)!r} cannot be made ({e.strerror}); "
                        f"pass --compile-cache with a writable folder, or off") from None
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    if MIN_COMPILE_ENV not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if importlib.util.find_spec("filelock") is not None:  # else JAX refuses a bound
        jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path
