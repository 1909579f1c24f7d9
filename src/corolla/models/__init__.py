"""Models: a registry of backbones with their preprocessing and image size, one generic head."""

from corolla.models import applications, zoo  # noqa: F401  (register the built-in models)
from corolla.models.registry import ModelSpec, at_size, create_model, get, names, register

__all__ = ["ModelSpec", "at_size", "create_model", "get", "names", "register"]
