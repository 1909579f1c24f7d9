"""Thawed steps, cheaper: where a trained phase trains only the top of the backbone
(train.unfreeze_fraction below 1) with its BatchNorm in inference mode, the layers below the
lowest trained one compute the same output for the same image at every epoch. Where the
augmentation can be enumerated (none, or flips: `features.cacheable`), that output is computed
once for every training image and its mirror image, and the top (the model's own upper layers,
its pooling and head: training it trains the model) trains on it, each epoch drawing one view
per example as the flip would (`features.epoch_order`).

The cut is a point of the backbone's graph at or below its lowest trained layer where one
tensor alone crosses from the layers under it to those above (`clean_cut`); a backbone without
one, an augmentation that changes the images every epoch, or several processes sharing the data
take the ordinary path. Dropout below the cut (EfficientNet's stochastic depth) is left out of
the cached outputs, as it is of the frozen features (`features`): it regularises a part that
does not train.

The outputs are kept in memory up to a share of the host's (`pipeline.memory_budget`), else in a
file of the run's backup folder, which goes with the backup once the run is trained. Validation,
the backups and the saved model are the full model's (`features.OnModel`).

Taken only where `train.cache_thawed` is set: off by default until the suite shows that the
cheaper steps pay for the caching pass."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from corolla import models
from corolla.data import pipeline
from corolla.scoring.batched import stop_check
from corolla.training.callbacks import RunProgress
from corolla.training.compiling import compile_head
from corolla.training.features import ALLOWED, HEAD_LAYERS, OnModel, cacheable, epoch_order
from corolla.training.phases import Phase, batchnorm_layers, below_unfrozen
from corolla.training.preparing import Prepared
from corolla.training.timing import budget

FOLDER = "thawed-cache"  # inside the backup folder: the lower part's outputs past the bound
OFF = "train.cache_thawed is off"  # (the default, said nowhere: nothing the user asked for)


def graph_nodes(backbone) -> list | None:
    """The nodes of `backbone`'s own graph from its input to its output (a topological order),
    or None where a layer is called more than once in it (no single tensor per layer)."""
    by_depth = backbone._nodes_by_depth
    nodes = [node for depth in sorted(by_depth, reverse=True) for node in by_depth[depth]]
    operations = [id(node.operation) for node in nodes]
    return nodes if len(set(operations)) == len(operations) else None


def trained_layers(backbone, fraction: float) -> set:
    """The ids of the layers of `backbone` a trained phase trains with BatchNorm in inference
    mode and its top `fraction` thawed (`phases.freeze`)."""
    frozen = {id(layer) for layer in below_unfrozen(backbone, fraction)}
    frozen |= {id(layer) for layer in batchnorm_layers(backbone)}
    return {id(layer) for layer in models.sublayers(backbone)
            if layer.weights and not isinstance(layer, keras.Model) and id(layer) not in frozen}


def clean_cut(backbone, fraction: float) -> list | None:
    """Where `backbone` is cut (`split_at`): [(model, node), ...] from `backbone` down through
    the nested models that hold its lowest trained layer (`trained_layers`; a registered
    backbone can wrap a keras-hub one behind its preprocessing), the last node the cut: in
    its model's graph, one whose one output alone crosses to the nodes after it, below the
    lowest that holds a trained layer; of those down to the first residual `Add` and at the
    highest one's resolution, the one of fewest values an image (a block's expanded activations
    can be six times its input, and recomputing a frozen 1x1 expansion is cheap; the highest
    of equals). None where there is none, or where nothing trains."""
    trained = trained_layers(backbone, fraction)
    return _cut(backbone, trained) if trained else None


def _cut(model, trained: set) -> list | None:
    nodes = graph_nodes(model)
    if nodes is None:
        return None
    holds = [any(id(layer) in trained for layer in [node.operation,
                                                    *models.sublayers(node.operation)])
             for node in nodes]
    if True not in holds:
        return None
    position = {id(node): k for k, node in enumerate(nodes)}
    parents = [[position[id(p)] for p in node.parent_nodes] for node in nodes]

    def crossing(boundary):
        return {p for j in range(boundary + 1, len(nodes)) for p in parents[j] if p <= boundary}

    first = holds.index(True)
    nested = nodes[first]
    if isinstance(nested.operation, keras.Model) and crossing(first - 1) == {first - 1} and \
            crossing(first) <= {first} and len(nested.input_tensors) == 1 and \
            len(nested.output_tensors) == 1:
        inner = _cut(nested.operation, trained)  # the cut inside the model it calls
        if inner is not None:
            return [(model, nested), *inner]
    cuts = []
    for boundary in range(first - 1, 0, -1):
        if crossing(boundary) != {boundary} or len(nodes[boundary].output_tensors) != 1:
            continue
        if cuts and _shape(nodes[boundary])[:-1] != _shape(cuts[0])[:-1]:
            break
        cuts.append(nodes[boundary])
        if isinstance(nodes[boundary].operation, keras.layers.Add):
            break
    if not cuts:
        return None
    return [(model, min(cuts, key=lambda node: np.prod([d or 1 for d in _shape(node)])))]


def _shape(node) -> tuple:
    """The shape of an image's output of `node` where the backbone was built (a model of any
    size shares the layers of one built at its size: `models.create_model`)."""
    return tuple(node.operation._inbound_nodes[0].output_tensors[0].shape[1:])


def _between(inputs, outputs):
    """The model from `inputs` to `outputs` of one graph; None where they are the same
    tensor (nothing to compute)."""
    return None if inputs is outputs else keras.Model(inputs, outputs)


def split_at(model, backbone, cut: list) -> tuple[keras.Model, keras.Model]:
    """(lower, top) of a model from `models.create_model` cut where `clean_cut` says in its
    `backbone`: images -> the cut's output (preprocessing and the backbone below), and the
    cut's output -> probabilities (the backbone above, the pooling, the head), sharing the
    model's layers (training the top trains the model)."""
    (outer, node), inner = cut[-1], cut[:-1]
    tensor = node.output_tensors[0]
    lowers = [_between(m.inputs[0], n.input_tensors[0]) for m, n in inner] + \
        [_between(outer.inputs[0], tensor)]
    tops = [_between(tensor, outer.outputs[0])] + \
        [_between(n.output_tensors[0], m.outputs[0]) for m, n in reversed(inner)]
    # The preprocessed images the backbone takes in the model's own graph.
    (call,) = [node for nodes in model._nodes_by_depth.values() for node in nodes
               if node.operation is backbone]
    x = call.input_tensors[0]
    for part in lowers:
        x = x if part is None else part(x)
    lower = keras.Model(model.inputs, x, name="thawed_lower")
    inputs = keras.Input(tensor.shape[1:], name="lower_outputs")
    x = inputs
    for part in tops:
        x = x if part is None else part(x)
    x = model.get_layer("pool")(x)
    names = {layer.name for layer in model.layers}
    for name in HEAD_LAYERS:
        if name in names:
            x = model.get_layer(name)(x)
    return lower, keras.Model(inputs, x, name="thawed_top")


