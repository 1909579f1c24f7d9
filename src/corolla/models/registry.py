"""The model registry: name -> how to build the backbone, its input preprocessing, its default
image size and its size in parameters (`corolla info --models`). Models are built by
`corolla.models.factory`, which also resolves `hub:PRESET` names. Importing this module does
not import Keras (the CLI validates names before the backend is chosen)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from corolla.errors import UserError, did_you_mean

HUB_PREFIX = "hub:"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backbone: Callable  # (input_shape, weights: None | "imagenet" | path) -> keras.Model
    preprocessing: Callable  # () -> list of Keras layers: float [0, 255] RGB -> backbone input
    image_size: int  # the size the backbone was designed (and pre-trained) for
    imagenet: bool  # has downloadable pre-trained weights (a hub preset: its own)
    description: str
    params: int | None = None  # backbone parameters (no head); None: known once built
    # The smallest input it takes: below it a pooling or stride would leave nothing (Keras
    # refuses under 32 px for most applications, 71 for Xception, 75 for InceptionV3).
    min_size: int = 32
    # Millions of output elements per image at 224 px, every layer summed: the proxy for its
    # training memory by which `recipe auto` sizes the batch (runtime.decide.choose_batch;
    # measured by benchmarks/activations.py). None: unknown (a hub preset).
    activations: float | None = None


_REGISTRY: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def names() -> list[str]:
    """The registered names (keras-hub presets are not listed: any preset name is accepted)."""
    return sorted(_REGISTRY)


def lookup(name: str) -> ModelSpec:
    """A registered model (`get` also resolves hub: presets)."""
    if name not in _REGISTRY:
        hint = did_you_mean(name, names())
        if hint:  # the whole list would bury the one meant
            raise UserError(f"unknown model {name!r}; {hint} (every model: corolla info "
                            f"--models; or hub:PRESET, a keras-hub preset)")
        raise UserError(f"unknown model {name!r}; choose one of: {', '.join(names())}, "
                        f"or hub:PRESET (a keras-hub preset)")
    return _REGISTRY[name]
