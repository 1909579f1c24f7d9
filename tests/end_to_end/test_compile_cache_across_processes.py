"""JAX's persistent compilation cache: on by default under Corolla's cache folder,
so a second process loads what the first compiled; `--compile-cache off` writes nothing."""

import json
import os
import subprocess
import sys

import pytest

from corolla.runtime import compile_cache
from helpers.processes import SCRIPTS


EVENTS = SCRIPTS / "cache_events.py"


def _train(tmp_path, data, cache_root, *args):
    env = {**os.environ, "COROLLA_CACHE_DIR": str(cache_root)}
    for name in ("JAX_COMPILATION_CACHE_DIR", compile_cache.MIN_COMPILE_ENV):
        env.pop(name, None)  # Corolla's own settings
    result = subprocess.run(
        [sys.executable, str(EVENTS), "train", "--data", str(data), "--backend", "jax",
         "--model", "small_cnn", "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "8",
         "--runs-dir", str(tmp_path / "runs"), *args],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [s for s in result.stdout.splitlines() if s.startswith("CACHE_EVENTS ")][-1]
    return json.loads(line[len("CACHE_EVENTS "):])


def _entries(folder) -> set[str]:
    return {p.name for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


@pytest.mark.slow
@pytest.mark.large  # 41 s on a 2-core host: CI's large step
def test_a_second_jax_process_loads_what_the_first_compiled(tmp_path, tiny_petals):
    cache = tmp_path / "cache" / compile_cache.FOLDER
    events = _train(tmp_path, tiny_petals, tmp_path / "cache")
    first = _entries(cache)
    assert events["programs"] > 0 and any(name.endswith("-cache") for name in first), events
    events = _train(tmp_path, tiny_petals, tmp_path / "cache")
    # Every program loaded, the quick ones of eager code too (JAX's default keeps only those
    # that took 1 s or more to compile: they were compiled again in every process).
    assert events["hits"] == events["programs"] > 0, events
    assert _entries(cache) == first


@pytest.mark.large  # 29 s (a training in a fresh process): CI's large step
def test_compile_cache_off_writes_nothing(tmp_path, tiny_petals):
    _train(tmp_path, tiny_petals, tmp_path / "cache", "--compile-cache", "off")
    assert _entries(tmp_path / "cache" / compile_cache.FOLDER) == set()