class ViewCache:
    """The lower part's outputs of `count` examples in `views` views: in memory, or where
    they would take more than `bound` bytes, in a file of `folder` (np.memmap)."""

    def __init__(self, views: int, count: int, shape, dtype, bound: float, folder: Path):
        self.shape = (views, count, *shape)
        self.bytes = int(np.prod(self.shape)) * np.dtype(dtype).itemsize
        self.path = None
        if self.bytes <= bound:
            self.table = np.empty(self.shape, dtype)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / "lower-outputs.npy"
            self.table = np.lib.format.open_memmap(self.path, "w+", dtype, self.shape)

    def batches(self, labels, num_classes: int, batch: int, steps: int, first_epoch: int,
                last_epoch: int, seed: int, class_weights=None):
        """(outputs, one-hot label[, weight]) batches of epochs [first_epoch, last_epoch),
        `steps` each, drawn as `features.dataset` draws them, read a batch at a time."""
        views, count = self.shape[:2]
        labels = np.asarray(labels)
        eye = np.eye(num_classes, dtype=np.float32)
        weights = None if class_weights is None else np.asarray(class_weights, np.float32)

        def gather():
            for epoch in range(first_epoch, last_epoch):
                indices, chosen = epoch_order(seed, epoch, count, steps * batch, views > 1)
                for k in range(0, steps * batch, batch):
                    at, view = indices[k:k + batch], chosen[k:k + batch]
                    y = eye[labels[at]]
                    x = self.table[view, at]
                    yield (x, y) if weights is None else (x, y, y @ weights)

        spec = [tf.TensorSpec((batch, *self.shape[2:]), self.table.dtype),
                tf.TensorSpec((batch, num_classes), tf.float32)]
        if weights is not None:
            spec.append(tf.TensorSpec((batch,), tf.float32))
        return pipeline.untuned(tf.data.Dataset.from_generator(gather, output_signature=tuple(
            spec)).prefetch(2))

    def close(self) -> None:
        """The file (if any) removed."""
        self.table = None
        if self.path is not None:
            shutil.rmtree(self.path.parent, ignore_errors=True)


def cache_views(lower, split, size: int, batch: int, flips: bool, skip_bad_records: bool,
                bound: float, folder: Path) -> ViewCache:
    """`lower`'s outputs (`split_at`) of every image of `split` at `size` px in file order (the
    order of `pipeline.metadata`'s labels), and with `flips` of its mirror image too, computed
    `batch` images at a time into a `ViewCache` (in memory up to `bound` bytes, else in
    `folder`)."""
    views = [None] + ([tf.image.flip_left_right] if flips else [])
    table = None
    for v, view in enumerate(views):
        done = 0
        ds = pipeline.eval_dataset(split, size, batch, skip_bad_records=skip_bad_records)
        for images in ds if view is None else ds.map(view):
            out = lower.predict_on_batch(images)[: split.count - done]
            if table is None:
                table = ViewCache(len(views), split.count, out.shape[1:], out.dtype, bound,
                                  folder)
            table.table[v, done:done + len(out)] = out
            done += len(out)
            if done >= split.count:
                break
    if table.path is not None:
        table.table.flush()
    return table


