"""Narrow fixes that make Keras 3 ``Model.fit`` work under
``tf.distribute.MultiWorkerMirroredStrategy`` (TensorFlow backend).

What breaks
-----------
With two or more *workers* (``TF_CONFIG`` cluster with >1 task, i.e.
``strategy.extended._in_multi_worker_mode()`` is true) stock Keras 3 fails in
two places, both in ``keras/src/backend/tensorflow/trainer.py``
(line numbers for keras 3.15.1):

1. ``TensorFlowTrainer._maybe_symbolic_build`` (line 713; the call is at
   line 731), called at the start of ``fit()`` and ``evaluate()``, pulls one
   distributed batch and calls
   ``self.distribute_strategy.reduce("MEAN", batch, axis=None)`` on the whole
   ``(x, y)`` tuple.  ``Strategy.reduce`` does not accept nested structures
   (see the ``TODO(josh11b): support value being a nest`` in
   ``tensorflow/python/distribute/distribute_lib.py``); the collective
   cross-device ops try ``convert_to_tensor`` on the tuple and fail with::

       ValueError: Attempt to convert a value (PerReplica:{0: <tf.Tensor ...>})
       with an unsupported type (<class '...values.PerReplica'>) to a Tensor.

   (A one-worker run -- no ``TF_CONFIG`` -- does not hit this.)  The batch
   is only needed for its shapes/dtypes, so there is no reason to
   all-reduce (and average integer labels!) across workers at all.

2. The module-level ``reduce_per_replica`` (line 778; the call is at line
   841), used on the step outputs (loss / metric logs) of
   ``train_function``/``test_function``, takes the multi-worker branch and
   calls ``strategy.reduce("MEAN", v, axis=0)`` for every value.  The logs
   are scalars, so this fails while tracing the train step with::

       ValueError: Invalid reduction dimension 0 for input with 0 dimensions.
       for '{{node Sum_3}} = Sum[...]'(div_no_nan_1, Sum_3/reduction_indices)'

Upstream reports: https://github.com/keras-team/keras/issues/20585 and
https://github.com/tensorflow/tensorflow/issues/72388 (the keras issue is
open; the failing code is still present in keras 3.15.1, the newest release
on PyPI when this was written).

What the patch does
-------------------
``apply_keras_multiworker_fixes()`` wraps exactly those two functions.  Both
wrappers only change behaviour when the strategy is a
``MultiWorkerMirroredStrategy`` *in multi-worker mode*; everything else is
delegated to the original Keras code unchanged.

1. ``_maybe_symbolic_build``: take the first *local* replica's component of
   each element of the batch (``strategy.experimental_local_results(v)[0]``)
   and hand it to the original function as ``data_batch``.  No collective is
   issued; the result is identical on every worker (same per-replica
   shapes/dtypes).
2. ``reduce_per_replica``: for ``reduction in ("auto", "mean")`` use
   ``strategy.reduce("MEAN", v, axis=None)`` for rank-0 values (all-reduce
   mean across replicas, so every worker sees the same logs, which keeps
   EarlyStopping/ReduceLROnPlateau decisions consistent) and keep the upstream
   ``axis=0`` for values with a batch dimension.

``predict()`` needs no fix: it uses the ``"concat"`` path, which gathers the
shards of all workers in dataset order, so every worker gets all
predictions.  The ``"sum"``/``"first"``/``"concat"`` reductions are left
untouched.

Versions
--------
Runtime-verified with keras 3.15.1 + tensorflow 2.21.0 (two CPU workers on
127.0.0.1: fit/evaluate/predict, validation_data, per-worker callbacks,
BackupAndRestore resume, FILE-sharded TFRecords; identical weights on both
workers; loss/weights equal to a non-distributed run with the same global
batches to ~1e-7).  The patched code is structurally the same from keras 3.9
to 3.15 (the epoch-iterator protocol changed from ``(step, it)`` to
``(begin, end, it)`` in between; the wrapper handles both).  The patch is
applied for ``3.9 <= keras < 4``, is skipped (returns False) for other
versions or a non-TensorFlow backend, and warns once for keras newer than
the last verified version.

When to delete
--------------
Delete this module (and its call sites) once keras ships a
``_maybe_symbolic_build`` that does not ``strategy.reduce`` a nested batch and
a ``reduce_per_replica`` that does not use ``axis=0`` on scalars in the
multi-worker branch, i.e. when keras-team/keras#20585 is closed.  Check with
``COROLLA_MWMS_CHECK_UPSTREAM=1 pytest tests/runtime/test_multiworker_keras.py``:
``test_stock_keras_still_fails`` fails once stock keras works.

Not patched / caller's responsibility
-------------------------------------
* ``steps_per_execution > 1`` still fails in multi-worker mode
  (``InvalidArgumentError: You must feed a value for placeholder tensor
  'while/.../while/cond/Placeholder'`` from the ``tf.while_loop``/``tf.cond``
  in ``multi_step_on_iterator``; it also fails with
  ``distribute_reduction_method="first"``, so it is not the reductions
  above).  Keep the default ``steps_per_execution=1``.
* Keras 3 callbacks are not multi-worker aware (Keras 2's "non-chief writes
  to a temp dir" logic is gone): ``ModelCheckpoint``, ``BackupAndRestore``
  and ``CSVLogger`` write from every worker to the path they are given; two
  workers writing the same ``.h5`` fail with ``BlockingIOError: unable to
  lock file`` and the collective on the other worker aborts.  Give each
  worker its own path (e.g. ``<dir>/worker_<task_index>``); that is what
  ``BackupAndRestore`` needs anyway, since every worker must restore.
  Chief-only ``ModelCheckpoint``/``CSVLogger`` also works (saving issues no
  collectives in keras 3.15.1).
* Input sharding: in-memory data needs ``AutoShardPolicy.DATA``.  For
  TFRecords, ``FILE`` (and ``AUTO``, which picks FILE when it finds a reader)
  needs at least ``num_workers`` files, otherwise iteration fails with
  "Could not apply FILE based sharding: the dataset only has 1 file(s) ...";
  list files deterministically (``list_files(..., shuffle=False)`` or a fixed
  seed) so workers agree on the split.
"""

