"""The model registry: lookups, the generic head, weights handling."""

import keras
import numpy as np
import pytest

from corolla import models
from corolla.errors import UserError
from corolla.runs import paths


def test_registry_lists_a_cpu_model_and_the_tutorial_backbones():
    assert {"small_cnn", "vgg16", "efficientnet_b0"} <= set(models.names())
    assert models.get("vgg16").image_size == 224 and models.get("small_cnn").image_size == 64
    with pytest.raises(UserError, match="unknown model 'nosuchnet'; choose one of: .*small_cnn"):
        models.get("nosuchnet")
    # A near miss is answered with the one meant, not buried in the list of every model.
    with pytest.raises(UserError, match=r"unknown model 'resnet9000'; did you mean resnet50\? "
                                        r"\(every model: corolla info --models"):
        models.get("resnet9000")


@pytest.mark.parametrize("name", ["small_cnn", "vgg16", "efficientnet_b0"])
def test_models_end_in_a_float32_softmax_over_the_classes(name):
    model = models.create_model(name, num_classes=3, image_size=32)
    assert model.output_shape == (None, 3)
    assert model.layers[-1].dtype_policy.compute_dtype == "float32"
    probs = model.predict(np.full((2, 32, 32, 3), 128.0, np.float32), verbose=0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_head_stays_float32_under_mixed_precision():
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = models.create_model("small_cnn", num_classes=2, image_size=16)
        conv = model.get_layer("small_cnn_backbone").get_layer("block0_conv")
        assert conv.compute_dtype == "bfloat16"
        assert model.output.dtype == "float32"
    finally:
        keras.config.set_dtype_policy("float32")


@pytest.mark.parametrize("name, size, other", [("small_cnn", 128, 64),
                                               ("efficientnet_b0", 32, 48)])
def test_a_model_of_any_size_is_saved_at_its_input_size(name, size, other, tmp_path):
    """Progressive resizing trains a model of any size; what it saves (`at_size`) is the same
    layers and weights taking the one input size, and loads as such with safe_mode."""
    model = models.create_model(name, num_classes=3, image_size=size, dropout=0.2,
                                any_size=True)
    fixed = models.at_size(model, size)
    assert model.input_shape == (None, None, None, 3)
    assert fixed.input_shape == (None, size, size, 3)
    assert len(fixed.weights) == len(model.weights) and all(
        a is b for a, b in zip(fixed.weights, model.weights))
    # The architecture is the one built for the size (small_cnn adds a stride-2 stem from 128).
    built = models.create_model(name, num_classes=3, image_size=size, dropout=0.2)
    assert [w.shape for w in model.weights] == [w.shape for w in built.weights]
    rng = np.random.default_rng(0)
    resized = rng.uniform(0, 255, (2, other, other, 3)).astype(np.float32)
    assert model.predict(resized, verbose=0).shape == (2, 3)
    images = rng.uniform(0, 255, (2, size, size, 3)).astype(np.float32)
    expected = model.predict(images, verbose=0)
    np.testing.assert_array_equal(fixed.predict(images, verbose=0), expected)
    fixed.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    assert loaded.input_shape == (None, size, size, 3)
    np.testing.assert_allclose(loaded.predict(images, verbose=0), expected, atol=1e-6)


def test_frozen_backbone_trains_only_the_head():
    model = models.create_model("small_cnn", num_classes=2, image_size=16, train_backbone=False)
    assert [w.name for w in model.trainable_weights] == ["kernel", "bias"]


def test_local_weights_file_is_loaded(tmp_path):
    source = models.create_model("small_cnn", num_classes=2, image_size=16)
    backbone = source.get_layer("small_cnn_backbone")
    path = tmp_path / "backbone.weights.h5"
    backbone.save_weights(path)
    loaded = models.create_model("small_cnn", num_classes=2, image_size=16, weights=str(path))
    for a, b in zip(backbone.weights, loaded.get_layer("small_cnn_backbone").weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("name, weights, message", [
    ("small_cnn", "imagenet", "has no ImageNet weights"),
    ("vgg16", "/no/such/file.h5", "weights file '/no/such/file.h5' does not exist"),
])
def test_bad_weights_are_user_errors(name, weights, message):
    with pytest.raises(UserError, match=message):
        models.create_model(name, num_classes=2, image_size=32, weights=weights)


def test_imagenet_without_network_is_a_user_error(monkeypatch):
    from keras.src.utils import file_utils

    def offline(*args, **kwargs):
        raise Exception("URL fetch failure on https://example: None -- [Errno -3] offline")

    monkeypatch.setattr(file_utils, "get_file", offline)
    monkeypatch.setattr(keras.utils, "get_file", offline)
    with pytest.raises(UserError, match="could not download ImageNet weights for vgg16"):
        models.create_model("vgg16", num_classes=2, image_size=32, weights="imagenet")


def test_vgg16_preprocessing_matches_keras():
    from corolla.models.layers import CaffePreprocessing

    images = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype(np.float32)
    expected = keras.applications.vgg16.preprocess_input(images.copy())
    np.testing.assert_allclose(CaffePreprocessing()(images), expected, rtol=1e-5, atol=1e-4)


def _write_notop_file(path, constructor, input_shape):
    """Writes what `keras.utils.get_file` would download for `weights="imagenet"` (unreachable
    here): weights of a backbone without its top, in Keras' legacy h5 format (loaded by layer
    order), random but for EfficientNet's normalisation statistics, which hold what the real
    file holds: the ImageNet mean, and the ImageNet stddev stored as the variance."""
    import h5py
    from keras.src.legacy.saving import legacy_h5_format

    source = constructor(include_top=False, weights=None, input_shape=input_shape)
    for layer in source.layers:
        if isinstance(layer, keras.layers.Normalization):
            layer.set_weights([np.array([0.485, 0.456, 0.406], np.float32),
                               np.array([0.229, 0.224, 0.225], np.float32), np.int64(0)])
    with h5py.File(path, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, source)


@pytest.mark.parametrize("name, keras_name, mis_scaled_before", [
    ("efficientnet_b0", "EfficientNetB0", True),
    ("vgg16", "VGG16", False),
])
def test_a_local_copy_of_imagenet_weights_is_the_imagenet_model(
        name, keras_name, mis_scaled_before, tmp_path, monkeypatch):
    """`--weights FILE` with a local copy of the ImageNet weights (the offline route) must give
    the model `--weights imagenet` gives: for EfficientNet, Keras adds a rescaling to its stem
    only for "imagenet", and the registry builds that stem for every weights value."""
    from keras.src.utils import file_utils

    constructor = getattr(keras.applications, keras_name)
    notop = tmp_path / f"{keras_name.lower()}_notop.h5"
    _write_notop_file(notop, constructor, (32, 32, 3))
    monkeypatch.setattr(file_utils, "get_file", lambda *args, **kwargs: str(notop))
    images = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3)).astype(np.float32)

    pretrained = models.create_model(name, num_classes=2, image_size=32, weights="imagenet")
    backbone = pretrained.get_layer(keras_name.lower())
    expected = keras.ops.convert_to_numpy(pretrained(images, training=False))
    saved = tmp_path / "backbone.weights.h5"  # a Keras 3 save of an imagenet-built backbone
    backbone.save_weights(saved)

    for path in (notop, saved):
        local = models.create_model(name, num_classes=2, image_size=32, weights=str(path))
        local.get_layer("probabilities").set_weights(
            pretrained.get_layer("probabilities").get_weights())
        np.testing.assert_array_equal(local(images, training=False), expected, err_msg=path.name)

    # The old registry built Keras' `weights=None` graph and loaded the file into it.
    old = constructor(include_top=False, weights=str(notop), input_shape=(32, 32, 3))
    inputs = images
    for layer in models.get(name).preprocessing():  # VGG16's Caffe preprocessing
        inputs = layer(inputs)
    features = keras.ops.convert_to_numpy(backbone(inputs, training=False))
    old_features = keras.ops.convert_to_numpy(old(inputs, training=False))
    if mis_scaled_before:
        assert np.abs(old_features - features).max() > 0.1 * np.abs(features).max()
    else:
        np.testing.assert_array_equal(old_features, features)

    local.save(tmp_path / paths.MODEL)
    reloaded = keras.saving.load_model(tmp_path / paths.MODEL, safe_mode=True)
    np.testing.assert_array_equal(reloaded(images, training=False), expected)


