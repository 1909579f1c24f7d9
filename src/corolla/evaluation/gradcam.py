"""Why the model decided: Grad-CAM heatmaps (Selvaraju et al. 2017), computed with Keras on the
run's own model.

The feature map explained is the model's last one with a spatial layout, found generically:
Corolla's models are a chain of top-level layers (preprocessing, backbone, pooling, head), so
the chain is run layer by layer and split after the last layer whose output is [B, H, W, C]
(the backbone's convolutional map), whatever the architecture. Grad-CAM weighs each channel of
that map by the mean gradient of the class's log-probability over it, sums the weighted
channels, keeps the positive part and scales it to the image: where evidence for the class
lies. Gradients come from the backend's own autodiff (TensorFlow's tape, or `jax.vjp`).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from corolla.errors import UserError


def _chain(model):
    """(front, back): functions of the model's top-level chain, split after the last layer
    whose output has a spatial layout [B, H, W, C]."""
    import keras

    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    probe = keras.ops.zeros((1, *model.input_shape[1:]))
    last, x = None, probe
    try:
        for i, layer in enumerate(layers):
            x = layer(x, training=False)
            if len(x.shape) == 4 and x.shape[1] > 1 and x.shape[2] > 1:
                last = i
    except (TypeError, ValueError) as e:  # not a chain: a branch needs inputs it did not get
        raise UserError(f"Grad-CAM needs a model whose layers form a chain; {model.name}'s do "
                        f"not ({e})") from None
    if last is None or len(x.shape) != 2:
        raise UserError(f"{model.name} has no spatial feature map to explain (e.g. a "
                        f"transformer's tokens); Grad-CAM explains convolutional models")

    def run(part, x):
        for layer in part:
            x = layer(x, training=False)
        return x

    return (lambda x: run(layers[:last + 1], x)), (lambda f: run(layers[last + 1:], f))


def _gradients(back, features, classes):
    """(d log p[class] / d features, probabilities), per image."""
    import keras

    def score(f):
        p = back(f)
        chosen = keras.ops.take_along_axis(p, keras.ops.expand_dims(classes, 1), axis=1)
        return keras.ops.sum(keras.ops.log(keras.ops.maximum(chosen, 1e-12))), p

    if keras.backend.backend() == "jax":
        import jax

        (_, p), grads = jax.value_and_grad(score, has_aux=True)(features)
        return np.asarray(grads), np.asarray(p)
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(features)
        total, p = score(features)
    return tape.gradient(total, features).numpy(), p.numpy()


def heatmaps(model, images, classes=None, batch: int = 16):
    """(heatmaps float32 [N, S, S] in [0, 1], probabilities [N, C], the explained classes
    [N]) for `images` (float or uint8 [N, S, S, 3] at the model's input size, raw RGB in
    [0, 255]). `classes`: the class to explain per image (default: the predicted one)."""
    import keras

    front, back = _chain(model)
    images = np.asarray(images, np.float32)
    maps, probs, chosen = [], [], []
    for start in range(0, len(images), batch):
        x = keras.ops.convert_to_tensor(images[start:start + batch])
        features = front(x)
        if classes is None:
            wanted = np.asarray(back(features)).argmax(1)
        else:
            wanted = np.asarray(classes[start:start + batch])
        grads, p = _gradients(back, features, keras.ops.convert_to_tensor(wanted, "int32"))
        fmap = np.asarray(features, np.float32)
        cam = np.maximum((fmap * grads.mean(axis=(1, 2), keepdims=True)).sum(-1), 0)
        maps.append(cam)
        probs.append(p)
        chosen.append(wanted)
    cams = np.concatenate(maps)
    peak = cams.reshape(len(cams), -1).max(1)[:, None, None]
    cams = np.where(peak > 0, cams / np.maximum(peak, 1e-12), 0)
    return upsample(cams, images.shape[1]), np.concatenate(probs), np.concatenate(chosen)


def upsample(maps: np.ndarray, size: int) -> np.ndarray:
    """[N, h, w] -> [N, size, size], bilinear (the map's cells are regions of the image)."""
    return np.stack([np.asarray(Image.fromarray(m.astype(np.float32), "F").resize(
        (size, size), Image.BILINEAR)) for m in maps]).clip(0, 1).astype(np.float32)


def explainer(model):
    """images (uint8 or float [N, H, W, 3], any square size) -> (heatmaps [N, H, W],
    probabilities, classes) with `model`, which sees them at its own input size. A UserError
    at once when the model has nothing to explain (see `_chain`)."""
    import keras

    _chain(model)
    size = model.input_shape[1]

    def explain(images, classes=None):
        images = np.asarray(images, np.float32)
        seen = images if images.shape[1] == size else np.asarray(keras.ops.image.resize(
            images, (size, size), antialias=True))
        maps, probabilities, chosen = heatmaps(model, seen, classes)
        if images.shape[1] != size:
            maps = upsample(maps, images.shape[1])
        return maps, probabilities, chosen

    return explain
