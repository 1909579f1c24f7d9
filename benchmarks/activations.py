"""Activation elements per image of each registered model at 224 px: the proxy for training
memory per image behind `runtime.decide.choose_batch`'s MODEL_COST (the backward pass keeps
most layers' outputs). Builds each backbone symbolically on the CPU (no weights, no data):

    KERAS_BACKEND=tensorflow python benchmarks/activations.py [NAME ...]
"""

import math
import sys

import keras

from corolla import models


def activations(name: str, size: int = 224) -> int:
    spec = models.get(name)
    total = _count(spec.backbone((size, size, 3), None))
    keras.backend.clear_session()
    return total


def _count(model) -> int:
    """Every layer's output elements per image; a nested functional model (a keras-hub
    backbone) counted layer by layer."""
    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.Model) and hasattr(layer, "layers"):
            total += _count(layer)
            continue
        outputs = layer.output if isinstance(layer.output, (list, tuple)) else [layer.output]
        total += sum(math.prod(o.shape[1:]) for o in outputs if None not in o.shape[1:])
    return total


if __name__ == "__main__":
    names = sys.argv[1:] or models.names()
    base = activations("efficientnet_b0")
    for name in names:
        count = activations(name)
        print(f"{name:22s} {count / 1e6:8.1f} M  {count / base:5.2f} x efficientnet_b0",
              flush=True)