def test_efficientnet_normalises_with_imagenet_statistics_even_without_weights():
    """From scratch, EfficientNet sees the inputs a pre-trained one sees: the stem turns
    [0, 255] RGB into (x / 255 - mean) / stddev with the ImageNet statistics."""
    model = models.create_model("efficientnet_b0", num_classes=2, image_size=32)
    backbone = model.get_layer("efficientnetb0")
    stem = keras.Model(backbone.input, backbone.get_layer("stem_conv_pad").input)
    images = np.random.default_rng(1).uniform(0, 255, (2, 32, 32, 3)).astype(np.float32)
    expected = (images / 255 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(stem(images), expected, rtol=1e-5, atol=1e-5)


def test_backbone_weights_file_round_trip(tmp_path):
    """--weights FILE: a backbone's weights saved from one model build the same model."""
    images = np.random.default_rng(2).uniform(0, 255, (2, 64, 64, 3)).astype(np.float32)
    source = models.create_model("mobilenet_v3_small", num_classes=2, image_size=64)
    backbone = [layer for layer in source.layers if isinstance(layer, keras.Model)][0]
    path = tmp_path / "backbone.weights.h5"
    backbone.save_weights(path)
    loaded = models.create_model("mobilenet_v3_small", num_classes=2, image_size=64,
                                 weights=str(path))
    loaded.get_layer("probabilities").set_weights(
        source.get_layer("probabilities").get_weights())
    np.testing.assert_array_equal(loaded(images, training=False), source(images, training=False))


def test_weights_of_another_architecture_are_a_user_error(tmp_path):
    source = models.create_model("small_cnn", num_classes=2, image_size=32)
    path = tmp_path / "small_cnn.weights.h5"
    [layer for layer in source.layers if isinstance(layer, keras.Model)][0].save_weights(path)
    with pytest.raises(UserError, match=r"does not fit small_resnet's backbone at 32 px"):
        models.create_model("small_resnet", num_classes=2, image_size=32, weights=str(path))


def test_failed_download_names_the_file_to_pass_with_weights(tmp_path, monkeypatch):
    """Keras' real download path (`get_file`, an empty cache) with the network cut at
    urlretrieve: one line naming --weights FILE and where Keras caches the file."""
    import urllib.error

    from keras.src.backend import config as keras_config
    from keras.src.utils import file_utils

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(keras_config, "_KERAS_DIR", str(tmp_path))
    monkeypatch.setattr(file_utils, "urlretrieve", offline)
    with pytest.raises(UserError) as e:
        models.create_model("mobilenet_v3_small", num_classes=2, image_size=64,
                            weights="imagenet")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("could not download ImageNet weights for mobilenet_v3_small")
    assert "--weights FILE" in message
    assert ".keras/models/weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5" in message
