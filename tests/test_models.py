"""The model registry: lookups, the generic head, weights handling."""

import keras
import numpy as np
import pytest

from corolla import models
from corolla.errors import UserError


def test_registry_lists_a_cpu_model_and_the_tutorial_backbones():
    assert {"small_cnn", "vgg16", "efficientnet_b0"} <= set(models.names())
    assert models.get("vgg16").image_size == 224 and models.get("small_cnn").image_size == 64
    with pytest.raises(UserError, match="unknown model 'resnet9000'; choose one of: .*small_cnn"):
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
