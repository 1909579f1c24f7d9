"""Runs the `corolla` command and prints, at its end, how many XLA programs this process
needed and how many of them JAX's persistent compilation cache gave it:
`CACHE_EVENTS {"programs": P, "hits": H}`, from JAX's own monitoring events (its
backend-compile duration is recorded for each program, loaded or compiled); P - H were compiled.

    python cache_events.py corolla-args...
"""

import json
import sys

import jax.monitoring

counts = {"programs": 0, "hits": 0}


def _event(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        counts["hits"] += 1


def _duration(event: str, seconds: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        counts["programs"] += 1


jax.monitoring.register_event_listener(_event)
jax.monitoring.register_event_duration_secs_listener(_duration)

from corolla.cli import main  # noqa: E402

try:
    code = main(sys.argv[1:])
finally:
    print("CACHE_EVENTS " + json.dumps(counts), flush=True)
sys.exit(code)
