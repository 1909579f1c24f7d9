"""Every registry entry: builds at a small size with 2 classes, predicts, saves and reloads in
safe mode with identical predictions, has the parameter count its entry states, and feeds
its backbone what keras.applications' own preprocess_input would."""

import importlib

import keras
import numpy as np
import pytest

from corolla import models
from corolla.models.applications import TABLE
from corolla.runs import paths

# The smallest inputs each family accepts (keras.applications refuses smaller ones).
MIN_SIZE = {"xception": 71, "inception_v3": 75}
# The quick set: one or two entries per preprocessing family and construction rule, each a
# few seconds on an idle 2-core machine. Every other entry (over ~25 M parameters, or over ~3 s
# there: DenseNets, InceptionV3, larger EfficientNets, ConvNeXts, ...) is marked `large`: CI
# runs them, `-m "not large"` skips them.
QUICK = {"small_cnn", "small_resnet", "vgg16", "resnet50", "resnet50_v2", "xception",
         "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "efficientnet_lite0"}


def _entries():
    return [name if name in QUICK else pytest.param(name, marks=pytest.mark.large)
            for name in models.names()]


def _backbone(model):
    (backbone,) = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    return backbone


@pytest.mark.parametrize("name", _entries())
def test_entry_builds_predicts_and_reloads_in_safe_mode(name, tmp_path):
    size = MIN_SIZE.get(name, 32)
    model = models.create_model(name, num_classes=2, image_size=size)
    assert _backbone(model).count_params() == models.get(name).params
    images = np.random.default_rng(0).uniform(0, 255, (2, size, size, 3)).astype(np.float32)
    # Eager calls, not predict(): tracing a graph of these models costs more than building them.
    probs = keras.ops.convert_to_numpy(model(images, training=False))
    assert probs.shape == (2, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    model.save(tmp_path / paths.MODEL)
    reloaded = keras.saving.load_model(tmp_path / paths.MODEL, safe_mode=True)
    np.testing.assert_array_equal(reloaded(images, training=False), probs)


def test_every_requested_name_is_registered_with_its_facts():
    expected = {"small_cnn", "small_resnet", "vgg16", "resnet50", "resnet50_v2", "densenet121",
                "densenet169", "densenet201", "xception", "inception_v3", "mobilenet_v2",
                "mobilenet_v3_small", "mobilenet_v3_large", "convnext_tiny", "convnext_small",
                "convnext_base", "efficientnet_lite0", *(f"efficientnet_b{i}" for i in range(8)),
                *(f"efficientnet_v2_{v}" for v in ("b0", "b1", "b2", "b3", "s", "m", "l"))}
    assert set(models.names()) == expected
    for name in expected:
        spec = models.get(name)
        assert spec.params > 0 and spec.image_size >= 64 and spec.description
        assert spec.imagenet == (name not in ("small_cnn", "small_resnet"))
    assert models.get("efficientnet_b7").image_size == 600
    assert models.get("xception").image_size == 299


def test_small_resnet_is_sized_for_a_cpu():
    spec = models.get("small_resnet")
    assert 300_000 <= spec.params <= 2_000_000
    backbone = _backbone(models.create_model("small_resnet", num_classes=2, image_size=160))
    kinds = {type(layer).__name__ for layer in backbone.layers}
    assert {"Add", "BatchNormalization"} <= kinds
    assert backbone.output.shape[1:3] == (10, 10)  # stride 16: 160 px -> 10 x 10 features


@pytest.mark.parametrize("module", sorted({row.module for row in TABLE}))
def test_preprocessing_matches_keras_applications(module):
    """The layers in front of each family's backbone compute keras.applications'
    `<module>.preprocess_input` (for EfficientNet, EfficientNetV2, ConvNeXt and MobileNetV3
    that is the identity: their backbones preprocess themselves)."""
    (preprocess,) = {row.family.preprocessing for row in TABLE if row.module == module}
    images = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype(np.float32)
    expected = importlib.import_module(f"keras.applications.{module}").preprocess_input(
        images.copy())
    x = images
    for layer in preprocess():
        x = layer(x)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(x), expected, rtol=1e-5, atol=1e-4)


def test_info_lists_models_without_building_them(capsys, monkeypatch):
    from corolla.cli import main

    def no_build(*args, **kwargs):
        raise AssertionError("info --models built a model")

    monkeypatch.setattr(models.factory, "_build_backbone", no_build)
    assert main(["info", "--models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("efficientnet_b7 "))
    assert row.split()[:4] == ["efficientnet_b7", "600px", "64.1M", "yes"]
    row = next(line for line in lines if line.startswith("small_resnet "))
    assert row.split()[:4] == ["small_resnet", "160px", "1.2M", "no"]
    assert any(line.startswith("hub:PRESET") for line in lines)
