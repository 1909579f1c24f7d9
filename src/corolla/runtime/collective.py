"""Agreements between the processes of a multi-host job, outside training: which run this is
(the chief's id), which epoch every process continues from (the chief's record and weights, for
a worker that lost its backup), and when the chief is done.

Each process contributes a few small integers (or bytes, or its values of the same variables);
every process gets everyone's, or the chief's. In a single-process job this is the identity,
and no collective is run.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

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
    rows = _tf_gather(plan.strategy)(tf.constant(values)).numpy()  # a row per replica
    return rows[:: rows.shape[0] // plan.num_processes]  # by process


_TF_GATHERS = {}  # a process's strategy (it has one) to its gather


def _tf_gather(strategy):
    """The strategy's gather of every replica's values, as one tf.function per strategy: called
    eagerly, TensorFlow's all-gather makes a new tf.function at each call, which traces again
    (and, called after every epoch, warns of "excessive retracing")."""
    if strategy not in _TF_GATHERS:
        @tf.function(reduce_retracing=True)
        def gather_all(values):
            per_replica = strategy.experimental_distribute_values_from_function(
                lambda ctx: values)
            return strategy.gather(per_replica, axis=0)

        _TF_GATHERS[strategy] = gather_all
    return _TF_GATHERS[strategy]


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


def chief_bytes(plan, data: bytes) -> bytes:
    """The chief's `data` on every process (each passes its own; the lengths may differ)."""
    if not plan.multi_worker:
        return data
    lengths = gather(plan, [len(data)])[:, 0]
    if plan.backend == "jax":  # a byte per byte, from the chief alone: a best model's file
        return _jax_broadcast(plan, np.frombuffer(data, np.uint8) if plan.is_chief else
                              np.zeros(lengths[0], np.uint8)).tobytes()
    padded = np.frombuffer(data.ljust(int(lengths.max()), b"\0"), np.uint8)
    return gather(plan, padded)[0, : lengths[0]].astype(np.uint8).tobytes()


def take_chiefs_values(plan, variables, values=None) -> None:
    """Every process's `variables` (the same list, in the same order, on each: a model's and
    its optimizer's) take the chief's values: the chief's `values` where it passes them (what
    the other processes pass is not read), else its variables' own. Called by every process,
    inside the plan's scope, for a worker that continues from the chief's backup instead of its
    own."""
    if not plan.multi_worker:
        return
    if plan.backend == "jax":
        _take_chiefs_values_jax(plan, variables, values)
        return
    values = [np.asarray(v) for v in (variables if values is None else values)]
    # One sum over the replicas of every value, flat, in which only the chief's first replica's
    # is not zero. In float64: a collective sum knows no bool or unsigned type, and every value
    # here (weights, step counters, seeds) is exact in it.
    flat = np.concatenate([v.astype(np.float64).ravel() for v in values])

    def contribution(context):  # worker 0's replicas come first
        return tf.constant(flat if context.replica_id_in_sync_group == 0 else
                           np.zeros_like(flat))

    strategy = plan.strategy
    total = strategy.reduce(tf.distribute.ReduceOp.SUM,
                            strategy.experimental_distribute_values_from_function(
                                contribution), axis=None).numpy()
    chiefs = np.split(total, np.cumsum([v.size for v in values])[:-1])
    for variable, mine, chief in zip(variables, values, chiefs):
        variable.assign(np.asarray(chief).astype(mine.dtype).reshape(mine.shape))


_CHUNK = 1 << 26  # bytes per broadcast array: a large model's state is several GB


def _jax_broadcast(plan, data: np.ndarray) -> np.ndarray:
    """The chief's `data` (flat uint8, of the same size on every process) on every process, in
    one collective."""
    from jax.experimental import multihost_utils

    pieces = [data[i:i + _CHUNK] for i in range(0, data.size, _CHUNK)]
    if not pieces:
        return data
    return np.concatenate(multihost_utils.broadcast_one_to_all(pieces,
                                                               is_source=plan.is_chief))


def _take_chiefs_values_jax(plan, variables, values) -> None:
    """JAX: the chief's values as bytes (exact for every dtype, and JAX runs without 64-bit
    types), broadcast in one collective; each process then makes every variable's array over all
    processes from its own copy. Assigning host values instead would run one more collective
    per variable: JAX checks that every process passes the same."""
    import jax

    arrays = [v.value for v in variables]
    dtypes = [np.dtype(a.dtype) for a in arrays]
    sizes = [a.size * d.itemsize for a, d in zip(arrays, dtypes)]
    if plan.is_chief:
        sent = np.concatenate([np.asarray(v, d).reshape(-1).view(np.uint8) for v, d in
                               zip(arrays if values is None else values, dtypes)])
        if sent.size != sum(sizes):
            raise ValueError(f"the chief's values hold {sent.size} bytes, its variables "
                             f"{sum(sizes)}")
    else:
        sent = np.zeros(sum(sizes), np.uint8)
    flat = _jax_broadcast(plan, sent)
    ends = np.cumsum(sizes)
    for variable, array, dtype, end, size in zip(variables, arrays, dtypes, ends, sizes):
        value = flat[end - size:end].copy().view(dtype).reshape(array.shape)  # copy: aligned
        variable.assign(jax.make_array_from_callback(array.shape, array.sharding,
                                                     value.__getitem__))
