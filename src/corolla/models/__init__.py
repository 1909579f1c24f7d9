"""Models: a registry of backbones with their preprocessing and image size (`registry`), the
factory that builds them behind one generic head (`factory`), keras-hub presets (`hub`).

    applications: the `keras.applications` backbones, as a table: one row per model
    factory: `create_model`: a registered backbone or a keras-hub preset behind one head
    hub: `--model hub:PRESET`: a keras-hub backbone preset with Corolla's head
    ladder: the EfficientNet-Lite rung a timed run extracts its features with, and why
    layers: preprocessing layers that are part of saved models (serializable)
    padding: the padding pre-trained weights were trained with, and backbones that honour it
    preprocessing: input preprocessing as Keras layers, one function per weights' convention
    registry: the model registry: name -> backbone, preprocessing, image size, parameter count
    zoo: Corolla's own from-scratch CNNs for CPUs
"""

from corolla.models import applications, zoo  # noqa: F401  (register the built-in models)
from corolla.models.factory import (
    at_size,
    check_choice,
    check_weights,
    create_model,
    get,
    short_name,
    sublayers,
    weights_available,
    weights_unavailable,
)
from corolla.models.registry import ModelSpec, names, register

__all__ = ["ModelSpec", "at_size", "check_choice", "check_weights", "create_model", "get",
           "names", "register", "short_name", "sublayers", "weights_available",
           "weights_unavailable"]
