"""A model's class probabilities over a split or over images in memory, batch by batch: the
one batched prediction that training's val F1, the time probe and every evaluation share (test-
time augmentation's views averaged, a stop asked for by a signal checked at each batch, one
worker alone under a multi-worker strategy)."""

from __future__ import annotations

import sys
import weakref

import numpy as np
import tensorflow as tf

from corolla.data import pipeline
from corolla.data.layout import Split
from corolla.runtime import Plan
from corolla.scoring.tta import NO_TTA, apply_view, view_name
from corolla.stopping import check_stop

PROGRESS_STEPS = 10  # a progress bar (in a terminal) for predictions of this many batches


def predict_probabilities(model, split: Split, image_size: int, plan: Plan,
                          skip_bad_records: bool = False, tta: int = NO_TTA, log=None,
                          batches=None, callbacks=()):
    """Class probabilities [N, C] in the split's file order (padding dropped). `tta`: the mean
    over that many views of every image (see `corolla.scoring.tta`), one pass over the split
    each; `log` says which view runs. `batches`: `split_batches` of the same split and size,
    kept by a caller that predicts it again and again (training's val F1, every epoch).
    `callbacks`: Keras callbacks told of each batch's end (`on_predict_batch_end`: the time
    probe's timer)."""
    return _predict_views(model, batches or split_batches(split, image_size, skip_bad_records),
                          split.count, plan, tta, log, callbacks=callbacks)


# The most decoded bytes a split predicted again and again (training's val split) keeps in
# host memory: the competition's 3,712 val images take 0.56 GB at 224 px, 2.9 GB at 512 px.
CACHE_BYTES = 1 << 30


def split_batches(split: Split, image_size: int, skip_bad_records: bool = False):
    """`batches(batch)`: the split's padded uint8 batches (`pipeline.eval_dataset`), built once
    per batch size, and decoded once when they fit in CACHE_BYTES. A dataset can be iterated
    again and again; building it anew traces its functions anew, host time that is a sizeable
    part of a small split's pass and that a fast accelerator would wait for (figures:
    docs/benchmarks.md#figures-behind-the-defaults), and decoding every image again costs the
    same host time every epoch."""
    built = {}
    cache = pipeline.decoded_bytes(split.count, image_size) <= CACHE_BYTES

    def batches(batch: int):
        if batch not in built:
            built[batch] = pipeline.eval_dataset(split, image_size, batch,
                                                 skip_bad_records=skip_bad_records, cache=cache)
        return built[batch]

    return batches


def predict_images(model, images: np.ndarray, plan: Plan, tta: int = NO_TTA, log=None,
                   progress: bool | None = None):
    """Class probabilities [N, C] of images in memory (uint8 [N, S, S, 3] at the model's
    size), as `predict_probabilities` gives them for a split's (the same TTA views)."""
    def batches(batch):
        extra = -len(images) % batch  # full batches, as eval_dataset pads them
        padded = np.concatenate([images, np.zeros((extra, *images.shape[1:]), images.dtype)])
        return pipeline.untuned(tf.data.Dataset.from_tensor_slices(padded).batch(batch))

    return _predict_views(model, batches, len(images), plan, tta, log, progress)


def _predict_views(model, batches, count: int, plan: Plan, tta: int, log=None,
                   progress: bool | None = None, callbacks=()):
    """The mean over `tta` views of the probabilities of `count` images; `batches(batch)`: a
    fresh dataset of their padded, full batches."""
    with plan.inference_scope():
        batch = plan.inference_batch_for(count)
        # Exact step count: Keras warns when a dataset "runs out" before steps are given.
        steps = -(-count // batch)
        if progress is None:
            progress = sys.stdout.isatty() and steps * tta >= PROGRESS_STEPS
        total = None
        for view in range(tta):
            if tta > 1 and log is not None:
                log(f"test-time augmentation, view {view + 1} of {tta}: "
                    f"{view_name(view)}")
            views = apply_view(batches(batch), view, count, batch)
            if plan.multi_worker and plan.backend == "tensorflow":
                probabilities = _predict_locally(model, views, steps, callbacks)[:count]
            else:
                probabilities = model.predict(views, steps=steps, verbose=int(progress),
                                              callbacks=[stop_check(), *callbacks])[:count]
            if tta == 1:
                return probabilities
            total = probabilities.astype(np.float64) + (0 if total is None else total)
        return (total / tta).astype(np.float32)


def _predict_locally(model, batches, steps: int, callbacks=()) -> np.ndarray:
    """`model.predict` on this worker alone. Keras predicts through the strategy the model was
    built in: a model of a MultiWorkerMirroredStrategy splits every batch between the workers
    and gathers the parts worker by worker, out of the split's order (the per-epoch val F1 would be
    computed on misaligned rows). Called outside the strategy, the model reads its variables'
    local copies, identical on every worker. `callbacks` hear each batch's end, as predict's."""
    step = _local_step(model)
    found = []
    for batch, images in enumerate(batches.take(steps)):
        check_stop()
        found.append(step(images).numpy())
        for callback in callbacks:
            callback.on_predict_batch_end(batch, None)
    return np.concatenate(found)


# The local step of each model, traced once (a tf.function made per call would trace again at
# every epoch's validation, as Keras' own predict function does only after a compile). The
# function holds its model weakly: the cache keeps no model alive (k-fold trains several).
_local_steps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _local_step(model):
    if model not in _local_steps:
        held = weakref.ref(model)
        _local_steps[model] = tf.function(lambda images: held()(images, training=False))
    return _local_steps[model]


def stop_check():
    """A Keras callback that raises a stop asked for by a signal at the end of each batch
    (`stopping.check_stop`: the handler's own KeyboardInterrupt may have been lost)."""
    import keras

    class StopCheck(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            check_stop()

        on_test_batch_end = on_predict_batch_end = on_train_batch_end

    return StopCheck()