import threading
import warnings

__all__ = ["apply_keras_multiworker_fixes"]

_MIN_KERAS = (3, 9)
_MAX_KERAS_EXCLUSIVE = (4, 0)
_LAST_VERIFIED_KERAS = (3, 15, 1)
_MARKER = "_corolla_mwms_fix"

_lock = threading.Lock()
_applied = False


def _version_tuple(version):
    parts = []
    for piece in version.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def apply_keras_multiworker_fixes():
    """Patch Keras 3 so ``fit``/``evaluate`` work under multi-worker MWMS.

    Idempotent and thread-safe; cheap after the first call.  Safe to call
    unconditionally: the patched functions only change behaviour for a
    ``MultiWorkerMirroredStrategy`` in multi-worker mode.  Call it before the
    first ``fit``/``evaluate``/``predict`` (before or after building the
    strategy and model).

    Returns:
        True if the fixes are active, False if they were not applied
        (unsupported keras version or non-TensorFlow backend).
    """
    global _applied
    with _lock:
        if _applied:
            return True

        import keras

        if not _keras_supported(keras):
            return False

        from keras.src.backend.tensorflow import trainer as tf_trainer

        if getattr(tf_trainer.TensorFlowTrainer._maybe_symbolic_build, _MARKER, False):
            # Already patched (e.g. this module was reloaded).
            _applied = True
            return True

        _patch_symbolic_build(tf_trainer.TensorFlowTrainer)
        _patch_reduce_per_replica(tf_trainer)
        _applied = True
        return True


