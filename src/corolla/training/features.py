"""Frozen features, fast: while the backbone is frozen (`--freeze-backbone`, or the first phase
of a two-phase fine-tuning), its pooled features of an image never change, so they are computed
once and the head trains on them, an epoch of head training costing seconds on a CPU instead of
a pass of the backbone over every image.

That holds only when the training augmentation allows it: none, or flips alone, whose features
are computed for both the image and its mirror image, and each epoch draws one of the two for
every example (as the flip augmentation draws a mirror image with probability 1/2). Crops,
affine and colour changes, mixup and cutmix give new inputs every epoch: those phases take the
ordinary path.

The head is the full model's own layers (dropout, the classifier) on a features input: it
trains the full model's weights with the full model's optimizer, so the run's backups, its
best model and its validation see the full model as on the slow path. `FrozenPath` trains a
run's frozen phases so. In a timed run, the first of them starts from the linear head
(`linear_head`: a logistic regression on the same cached features, the run's floor).
"""

from __future__ import annotations

import time

import keras
import numpy as np
import tensorflow as tf

from corolla.data import pipeline
from corolla.errors import UserError
from corolla.files import read_json
from corolla.runs import paths
from corolla.scoring.batched import stop_check
from corolla.training import backup, linear_head
from corolla.training.timing import budget
from corolla.training.callbacks import RunProgress
from corolla.training.compiling import compile_head
from corolla.training.phases import Phase
from corolla.training.preparing import Prepared

ALLOWED = ("flip",)  # augmentations the cached features can reproduce
HEAD_LAYERS = ("head_dropout", "probabilities")  # models.create_model's, after its "pool"


def cacheable(augment) -> bool:
    """Whether training on cached features reproduces the augmentation `augment` (names)."""
    return set(augment) <= set(ALLOWED)


def split_model(model) -> tuple[keras.Model, keras.Model]:
    """(features, head) of a model from `models.create_model`: images -> pooled features
    (preprocessing, backbone, pooling), and pooled features -> probabilities, sharing the
    model's layers (training the head trains the model)."""
    pool = model.get_layer("pool")
    features = keras.Model(model.inputs, pool.output, name="frozen_features")
    inputs = keras.Input(pool.output.shape[1:], name="features")
    x = inputs
    names = {layer.name for layer in model.layers}
    for name in HEAD_LAYERS:
        if name in names:
            x = model.get_layer(name)(x)
    return features, keras.Model(inputs, x, name="head")


