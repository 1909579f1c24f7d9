"""The writer of an export folder: a model for deployment in one format, with what it needs
beside it.

    OUT/saved_model/ | OUT/model.tflite | OUT/model.onnx   the model: raw RGB in [0, 255] at
                                                           the run's size -> probabilities
    OUT/classes.txt                                        column j's class name, line j
    OUT/export.json                                        input size, how a photo is made
                                                           into the input, format,
                                                           quantization, source run,
                                                           versions, agreement

Keras 3's `model.export` makes all three (SavedModel: its ExportArchive; LiteRT: TensorFlow's
TFLite converter behind it; ONNX: tf2onnx, the route Keras documents on TensorFlow).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from corolla.data.classes import CLASSES_FILE, format_classes_file
from corolla.files import write_json, write_text_atomic

ABOUT = "export.json"
MODEL_FILES = {"savedmodel": "saved_model", "tflite": "model.tflite", "onnx": "model.onnx"}


def write_model(model, folder: Path, fmt: str, quantize: str = "none") -> Path:
    """`model` in format `fmt` inside `folder`; `quantize` (tflite only): "dynamic" (int8
    weights) or "float16" (float16 weights)."""
    path = folder / MODEL_FILES[fmt]
    # A loaded model has not been called yet, and Keras' ONNX export refuses such a model.
    model(np.zeros((1, *model.input_shape[1:]), np.float32))
    if fmt == "savedmodel":
        model.export(str(path), format="tf_saved_model", verbose=False)
    elif fmt == "onnx":
        with warnings.catch_warnings():  # Keras' tf2onnx shim asks NumPy for `np.object`
            warnings.filterwarnings("ignore", message=".*np.object", category=FutureWarning)
            model.export(str(path), format="onnx", verbose=False)
    else:
        import tensorflow as tf

        options = {}
        if quantize != "none":
            options["optimizations"] = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            options["target_spec"] = {"supported_types": [tf.float16]}
        model.export(str(path), format="litert", verbose=False, **options)
    return path


def write_beside(folder: Path, class_names, about: dict) -> None:
    write_text_atomic(folder / CLASSES_FILE, format_classes_file(class_names))
    write_json(about, folder / ABOUT)


def size_bytes(path: Path) -> int:
    """A model file's size, or a SavedModel folder's total."""
    return path.stat().st_size if path.is_file() else \
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
