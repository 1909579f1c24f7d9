"""The model registry: name -> how to build the backbone, its input preprocessing, its default
image size and learning rate. timm-style: everything is reached through `create_model`.

Importing this module does not import Keras (the CLI validates names before the backend is
chosen); the builders import it when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from corolla.errors import UserError


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backbone: Callable  # (input_shape, weights: None | "imagenet" | path) -> keras.Model
    preprocessing: Callable  # () -> list of Keras layers: float [0, 255] RGB -> backbone input
    image_size: int  # the size the backbone was designed (and pre-trained) for
    learning_rate: float  # peak rate at the default global batch of 16 x replicas
    imagenet: bool  # has downloadable ImageNet weights
    description: str


_REGISTRY: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str) -> ModelSpec:
    if name not in _REGISTRY:
        raise UserError(f"unknown model {name!r}; choose one of: {', '.join(names())}")
    return _REGISTRY[name]


def check_weights(spec: ModelSpec, weights: str) -> str | None:
    """Normalises the weights argument: None, "imagenet" or an existing local file."""
    if weights in ("", "none", None):
        return None
    if weights == "imagenet":
        if not spec.imagenet:
            raise UserError(f"model {spec.name!r} has no ImageNet weights; use --weights none "
                            f"or a local weights file")
        return weights
    if not Path(weights).is_file():
        raise UserError(f"weights file {weights!r} does not exist; pass --weights none, "
                        f"imagenet, or the path of a local backbone weights file (.h5)")
    return weights


def create_model(name: str, num_classes: int, image_size: int | None = None,
                 weights: str | None = None, train_backbone: bool = True, dropout: float = 0.0):
    """Backbone + global average pooling + Dense(num_classes) with a float32 softmax (so mixed
    precision never rounds the probabilities), with `dropout` before it. The model takes float RGB images in [0, 255]:
    preprocessing is inside it, so a saved model needs nothing else at inference."""
    import keras

    spec = get(name)
    weights = check_weights(spec, weights)
    size = image_size or spec.image_size
    if num_classes < 2:
        raise UserError(f"a classifier needs at least 2 classes, got {num_classes}")
    inputs = keras.Input((size, size, 3), name="image")
    x = inputs
    for layer in spec.preprocessing():
        x = layer(x)
    backbone = _build_backbone(spec, (size, size, 3), weights)
    backbone.trainable = train_backbone
    x = backbone(x, training=None if train_backbone else False)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    if dropout:
        x = keras.layers.Dropout(dropout, name="head_dropout")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32",
                                 name="probabilities")(x)
    return keras.Model(inputs, outputs, name=name)


def _build_backbone(spec: ModelSpec, input_shape, weights):
    try:
        return spec.backbone(input_shape, weights)
    except Exception as e:  # keras.utils.get_file raises a bare Exception on network failure
        if weights == "imagenet" and ("URL fetch failure" in str(e) or isinstance(e, OSError)):
            raise UserError(f"could not download ImageNet weights for {spec.name} (no network?);"
                            f" use --weights none or --weights PATH to a local copy of the "
                            f"Keras 'notop' weights file") from None
        raise
