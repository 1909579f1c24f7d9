"""Corolla's own from-scratch CNNs for CPUs (the keras.applications backbones are in
corolla.models.applications)."""

from __future__ import annotations

from corolla.models import preprocessing
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


def _small_resnet(input_shape, weights):
    """A ResNet sized for a laptop's CPU and a few thousand photos trained from scratch.

    Stem: a stride-2 3x3 conv and a 3x3 max pool (a 192 px image is 48x48 after it: the
    full-resolution convolutions are where a CPU spends its time). Then three stages of one
    basic residual block each (two 3x3 convs, 64 / 128 / 256 channels, the last two stages at
    stride 2, a 1x1 projection on the shortcut when the shape changes), global pooling by the
    head. About 1.2 M parameters and 0.4 GMACs per 192 px image: roughly twice small_cnn's
    compute, for residual connections and a wider last stage, which let a from-scratch model
    keep learning over more epochs on little data instead of saturating.

    Each block's last BatchNormalization starts at gamma = 0 ("zero-init residual", Goyal et al.
    2017): every block is the identity at first, so the net trains as a shallow one early and
    high learning rates are stable. BatchNormalization is synchronized with momentum 0.9, as in
    small_cnn (see there)."""
    import keras
    from keras import layers

    sync = keras.backend.backend() == "tensorflow"

    def bn(x, name, zero=False):
        return layers.BatchNormalization(momentum=0.9, synchronized=sync, name=name,
                                         gamma_initializer="zeros" if zero else "ones")(x)

    def conv(x, width, stride, name, kernel=3):
        return layers.Conv2D(width, kernel, strides=stride, padding="same", use_bias=False,
                             kernel_initializer="he_normal", name=name)(x)

    inputs = keras.Input(input_shape)
    x = layers.ReLU(name="stem_relu")(bn(conv(inputs, 32, 2, "stem_conv"), "stem_bn"))
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    for i, (width, stride) in enumerate(((64, 1), (128, 2), (256, 2))):
        name = f"stage{i}"
        y = layers.ReLU(name=f"{name}_relu1")(bn(conv(x, width, stride, f"{name}_conv1"),
                                                 f"{name}_bn1"))
        y = bn(conv(y, width, 1, f"{name}_conv2"), f"{name}_bn2", zero=True)
        if stride != 1 or x.shape[-1] != width:
            x = bn(conv(x, width, stride, f"{name}_shortcut", kernel=1), f"{name}_shortcut_bn")
        x = layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([x, y]))
    backbone = keras.Model(inputs, x, name="small_resnet_backbone")
    if weights:
        backbone.load_weights(weights)
    return backbone


register(ModelSpec("small_cnn", _small_cnn, preprocessing.unit, image_size=64, imagenet=False,
                   params=389_856, min_size=8,  # three 2x2 poolings: 8 -> 1
                   activations=3.5,  # benchmarks/activations.py, as applications.ACTIVATIONS
                   description="4-block CNN from scratch; fast on CPUs"))
register(ModelSpec("small_resnet", _small_resnet, preprocessing.unit, image_size=160,
                   imagenet=False, params=1_210_592, min_size=8, activations=4.6,
                   description="3-stage ResNet from scratch (BN, zero-init residuals) sized for "
                               "a 2-core CPU; trains at 128-192 px"))
