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


def _efficientnet_b0(input_shape, weights):
    import keras

    return keras.applications.EfficientNetB0(include_top=False, weights=weights,
                                             input_shape=input_shape)


def _nothing():
    return []  # EfficientNet rescales and normalises [0, 255] inputs itself


register(ModelSpec("small_cnn", _small_cnn, _rescale, image_size=64, learning_rate=3e-3,
                   imagenet=False, description="4-block CNN from scratch; fast on CPUs"))
register(ModelSpec("vgg16", _vgg16, _caffe, image_size=224, learning_rate=1e-4, imagenet=True,
                   description="keras.applications VGG16, the tutorial's backbone"))
register(ModelSpec("efficientnet_b0", _efficientnet_b0, _nothing, image_size=224,
                   learning_rate=1e-3, imagenet=True,
                   description="keras.applications EfficientNetB0"))
