"""The `keras.applications` backbones, as a table: one row per model, one family per
preprocessing convention and construction rule.

A row's parameter count is that of the backbone without its top (Keras' `include_top=False`,
so it holds for any input size and class count): `corolla info --models` prints it without
building anything, and tests/models/test_registry.py checks every row against the built
backbone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from corolla.models import preprocessing
from corolla.models.registry import ModelSpec, register


@dataclass(frozen=True)
class Family:
    preprocessing: Callable  # () -> Keras layers: [0, 255] RGB -> what the weights expect
    kwargs: dict = field(default_factory=dict)  # extra constructor arguments
    efficientnet_stem: bool = False  # see _imagenet_stem


CAFFE = Family(preprocessing.caffe)
TF = Family(preprocessing.tf)
TORCH = Family(preprocessing.torch)
EFFICIENTNET = Family(preprocessing.builtin, efficientnet_stem=True)
BUILTIN = Family(preprocessing.builtin, {"include_preprocessing": True})


@dataclass(frozen=True)
class Row:
    name: str  # Corolla's name (--model)
    constructor: str  # keras.applications.<constructor>
    module: str  # keras.applications.<module>.preprocess_input is what `family` matches
    family: Family
    image_size: int  # the size Keras' ImageNet weights were trained at
    params: int  # backbone parameters, include_top=False
    description: str
    min_size: int = 32  # what keras.applications accepts at the least


TABLE = [
    Row("vgg16", "VGG16", "vgg16", CAFFE, 224, 14_714_688,
        "VGG16, the tutorial's (frozen) backbone"),
    Row("resnet50", "ResNet50", "resnet50", CAFFE, 224, 23_587_712, "ResNet50"),
    Row("resnet50_v2", "ResNet50V2", "resnet_v2", TF, 224, 23_564_800, "ResNet50 v2"),
    Row("densenet121", "DenseNet121", "densenet", TORCH, 224, 7_037_504, "DenseNet121"),
    Row("densenet169", "DenseNet169", "densenet", TORCH, 224, 12_642_880, "DenseNet169"),
    Row("densenet201", "DenseNet201", "densenet", TORCH, 224, 18_321_984,
        "DenseNet201 (public notebooks: fine-tuned at 512 px)"),
    Row("xception", "Xception", "xception", TF, 299, 20_861_480,
        "Xception (Google's baseline: fine-tuned at 512 px; min 71 px)", min_size=71),
    Row("inception_v3", "InceptionV3", "inception_v3", TF, 299, 21_802_784,
        "InceptionV3 (min 75 px)", min_size=75),
    Row("efficientnet_b0", "EfficientNetB0", "efficientnet", EFFICIENTNET, 224, 4_049_571,
        "EfficientNetB0"),
    Row("efficientnet_b1", "EfficientNetB1", "efficientnet", EFFICIENTNET, 240, 6_575_239,
        "EfficientNetB1"),
    Row("efficientnet_b2", "EfficientNetB2", "efficientnet", EFFICIENTNET, 260, 7_768_569,
        "EfficientNetB2"),
    Row("efficientnet_b3", "EfficientNetB3", "efficientnet", EFFICIENTNET, 300, 10_783_535,
        "EfficientNetB3"),
    Row("efficientnet_b4", "EfficientNetB4", "efficientnet", EFFICIENTNET, 380, 17_673_823,
        "EfficientNetB4"),
    Row("efficientnet_b5", "EfficientNetB5", "efficientnet", EFFICIENTNET, 456, 28_513_527,
        "EfficientNetB5"),
    Row("efficientnet_b6", "EfficientNetB6", "efficientnet", EFFICIENTNET, 528, 40_960_143,
        "EfficientNetB6"),
    Row("efficientnet_b7", "EfficientNetB7", "efficientnet", EFFICIENTNET, 600, 64_097_687,
        "EfficientNetB7 (public notebooks: fine-tuned at 512 px)"),
    Row("efficientnet_v2_b0", "EfficientNetV2B0", "efficientnet_v2", BUILTIN, 224, 5_919_312,
        "EfficientNetV2-B0"),
    Row("efficientnet_v2_b1", "EfficientNetV2B1", "efficientnet_v2", BUILTIN, 240, 6_931_124,
        "EfficientNetV2-B1"),
    Row("efficientnet_v2_b2", "EfficientNetV2B2", "efficientnet_v2", BUILTIN, 260, 8_769_374,
        "EfficientNetV2-B2"),
    Row("efficientnet_v2_b3", "EfficientNetV2B3", "efficientnet_v2", BUILTIN, 300, 12_930_622,
        "EfficientNetV2-B3"),
    Row("efficientnet_v2_s", "EfficientNetV2S", "efficientnet_v2", BUILTIN, 384, 20_331_360,
        "EfficientNetV2-S"),
    Row("efficientnet_v2_m", "EfficientNetV2M", "efficientnet_v2", BUILTIN, 480, 53_150_388,
        "EfficientNetV2-M"),
    Row("efficientnet_v2_l", "EfficientNetV2L", "efficientnet_v2", BUILTIN, 480, 117_746_848,
        "EfficientNetV2-L"),
    Row("convnext_tiny", "ConvNeXtTiny", "convnext", BUILTIN, 224, 27_820_128, "ConvNeXt-Tiny"),
    Row("convnext_small", "ConvNeXtSmall", "convnext", BUILTIN, 224, 49_454_688,
        "ConvNeXt-Small"),
    Row("convnext_base", "ConvNeXtBase", "convnext", BUILTIN, 224, 87_566_464, "ConvNeXt-Base"),
    Row("mobilenet_v2", "MobileNetV2", "mobilenet_v2", TF, 224, 2_257_984, "MobileNetV2 1.0"),
    Row("mobilenet_v3_small", "MobileNetV3Small", "mobilenet_v3", BUILTIN, 224, 939_120,
        "MobileNetV3-Small 1.0"),
    Row("mobilenet_v3_large", "MobileNetV3Large", "mobilenet_v3", BUILTIN, 224, 2_996_352,
        "MobileNetV3-Large 1.0"),
]


# Millions of output elements per image at 224 px (ModelSpec.activations), measured by
# benchmarks/activations.py (Keras 3.15, TensorFlow 2.21).
ACTIVATIONS = {
    "vgg16": 15.2, "resnet50": 37.1, "resnet50_v2": 31.4, "densenet121": 49.9,
    "densenet169": 60.1, "densenet201": 77.3, "xception": 34.6, "inception_v3": 16.7,
    "efficientnet_b0": 25.3, "efficientnet_b1": 34.7, "efficientnet_b2": 36.3,
    "efficientnet_b3": 48.0, "efficientnet_b4": 62.3, "efficientnet_b5": 85.2,
    "efficientnet_b6": 108.7, "efficientnet_b7": 145.0, "efficientnet_v2_b0": 16.2,
    "efficientnet_v2_b1": 21.4, "efficientnet_v2_b2": 23.1, "efficientnet_v2_b3": 28.9,
    "efficientnet_v2_s": 42.0, "efficientnet_v2_m": 68.1, "efficientnet_v2_l": 120.0,
    "convnext_tiny": 28.8, "convnext_small": 46.4, "convnext_base": 61.8,
    "mobilenet_v2": 21.8, "mobilenet_v3_small": 5.4, "mobilenet_v3_large": 15.4,
}


def _builder(row: Row) -> Callable:
    """(input_shape, weights) -> the backbone. "imagenet" goes through Keras' own download path
    (`keras.utils.get_file`, cached in ~/.keras/models); a local file is loaded into the graph
    Keras builds for "imagenet", so it gives the same model as the download."""

    def build(input_shape, weights):
        import keras

        constructor = getattr(keras.applications, row.constructor)
        kwargs = dict(include_top=False, input_shape=input_shape, **row.family.kwargs)
        if weights == "imagenet":
            return constructor(weights="imagenet", **kwargs)
        backbone = constructor(weights=None, **kwargs)
        if row.family.efficientnet_stem:
            backbone = _imagenet_stem(backbone)
        if weights:
            backbone.load_weights(weights)
        return backbone

    return build


def _imagenet_stem(backbone):
    """Returns a copy of a `weights=None` EfficientNet (B0-B7) with the stem Keras builds for
    "imagenet", so that the same graph serves none, imagenet and a local file.

    Keras builds EfficientNet's stem differently by the value of `weights`: Rescaling(1/255),
    Normalization and, only when `weights == "imagenet"`, a Rescaling(1/sqrt(stddev)), because
    its weights file stores the ImageNet stddev as the Normalization's variance (so the layer
    divides by sqrt(stddev); tensorflow/tensorflow#49930). Loaded into the `weights=None` graph,
    that same file would normalise by sqrt(stddev) instead of stddev: inputs about 2x too large.
    Here Rescaling(1/sqrt(stddev)) is inserted after the Normalization layer, which starts at
    the ImageNet statistics in the weights file's convention (variance = stddev): a model
    trained from scratch sees the same normalised inputs, (x / 255 - mean) / stddev, as a
    pre-trained one, and a weights file (the Keras "notop" .h5, matched by layer order, or a
    Keras 3 `.weights.h5` saved from such a backbone) loads into it as into Keras' own.

    The copy has fresh layers (`clone_model`'s default): reusing the originals would leave their
    first node in the discarded graph, and `layer.output` (feature extraction) would point
    there."""
    import keras

    norms = [layer for layer in backbone.layers if isinstance(layer, keras.layers.Normalization)]
    if len(norms) != 1:
        raise RuntimeError(f"expected one Normalization layer in Keras' {backbone.name}, found "
                           f"{len(norms)}: keras.applications changed; update "
                           f"corolla.models.applications")

    def call(layer, *args, **kwargs):
        outputs = layer(*args, **kwargs)
        if isinstance(layer, keras.layers.Normalization):
            outputs = keras.layers.Rescaling(
                [1 / math.sqrt(s) for s in preprocessing.IMAGENET_STDDEV_RGB],
                name="imagenet_stddev")(outputs)
        return outputs

    inputs = keras.Input(batch_shape=backbone.input.shape, name=backbone.layers[0].name)
    backbone = keras.models.clone_model(backbone, input_tensors=inputs, call_function=call)
    (norm,) = [layer for layer in backbone.layers
               if isinstance(layer, keras.layers.Normalization)]
    _, _, count = norm.get_weights()
    norm.set_weights([np.asarray(preprocessing.IMAGENET_MEAN_RGB, "float32"),
                      np.asarray(preprocessing.IMAGENET_STDDEV_RGB, "float32"), count])
    norm.finalize_state()  # the layer computes from tensors made from its variables
    return backbone


for _row in TABLE:
    register(ModelSpec(_row.name, _builder(_row), _row.family.preprocessing,
                       image_size=_row.image_size, imagenet=True, params=_row.params,
                       description=f"keras.applications {_row.description}",
                       min_size=_row.min_size, activations=ACTIVATIONS[_row.name]))
