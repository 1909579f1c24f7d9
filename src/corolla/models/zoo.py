"""The registered models: a small CNN that trains fast on CPUs, and the tutorial's VGG16 and
EfficientNetB0 from `keras.applications`."""

from __future__ import annotations

from corolla.models.registry import ModelSpec, register


def _small_cnn(input_shape, weights):
    """Four conv-BN-ReLU blocks (32..256 channels) with max pooling. Inputs of 128 px and more
    get a stride-2 stem first, so that 192 px costs about what 96 px would.

    BatchNormalization is synchronized: under tf.distribute its batch statistics are those of
    the global batch, so every replica and worker keeps the same moving statistics (unsynced,
    each keeps its own and the saved model gets the chief's). JAX computes global statistics
    anyway (and Keras allows the flag only on TensorFlow); on one device it changes nothing.
    Momentum 0.9 (Keras' default is 0.99): from-scratch runs here are a few hundred steps, too
    few for 0.99 to settle the moving statistics (measured on the demo: val accuracy 0.28 with
    0.99, 0.99 with 0.9)."""
    import keras
    from keras import layers

    sync = keras.backend.backend() == "tensorflow"

    inputs = keras.Input(input_shape)
    x = inputs
    if input_shape[0] >= 128:
        x = layers.Conv2D(24, 3, strides=2, padding="same", use_bias=False, name="stem")(x)
        x = layers.BatchNormalization(momentum=0.9, synchronized=sync, name="stem_bn")(x)
        x = layers.ReLU(name="stem_relu")(x)
    for i, width in enumerate((32, 64, 128, 256)):
        x = layers.Conv2D(width, 3, padding="same", use_bias=False, name=f"block{i}_conv")(x)
        x = layers.BatchNormalization(momentum=0.9, synchronized=sync,
                                      name=f"block{i}_bn")(x)
        x = layers.ReLU(name=f"block{i}_relu")(x)
        if i < 3:
            x = layers.MaxPooling2D(name=f"block{i}_pool")(x)
    backbone = keras.Model(inputs, x, name="small_cnn_backbone")
    if weights:
        backbone.load_weights(weights)
    return backbone


def _rescale():
    import keras

    return [keras.layers.Rescaling(1 / 255, name="rescale")]


def _vgg16(input_shape, weights):
    import keras

    return keras.applications.VGG16(include_top=False, weights=weights, input_shape=input_shape)


def _caffe():
    from corolla.models.layers import CaffePreprocessing

    return [CaffePreprocessing(name="caffe_preprocessing")]


# The ImageNet statistics EfficientNet's Keras weights were trained with (RGB, inputs in [0, 1]).
IMAGENET_MEAN_RGB = (0.485, 0.456, 0.406)
IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)


def _efficientnet(constructor_name: str):
    """A builder for `keras.applications.<constructor_name>` (EfficientNetB0..B7) that makes the
    same graph whatever the weights, so a local copy of the ImageNet weights is the same model as
    the downloaded ones.

    Keras builds EfficientNet's stem differently by the value of `weights`: Rescaling(1/255),
    Normalization and, only when `weights == "imagenet"`, a Rescaling(1/sqrt(stddev)), because
    its weights file stores the ImageNet stddev as the Normalization's variance (so the layer
    divides by sqrt(stddev); tensorflow/tensorflow#49930). Loaded into the `weights=None` graph,
    that same file normalises by sqrt(stddev) instead of stddev: inputs about 2x too large.
    So "imagenet" is left to Keras (its graph, its download), and `None` or a file get that graph
    rebuilt (`_imagenet_stem`): a file that loads into Keras' imagenet graph loads into it the
    same way, be it the Keras "notop" .h5 (legacy format, matched by layer order) or a Keras 3
    `.weights.h5` saved from such a backbone. No Lambda layers: saved models load in safe_mode.
    """

    def build(input_shape, weights):
        import keras

        constructor = getattr(keras.applications, constructor_name)
        if weights == "imagenet":
            return constructor(include_top=False, weights="imagenet", input_shape=input_shape)
        backbone = _imagenet_stem(constructor(include_top=False, weights=None,
                                              input_shape=input_shape))
        if weights:
            backbone.load_weights(weights)
        return backbone

    return build


def _imagenet_stem(backbone):
    """Returns a copy of a `weights=None` EfficientNet with the stem Keras builds for "imagenet":
    Rescaling(1/sqrt(stddev)) inserted after its Normalization layer. The Normalization starts
    at the ImageNet statistics in the weights file's convention (variance = stddev), so a model
    trained from scratch sees the same normalised inputs, (x / 255 - mean) / stddev, as a
    pre-trained one; a weights file overwrites them with its own.

    The copy has fresh layers (`clone_model`'s default): reusing the originals would leave their
    first node in the discarded graph, and `layer.output` (feature extraction) would point
    there."""
    import math

    import keras
    import numpy as np

    norms = [layer for layer in backbone.layers if isinstance(layer, keras.layers.Normalization)]
    if len(norms) != 1:
        raise RuntimeError(f"expected one Normalization layer in Keras' {backbone.name}, found "
                           f"{len(norms)}: keras.applications changed; update corolla.models.zoo")

    def call(layer, *args, **kwargs):
        outputs = layer(*args, **kwargs)
        if isinstance(layer, keras.layers.Normalization):
            outputs = keras.layers.Rescaling([1 / math.sqrt(s) for s in IMAGENET_STDDEV_RGB],
                                             name="imagenet_stddev")(outputs)
        return outputs

    inputs = keras.Input(batch_shape=backbone.input.shape, name=backbone.layers[0].name)
    backbone = keras.models.clone_model(backbone, input_tensors=inputs, call_function=call)
    (norm,) = [layer for layer in backbone.layers
               if isinstance(layer, keras.layers.Normalization)]
    _, _, count = norm.get_weights()
    norm.set_weights([np.asarray(IMAGENET_MEAN_RGB, "float32"),
                      np.asarray(IMAGENET_STDDEV_RGB, "float32"), count])
    norm.finalize_state()  # the layer computes from tensors made from its variables
    return backbone


def _nothing():
    return []  # EfficientNet rescales and normalises [0, 255] inputs itself


register(ModelSpec("small_cnn", _small_cnn, _rescale, image_size=64, learning_rate=3e-3,
                   imagenet=False, description="4-block CNN from scratch; fast on CPUs"))
register(ModelSpec("vgg16", _vgg16, _caffe, image_size=224, learning_rate=1e-4, imagenet=True,
                   description="keras.applications VGG16, the tutorial's backbone"))
register(ModelSpec("efficientnet_b0", _efficientnet("EfficientNetB0"), _nothing, image_size=224,
                   learning_rate=1e-3, imagenet=True,
                   description="keras.applications EfficientNetB0"))
