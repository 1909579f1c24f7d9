"""Input preprocessing as Keras layers, one function per convention of pre-trained weights.

Every model takes raw RGB in [0, 255]; these layers turn it into what its backbone's weights
expect, inside the saved model (plain Rescaling / Normalization or Corolla's registered
CaffePreprocessing: no Lambda layers, so `model.keras` loads with safe_mode=True). Each matches
`keras.applications.<module>.preprocess_input` for the families that use it (tested).
"""

from __future__ import annotations

# ImageNet channel statistics (RGB, for inputs in [0, 1]): "torch" mode.
IMAGENET_MEAN_RGB = (0.485, 0.456, 0.406)
IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)


def unit():
    """[0, 1]: Corolla's own from-scratch CNNs."""
    import keras

    return [keras.layers.Rescaling(1 / 255, name="rescale")]


def caffe():
    """RGB -> BGR minus the ImageNet channel means (VGG16, ResNet50 v1)."""
    from corolla.models.layers import CaffePreprocessing

    return [CaffePreprocessing(name="caffe_preprocessing")]


def tf():
    """[-1, 1] (ResNetV2, Xception, InceptionV3, MobileNetV2)."""
    import keras

    return [keras.layers.Rescaling(1 / 127.5, offset=-1.0, name="rescale")]


def torch():
    """[0, 1] then the ImageNet mean / stddev per channel (DenseNet)."""
    import keras

    return [keras.layers.Rescaling(1 / 255, name="rescale"),
            keras.layers.Normalization(mean=IMAGENET_MEAN_RGB,
                                       variance=[s * s for s in IMAGENET_STDDEV_RGB],
                                       name="imagenet_normalization")]


def builtin():
    """Nothing: the backbone rescales and normalises [0, 255] itself (EfficientNet, EfficientNetV2,
    ConvNeXt and MobileNetV3 built with include_preprocessing=True)."""
    return []


def converter(scale, offset, name: str = "preset_preprocessing"):
    """x * scale + offset per channel: what a keras-hub ImageConverter does after resizing."""
    import keras

    return [keras.layers.Rescaling(1.0 if scale is None else scale,
                                   offset=0.0 if offset is None else offset, name=name)]