class ThawedPath:
    """A run's trained phases trained as the backbone's top on its lower part's cached outputs,
    where they can be (`usable`): the cut found and the model split once, the outputs computed
    once per image size. `backbone`: the model's (None: nothing frozen); `frozen_bn`: its
    BatchNorm in inference mode when trained."""

    def __init__(self, model, backbone, plan, config, frozen_bn: bool, log):
        self.model, self.backbone, self.plan, self.log = model, backbone, plan, log
        self.config, self.frozen_bn = config, frozen_bn
        self._split, self.cut = None, None
        self.cached, self.cached_size, self.said = None, None, False
        self.folder: Path | None = None  # the run's backup folder (`Trainer.callbacks`)
        self.bound = None  # bytes kept in memory at most; None: `pipeline.memory_budget`

    def why_not(self) -> str:
        """Why trained phases cannot take this path ("" where they can)."""
        t, augment = self.config.train, self.config.data.augment
        if self.backbone is None or t.unfreeze_fraction >= 1:
            return "the whole backbone trains"
        if not t.cache_thawed:
            return OFF
        if not self.frozen_bn:
            return "its BatchNorm trains"
        if not cacheable(augment):
            return f"the augmentation ({', '.join(augment)}) changes the images every epoch"
        if self.plan.multi_worker:
            return "several processes share the data"
        if self.halves() is None:
            return "no single tensor crosses below its lowest trained layer"
        return ""

    def usable(self, phase: Phase, say: bool = True) -> bool:
        """Whether `phase` trains the top on cached outputs; says why not (with `say`), once,
        where only the top trains."""
        if phase.frozen:
            return False
        why = self.why_not()
        if why and say and not self.said and why not in ("the whole backbone trains", OFF):
            self.log(f"backbone's top trained on images every epoch ({why}; its frozen lower "
                     f"part's outputs are cached when the augmentation is "
                     f"{' or '.join(['none', *ALLOWED])})")
            self.said = True
        return not why

    def halves(self):
        """(lower part, top) of the model split at the cut (`split_at`), made once; None
        where the backbone has no cut."""
        if self._split is None:
            cut = clean_cut(self.backbone, self.config.train.unfreeze_fraction)
            if cut is None:
                self._split = ()
            else:
                with self.plan.scope():
                    self._split = split_at(self.model, self.backbone, cut)
                self.cut = cut[-1][1].operation.name
        return self._split or None

    def cache(self, size: int, ready: Prepared, flips: bool) -> None:
        """The lower part's outputs of every training image at `size` px (with its mirror
        image's, `flips`) and their labels, computed once per size (`cached`), in the log with
        their time, size and place."""
        if self.cached_size == size:
            return
        self.close()
        began = time.monotonic()
        lower, _ = self.halves()
        split, skip = ready.layout.split("train"), ready.config.data.skip_bad_records
        table = cache_views(lower, split, size, self.plan.inference_batch, flips, skip,
                            pipeline.memory_budget() if self.bound is None else self.bound,
                            self.folder / FOLDER)
        self.cached = (table, pipeline.metadata(split, skip)["labels"])
        self.cached_size = size
        where = "in memory" if table.path is None else f"in {table.path}"
        self.log(f"backbone's frozen lower part (up to {self.cut}): its outputs for "
                 f"{split.count} training images{' and their mirror images' if flips else ''} "
                 f"cached in {time.monotonic() - began:.0f} s ({table.bytes / 1e9:.2f} GB "
                 f"{where}); the top trains on them")

    def fit(self, phase: Phase, first: int, end: int, ready: Prepared, steps: int, callbacks,
            class_weights, verbose) -> None:
        """Trains the top on the cached outputs for epochs [first, end) of `steps`
        each (computed once per size; with their mirror images' where flips augment more than
        one trained epoch there: `budget.cached_views`); `callbacks` see the full model
        (`features.OnModel`)."""
        config, plan, t = ready.config, self.plan, ready.config.train
        size = phase.size or config.model.input_size
        epochs = sum(p.end - p.start for p in ready.phases
                     if not p.frozen and (p.size or config.model.input_size) == size)
        self.cache(size, ready, budget.cached_views("flip" in config.data.augment, epochs) > 1)
        _, top = self.halves()
        table, labels = self.cached
        with plan.scope():
            compile_head(top, self.model, plan, ready.steps_per_execution)
        data = table.batches(labels, len(ready.layout.class_names), plan.global_batch, steps,
                             first, end, t.seed, class_weights)
        top.fit(data, epochs=end, initial_epoch=first, steps_per_epoch=steps,
                callbacks=[OnModel(callbacks, self.model), RunProgress(t.epochs), stop_check()],
                shuffle=False, verbose=verbose)

    def close(self) -> None:
        """The cached outputs let go (their file removed)."""
        if self.cached is not None:
            self.cached[0].close()
        self.cached, self.cached_size = None, None
