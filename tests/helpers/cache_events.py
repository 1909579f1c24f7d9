"""Runs the `corolla` command and prints, at its end, how many XLA programs this process
needed and how many of them JAX's persistent compilation cache gave it:
`CACHE_EVENTS {"programs": P, "hits": H, "seconds": S, "slowest": [[name, s], ...]}`, from
JAX's own monitoring events (its backend-compile duration is recorded for each program, loaded
or compiled); P - H were compiled; S is their seconds in all, `slowest` the five longest.

    python cache_events.py corolla-args...
"""

import json
import sys

import jax.monitoring

counts = {"programs": 0, "hits": 0, "seconds": 0.0}
durations = []


def _event(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        counts["hits"] += 1


def _duration(event: str, seconds: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        counts["programs"] += 1
        counts["seconds"] += seconds
        durations.append((kwargs.get("fun_name", "?"), round(seconds, 2)))


jax.monitoring.register_event_listener(_event)
jax.monitoring.register_event_duration_secs_listener(_duration)

from corolla.cli import main  # noqa: E402

try:
    code = main(sys.argv[1:])
finally:
    counts["seconds"] = round(counts["seconds"], 1)
    counts["slowest"] = sorted(durations, key=lambda d: -d[1])[:5]
    print("CACHE_EVENTS " + json.dumps(counts), flush=True)
sys.exit(code)
