"""Exported models, each run by its own runtime: a SavedModel by TensorFlow's loader, a .tflite
file by the LiteRT interpreter, an .onnx file by onnxruntime; and their agreement with the
Keras model they came from. Pure: returns data.

Also the float32 copy of a model trained in mixed precision (keras-team/keras#20710, #22443):
an exported graph of float16 layers loses precision and some runtimes refuse it, so exports are
made from the same layers and weights with every dtype policy float32.
"""

from __future__ import annotations

import json
import warnings

import numpy as np

from corolla.runtime import tflog

FORMATS = ("savedmodel", "tflite", "onnx")
QUANTIZE = ("none", "dynamic", "float16")


def _float32_policies(config):
    """The config with every layer's dtype policy float32 (mixed ones included)."""
    if isinstance(config, dict):
        if config.get("class_name") in ("DTypePolicy", "DTypePolicyMap") and \
                "config" in config and str(config["config"].get("name", "")).startswith("mixed"):
            return "float32"
        return {k: _float32_policies(v) for k, v in config.items()}
    if isinstance(config, list):
        return [_float32_policies(v) for v in config]
    return config


def as_float32(model):
    """`model` itself when it computes in float32; else the same architecture and weights
    with float32 policies (mixed precision keeps its variables in float32: nothing is
    lost)."""
    config = model.get_config()
    if "mixed" not in json.dumps(config):
        return model
    copy = model.__class__.from_config(_float32_policies(config))
    copy.set_weights(model.get_weights())
    return copy


def run_savedmodel(folder):
    import tensorflow as tf

    loaded = tf.saved_model.load(str(folder))  # kept: its functions need its variables
    return lambda images: np.asarray(loaded.serve(tf.constant(images, tf.float32)))


def _interpreter(path: str):
    """The LiteRT interpreter (ai_edge_litert, its new home) or TensorFlow's tf.lite one,
    which TensorFlow still ships but calls deprecated."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        import tensorflow as tf

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "tf.lite.Interpreter is deprecated"
            return tf.lite.Interpreter(model_path=path)
    return Interpreter(model_path=path)


# LiteRT's C++ notice when the interpreter first runs: not a fault, and not Corolla's to say.
XNNPACK_NOTICE = rb"^INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.$"


def run_tflite(path):
    interpreter = _interpreter(str(path))
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]

    def run(images):
        images = np.asarray(images, np.float32)
        with tflog.filtered_stderr(extra=(XNNPACK_NOTICE,)):
            interpreter.resize_tensor_input(inp["index"], images.shape)
            interpreter.allocate_tensors()
            interpreter.set_tensor(inp["index"], images)
            interpreter.invoke()
        return interpreter.get_tensor(out["index"]).copy()

    return run


def run_onnx(path):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda images: session.run(None, {name: np.asarray(images, np.float32)})[0]


RUNNERS = {"savedmodel": run_savedmodel, "tflite": run_tflite, "onnx": run_onnx}


def runner(fmt: str, path):
    """images float32 [N, S, S, 3] in [0, 255] -> probabilities [N, C], by `fmt`'s runtime."""
    return RUNNERS[fmt](path)


def agreement(reference: np.ndarray, exported: np.ndarray) -> dict:
    """How far an export's probabilities are from the Keras model's on the same images."""
    return {"images": len(reference),
            "max_abs_difference": float(np.abs(reference - exported).max(initial=0.0)),
            "top1_agreement": float((reference.argmax(1) == exported.argmax(1)).mean())
            if len(reference) else 1.0}