def extract(features: keras.Model, split, size: int, batch: int, flips: bool,
            skip_bad_records: bool = False) -> np.ndarray:
    """The features of every image of `split` at `size` px in file order (the order of
    `pipeline.metadata`'s labels): [N, D], or [2, N, D] with their mirror images' when
    `flips`."""
    steps = -(-split.count // batch)
    views = [lambda x: x] + ([tf.image.flip_left_right] if flips else [])
    out = []
    for view in views:
        ds = pipeline.eval_dataset(split, size, batch, skip_bad_records=skip_bad_records)
        out.append(features.predict(ds.map(view), steps=steps, verbose=0)[: split.count])
    return np.stack(out) if flips else out[0]


def epoch_order(seed: int, epoch: int, count: int, examples: int, flips: bool):
    """(indices, views) of one epoch: `examples` draws, a fresh permutation of the `count`
    examples repeated as needed, each with view 0 (as it is) or, with `flips`, 1 (mirrored) at
    random: from (seed, epoch) alone, so a resumed run draws the same."""
    rng = np.random.default_rng([seed, epoch])
    indices = np.concatenate([rng.permutation(count) for _ in range(-(-examples // count))])
    views = rng.integers(0, 2 if flips else 1, size=examples)
    return indices[:examples], views


def dataset(features: np.ndarray, labels: np.ndarray, num_classes: int, batch: int,
            steps: int, first_epoch: int, last_epoch: int, seed: int, class_weights=None):
    """(features, one-hot label) batches of epochs [first_epoch, last_epoch), `steps` each.
    `features`: [N, D], or [2, N, D] (as they are, mirrored). `class_weights` ([num_classes]):
    with each example's weight too, as `pipeline.train_dataset` gives them."""
    flips = features.ndim == 3
    table = features if flips else features[None]
    draws = [epoch_order(seed, e, table.shape[1], steps * batch, flips)
             for e in range(first_epoch, last_epoch)]
    indices = np.concatenate([d[0] for d in draws])
    views = np.concatenate([d[1] for d in draws])
    x = table[views, indices]
    y = np.eye(num_classes, dtype=np.float32)[np.asarray(labels)[indices]]
    examples = (x, y) if class_weights is None else \
        (x, y, y @ np.asarray(class_weights, np.float32))
    return pipeline.untuned(
        tf.data.Dataset.from_tensor_slices(examples).batch(batch, drop_remainder=True))


class OnModel(keras.callbacks.CallbackList):
    """Callbacks that see `model` whatever model `fit` trains (the head, on features): the
    validation, the backups and the best model are the full model's. Early stopping, asked
    for on the full model, stops the fit."""

    def __init__(self, callbacks, model):
        self.full, self.fitted = model, None
        super().__init__(list(callbacks), model=model)

    def set_model(self, model):
        self.fitted = model
        super().set_model(self.full)

    def on_epoch_end(self, epoch, logs=None):
        # Into `fit`'s own logs (CallbackList would pass a copy): the progress line and the
        # history show the validation figures these callbacks add.
        for callback in self.callbacks:
            callback.on_epoch_end(epoch, logs)
        if self.fitted is not None and self.full.stop_training:
            self.fitted.stop_training = True


class FrozenPath:
    """A run's frozen phases trained as a head on cached features, where they can be (`usable`):
    the model split once (`halves`), the features computed once per image size."""

    def __init__(self, model, plan, augment, log):
        self.model, self.plan, self.augment, self.log = model, plan, augment, log
        self._halves = None
        self.head, self.cached, self.cached_size, self.said_slow = None, None, None, False
        self.linear = None  # (kernel, bias) of the linear head this session fit: `linear_head`

    def halves(self) -> tuple[keras.Model, keras.Model]:
        """(frozen features, head) of the model (`split_model`), made once."""
        if self._halves is None:
            with self.plan.scope():
                self._halves = split_model(self.model)
        return self._halves

    def usable(self, phase: Phase, say: bool = True) -> bool:
        """Whether `phase` trains the head on cached features: frozen, an augmentation they
        reproduce, one process (a worker's share of the data would need its own cache); says
        why not (with `say`), once, when the backbone is frozen."""
        if not phase.frozen:
            return False
        why = "" if cacheable(self.augment) else \
            f"the augmentation ({', '.join(self.augment)}) changes the images every epoch"
        if self.plan.multi_worker:
            why = "several processes share the data"
        if why and say and not self.said_slow:
            self.log(f"frozen backbone: features computed every epoch ({why}; cached when the "
                     f"augmentation is {' or '.join(['none', *ALLOWED])})")
            self.said_slow = True
        return not why

    def cache(self, size: int, ready: Prepared, val_split, flips: bool) -> None:
        """The frozen features of the training images at `size` px (with their mirror
        images', `flips`), their labels, and those of `val_split` (None: none) at the run's
        input size, computed once per size (`cached`), in the log with their time."""
        if self.cached_size == size:
            return
        config, plan, layout = ready.config, self.plan, ready.layout
        began = time.monotonic()
        extractor, self.head = self.halves()
        train_split = layout.split("train")
        batch, skip = plan.inference_batch, config.data.skip_bad_records
        self.cached = (extract(extractor, train_split, size, batch, flips, skip),
                       pipeline.metadata(train_split, skip)["labels"],
                       None if val_split is None else
                       extract(extractor, val_split, config.model.input_size, batch, False,
                               skip))
        self.cached_size = size
        val_text = "" if val_split is None else f" and {val_split.count} val images"
        self.log(f"frozen backbone: features of {train_split.count} training images"
                 f"{' and their mirror images' if flips else ''}{val_text} cached in "
                 f"{time.monotonic() - began:.0f} s; the head trains on them")

    def fit_linear_head(self, ready: Prepared, val_f1, checkpoint, class_weights) -> None:
        """The linear head (`linear_head.fit`) on the cached training features (the images as
        they are), written into the model's classifier. With `val_f1` (a validated run): at
        `linear_head.C`, scored on the cached val features and recorded in `checkpoint` (with
        its C) as the best so far (`Checkpoint.seed`), its figure said in the log,
        and the same head fit on train + val into the chief's run folder (`saving.head_refit`
        makes it refit.keras where the run keeps it). Without (the refit of a run folder
        that lacks that fit): at the C its run chose (`chosen_c`)."""
        train_features, labels, val_features = self.cached
        train_features = train_features[0] if train_features.ndim == 3 else train_features
        classes = len(ready.layout.class_names)
        began = time.monotonic()
        c = linear_head.C if val_f1 is not None else chosen_c(ready.run_dir)
        kernel, bias = linear_head.fit(train_features, labels, classes, class_weights, c)
        with self.plan.scope():
            linear_head.put(self.model, kernel, bias)
        self.linear = (kernel, bias)
        took = time.monotonic() - began
        if val_f1 is None:
            self.log(f"linear head: a logistic regression (C {c:g}) on the frozen features of "
                     f"{len(labels)} images, fit in {took:.1f} s")
            return
        f1 = linear_head.score(val_features, val_f1.labels, kernel, bias)
        checkpoint.seed(self.model, {"val_f1": f1, "c": c})
        if checkpoint.history_path is not None:  # the chief's: in its run folder
            # Seconds, the features at hand: the probe's data for the head a run submits.
            everything = linear_head.fit(np.concatenate([train_features, val_features]),
                                         np.concatenate([labels, val_f1.labels]), classes,
                                         class_weights, c)
            backup.write_arrays(list(everything),
                                checkpoint.history_path.parent / paths.LINEAR_HEAD_ALL)
        self.log(f"linear head: val macro F1 {f1:.4f} (a logistic regression on the frozen "
                 f"features at C {c:g}, the linear probe's, fit in {took:.1f} s); training "
                 f"starts from it, and an epoch that trains the backbone is kept only where it "
                 f"beats it on val")

    def fit(self, phase: Phase, first: int, ready: Prepared, steps: int, val_f1, callbacks,
            class_weights, verbose, checkpoint=None) -> None:
        """Trains the head alone on the backbone's cached features for epochs [first,
        phase.end) of `steps` each: computed once per size, with their mirror images' where
        flips augment a phase of more than one epoch (`budget.cached_views`). `val_f1`: the run's
        `callbacks.ValMacroF1`, which validates on the val features meanwhile (None: a refit,
        which does not validate); `callbacks` see the full model (`OnModel`). `checkpoint`
        (a timed run's): at the run's first epoch, the head first fit as the linear head
        (`fit_linear_head`), the best so far."""
        config, plan, t, layout = ready.config, self.plan, ready.config.train, ready.layout
        flips = budget.cached_views("flip" in config.data.augment, phase.end - phase.start) > 1
        self.cache(phase.size, ready, val_f1.split if val_f1 is not None else None, flips)
        if checkpoint is not None and first == 0:
            self.fit_linear_head(ready, val_f1, checkpoint, class_weights)
        train_features, labels, val_features = self.cached
        with plan.scope():
            compile_head(self.head, self.model, plan, ready.steps_per_execution)
        data = dataset(train_features, labels, len(layout.class_names), plan.global_batch,
                       steps, first, phase.end, t.seed, class_weights)
        if val_f1 is not None:
            val_f1.cached = (self.head, val_features)
        try:
            self.head.fit(data, epochs=phase.end, initial_epoch=first,
                          steps_per_epoch=steps,
                          callbacks=[OnModel(callbacks, self.model), RunProgress(t.epochs),
                                     stop_check()],
                          shuffle=False, verbose=verbose)
        finally:
            if val_f1 is not None:
                val_f1.cached = None


# The C of the heads of runs whose linear_head.json records none (made before it did).
UNRECORDED_C = 0.01


def chosen_c(run_dir) -> float:
    """The C of the linear head the run `run_dir` fit (its linear_head.json), for its refit:
    `linear_head.C` where no folder is given or it holds no head, UNRECORDED_C where the head
    recorded no C."""
    path = None if run_dir is None else run_dir / paths.LINEAR_HEAD
    if path is None or not path.is_file():
        return linear_head.C
    record = read_json(path, "train the run again")
    c = record.get("c", UNRECORDED_C) if isinstance(record, dict) else None
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < float("inf"):
        raise UserError(f"{path}: c is {c!r}, not a positive number; train the run again")
    return float(c)