def _keras_supported(keras):
    """Whether the patch applies to this Keras: a version whose code it was written against
    (3.9 to 4, a warning outside it) on the TensorFlow backend (the only one with MWMS).

    Warns, without refusing, for a version newer than the last verified one: its code may be
    fixed upstream by then, and the patch would then be dead weight to delete.
    """
    version = _version_tuple(keras.__version__)
    # stacklevel 3: the warning names the caller of apply_keras_multiworker_fixes.
    if not (_MIN_KERAS <= version < _MAX_KERAS_EXCLUSIVE):
        warnings.warn(
            "corolla: keras %s is outside the range this multi-worker "
            "patch supports (>=3.9,<4); not applying it."
            % keras.__version__,
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    if keras.backend.backend() != "tensorflow":
        return False
    if version[:2] > _LAST_VERIFIED_KERAS[:2]:
        warnings.warn(
            "corolla: keras %s is newer than the last version the "
            "multi-worker patch was verified with (%s). Check whether "
            "keras-team/keras#20585 is fixed and delete the patch if so."
            % (
                keras.__version__,
                ".".join(map(str, _LAST_VERIFIED_KERAS)),
            ),
            RuntimeWarning,
            stacklevel=3,
        )
    return True


def _in_multi_worker_mode(strategy):
    """The one case the wrappers change: MWMS with two or more workers."""
    import tensorflow as tf

    return isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    ) and strategy.extended._in_multi_worker_mode()


def _first_local(strategy, value):
    """The first local replica's component of a distributed value (a plain value as it is)."""
    import tensorflow as tf

    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _patch_symbolic_build(trainer_cls):
    """Fix 1: ``_maybe_symbolic_build`` gets the first local replica's batch as ``data_batch``.

    Upstream all-reduces the whole ``(x, y)`` batch, and ``Strategy.reduce`` takes no nested
    structure; the batch is needed only for its shapes and dtypes, the same on every worker,
    so no collective is issued at all (nor integer labels averaged).
    """
    from keras.src import tree

    original_build = trainer_cls._maybe_symbolic_build

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = getattr(self, "_distribute_strategy", None)
        if iterator is not None and _in_multi_worker_mode(strategy):
            # keras>=3.12 yields (begin, end, it); 3.9-3.11 (step, it).
            for item in iterator:
                batch = next(item[-1])
                data_batch = tree.map_structure(
                    lambda v: _first_local(strategy, v), batch
                )
                break
            iterator = None
        return original_build(
            self, iterator=iterator, data_batch=data_batch
        )

    trainer_cls._maybe_symbolic_build = _marked(_maybe_symbolic_build, original_build)


def _patch_reduce_per_replica(tf_trainer):
    """Fix 2: ``reduce_per_replica`` averages scalar logs with ``axis=None``.

    Upstream's multi-worker branch reduces every step output along ``axis=0``, which a scalar
    (loss, metric) lacks; an all-reduced mean gives every worker the same logs, so callbacks
    that decide on them (EarlyStopping, ReduceLROnPlateau) decide alike. Values with a batch
    dimension keep upstream's ``axis=0``; the other reductions are left as they are.
    """
    from keras.src import tree

    original_reduce = tf_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and _in_multi_worker_mode(
            strategy
        ):

            def _reduce(v):
                rank = _first_local(strategy, v).shape.rank
                axis = None if rank == 0 else 0  # upstream: always 0
                return strategy.reduce("MEAN", v, axis=axis)

            return tree.map_structure(_reduce, values)
        return original_reduce(values, strategy, reduction)

    # Looked up as a module global at trace time by _make_function and
    # make_predict_function, so replacing the module attribute suffices.
    tf_trainer.reduce_per_replica = _marked(reduce_per_replica, original_reduce)


def _marked(wrapper, original):
    """The wrapper, carrying the original's docstring, the original itself (``__wrapped__``)
    and the marker that says Keras is patched already."""
    wrapper.__wrapped__ = original
    wrapper.__doc__ = original.__doc__
    setattr(wrapper, _MARKER, True)
    return wrapper
