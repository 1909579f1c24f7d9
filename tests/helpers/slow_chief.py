"""Runs the `corolla` command in a JAX process whose shutdown barrier gives up after 5 s (JAX's
default is 300 s), with the chief's evaluation delayed by 15 s: a process that leaves the job
before the chief is done meets that barrier.

    python slow_chief.py corolla-args...
"""

import functools
import sys
import time

import jax

jax.distributed.initialize = functools.partial(jax.distributed.initialize,
                                               shutdown_timeout_seconds=5)

import corolla.flows.run as run  # noqa: E402

_evaluate_run = run.evaluate_run


def slow_evaluate_run(*args, **kwargs):
    time.sleep(15)
    return _evaluate_run(*args, **kwargs)


run.evaluate_run = slow_evaluate_run

from corolla.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
