"""Models: a registry of backbones with their preprocessing and image size (`registry`), the
factory that builds them behind one generic head (`factory`), keras-hub presets (`hub`)."""

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
