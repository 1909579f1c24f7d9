"""Small agreements between the processes of a multi-host job, outside training: which run
this is (the chief's id), whether every process restored the same epoch, and when the chief
is done.

Each process contributes a few small integers; every process gets everyone's. In a
single-process job this is the identity, and no collective is run.
"""

from __future__ import annotations

import numpy as np

_BITS = 24  # int32 carries them exactly on every backend (JAX runs without 64-bit types)


def gather(plan, values) -> np.ndarray:
    """[num_processes, k] int array: row p is process p's `values` (k ints in [0, 2**31))."""
    values = np.asarray(values, np.int32).reshape(1, -1)
    if not plan.multi_worker:
        return values
    if plan.backend == "jax":
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(values)).reshape(
            plan.num_processes, -1)
    import tensorflow as tf

    strategy = plan.strategy
    local = tf.constant(values)
    per_replica = strategy.experimental_distribute_values_from_function(lambda ctx: local)
    rows = strategy.gather(per_replica, axis=0).numpy()  # one row per replica, by process
    return rows[:: rows.shape[0] // plan.num_processes]


def split_hex(text: str, chunks: int = 2) -> list[int]:
    """A hex id of up to 6 * chunks digits as `chunks` ints of 24 bits (see `join_hex`)."""
    number = int(text, 16)
    return [(number >> (_BITS * i)) & ((1 << _BITS) - 1) for i in range(chunks)]


def join_hex(parts, digits: int) -> str:
    return f"{sum(int(p) << (_BITS * i) for i, p in enumerate(parts)):0{digits}x}"


def chief_hex(plan, text: str) -> str:
    """The chief's hex id (up to 12 digits), on every process."""
    return join_hex(gather(plan, split_hex(text))[0], len(text))


def wait_for_each_other(plan) -> None:
    """Every process of a multi-process job waits here until all have come. After training the
    chief alone evaluates and predicts; a process that left the job meanwhile would wait in
    JAX's shutdown barrier, which gives up after 300 s and then aborts every process of the
    job, the chief in the middle of its evaluation."""
    gather(plan, [0])
