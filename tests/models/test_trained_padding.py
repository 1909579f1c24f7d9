"""Pre-trained weights compute what they were trained for: a backbone pads as its weights were
trained (TensorFlow's SAME for TensorFlow-trained weights, symmetric for PyTorch-trained), a
preset folder says which (or its weights are known), and the padding survives save and load.

The shared Lite0 preset is held to what its weights compute with their own padding
(../shared/weights/efficientnet_lite0_reference.npz, from timm's `tf_efficientnet_lite0`), on
TensorFlow and on JAX. The preset folder holds the backbone alone (no ImageNet classifier), so
the reference's logits cannot be computed from it: the pooled features are what is held."""

import hashlib
import json
import math
import os

import numpy as np
import pytest

from corolla import models
from corolla.errors import UserError
from corolla.models import padding
from helpers.processes import REPO, SHARED, run_python

LITE0 = SHARED / "weights" / "efficientnet_lite0_imagenet"
REFERENCE = SHARED / "weights" / "efficientnet_lite0_reference.npz"
# timm's features against keras-hub's: float32 sums in another order (measured: 7e-6).
ATOL = 1e-4


@pytest.fixture(scope="module")
def lite0() -> str:
    pytest.importorskip("keras_hub")
    if not (LITE0 / "config.json").is_file() or not REFERENCE.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"CI must check the pre-trained weights' padding: {LITE0} and "
                        f"{REFERENCE} are absent")
        pytest.skip(f"{LITE0} or {REFERENCE} is absent")
    return str(LITE0)


@pytest.fixture(scope="module")
def reference(lite0) -> dict:
    with np.load(REFERENCE) as f:
        return {k: f[k] for k in f.files}


def _reference_input(reference):
    return (reference["images"].astype("float32") - 127) / 128  # as the reference was made


def _pooled(backbone, x):
    return np.asarray(backbone.predict(x, verbose=0)).mean(axis=(1, 2))


def _same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(before, after): TensorFlow's SAME padding of one dimension."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


# What decides the padding: the folder's metadata.json, known weights, the architecture's.


def _folder(root, metadata: dict | None):
    root.mkdir()
    (root / "model.weights.h5").write_bytes(b"not these weights")
    if metadata is not None:
        (root / "metadata.json").write_text(json.dumps({"keras_version": "3", **metadata}))
    return root


def test_a_preset_folder_says_its_padding_in_its_metadata(tmp_path):
    same = _folder(tmp_path / "tf", {"trained_padding": "same"})
    assert padding.trained_padding(same, padding.SYMMETRIC) == padding.SAME
    # Its weights file is the folder's, so both routes to the weights agree.
    assert padding.trained_padding(same / "model.weights.h5", padding.SYMMETRIC) == padding.SAME
    symmetric = _folder(tmp_path / "torch", {"trained_padding": "symmetric"})
    assert padding.trained_padding(symmetric, padding.SAME) == padding.SYMMETRIC


def test_a_folder_that_does_not_say_takes_the_architectures_padding(tmp_path):
    for folder in (_folder(tmp_path / "plain", {}), _folder(tmp_path / "none", None)):
        assert padding.trained_padding(folder, padding.SYMMETRIC) == padding.SYMMETRIC
        assert padding.trained_padding(folder, padding.SAME) == padding.SAME


def test_a_padding_the_metadata_cannot_mean_is_a_one_line_error(tmp_path):
    folder = _folder(tmp_path / "bad", {"trained_padding": "tf"})
    with pytest.raises(UserError, match=r"trained_padding is 'tf'.*\"same\".*\"symmetric\"") \
            as e:
        padding.trained_padding(folder, padding.SYMMETRIC)
    assert "\n" not in str(e.value)
    (folder / "metadata.json").write_text("[1, 2")
    with pytest.raises(UserError, match="not a JSON object"):
        padding.trained_padding(folder, padding.SYMMETRIC)


def test_known_weights_are_recognised_wherever_they_are_copied(tmp_path, monkeypatch):
    """A folder that cannot say (read-only, like ../shared) is known by its weights' SHA-256;
    the folder's own word still wins."""
    folder = _folder(tmp_path / "copy", {})
    data = (folder / "model.weights.h5").read_bytes()
    monkeypatch.setattr(padding, "KNOWN_WEIGHTS",
                        {(len(data), hashlib.sha256(data).hexdigest()): padding.SAME})
    assert padding.trained_padding(folder, padding.SYMMETRIC) == padding.SAME
    (folder / "metadata.json").write_text(json.dumps({"trained_padding": "symmetric"}))
    assert padding.trained_padding(folder, padding.SYMMETRIC) == padding.SYMMETRIC


# The rebuilt backbone pads as TensorFlow did, for any input size.


def _padded_conv(kernel: int, depthwise: bool, size=None):
    import keras

    inputs = keras.Input((size, size, 2))
    x = keras.layers.ZeroPadding2D(kernel // 2, name="pad")(inputs)
    conv = keras.layers.DepthwiseConv2D(kernel, 2, name="conv") if depthwise else \
        keras.layers.Conv2D(3, kernel, 2, name="conv")
    return keras.Model(inputs, conv(x))


@pytest.mark.parametrize("kernel,depthwise", [(3, False), (5, True)])
def test_same_padding_pads_a_stride_2_convolution_as_tensorflow_for_each_input_size(
        kernel, depthwise):
    """Even sizes: one pixel less before than after; odd: the same on both sides (as the
    symmetric padding it replaces). One model takes both sizes (progressive resizing)."""
    symmetric = _padded_conv(kernel, depthwise)
    same = padding.honour(symmetric, padding.SAME)
    assert not [layer for layer in same.layers if layer.name == "pad"]
    conv = symmetric.get_layer("conv")
    for size in (8, 9, 12):
        x = np.random.default_rng(size).normal(size=(2, size, size, 2)).astype("float32")
        before, after = _same_pads(size, kernel, 2)
        expected = conv(np.pad(x, ((0, 0), (before, after), (before, after), (0, 0))))
        np.testing.assert_allclose(same.predict(x, verbose=0), expected, atol=1e-5)
        if size % 2:
            np.testing.assert_allclose(same.predict(x, verbose=0),
                                       symmetric.predict(x, verbose=0), atol=1e-5)


def test_symmetric_padding_leaves_the_backbone_as_it_is():
    model = _padded_conv(3, False, 8)
    assert padding.honour(model, padding.SYMMETRIC) is model


def test_a_backbone_with_no_padding_to_change_is_a_one_line_error():
    import keras

    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Conv2D(4, 3, 2, padding="same")(inputs))
    with pytest.raises(UserError, match="trained with TensorFlow's SAME padding.*symmetric") \
            as e:
        padding.honour(model, padding.SAME, "the preset")
    assert str(e.value).startswith("the preset (Functional)") and "\n" not in str(e.value)


# The shared TensorFlow-trained Lite0, built the way Corolla builds it.


def test_tensorflow_trained_lite0_computes_its_own_features(lite0, reference):
    spec = models.get(f"hub:{lite0}")
    assert "SAME" in spec.description
    backbone = spec.backbone((192, 192, 3), "imagenet")
    np.testing.assert_allclose(_pooled(backbone, _reference_input(reference)),
                               reference["features_same"], atol=ATOL)


# The larger rungs a time budget may choose: Lite1 (240 px) and Lite2 (260 px), whose folder's
# config.json carries the `num_features` keras-hub does not save (a backbone rebuilt without it
# has a 1408-channel head its weights do not fit). Their reference is at 192 px too.
@pytest.mark.large  # each folder's build and predict: CI's large step
@pytest.mark.parametrize("rung", ["lite1", "lite2"])
def test_each_larger_tensorflow_trained_rung_computes_its_own_features(rung, tmp_path):
    pytest.importorskip("keras_hub")
    folder = SHARED / "weights" / f"efficientnet_{rung}_imagenet"
    reference_file = SHARED / "weights" / f"efficientnet_{rung}_reference.npz"
    if not (folder / "config.json").is_file() or not reference_file.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"CI must check {folder} against {reference_file}: absent")
        pytest.skip(f"{folder} or {reference_file} is absent")
    with np.load(reference_file) as f:
        reference = {k: f[k] for k in f.files}
    spec = models.get(f"hub:{folder}")
    assert "SAME" in spec.description
    backbone = spec.backbone((192, 192, 3), "imagenet")
    pooled = _pooled(backbone, _reference_input(reference))
    assert pooled.shape == (8, 1280)
    np.testing.assert_allclose(pooled, reference["features_same"], atol=ATOL)


JAX_PARITY = """
import numpy as np
import keras
from corolla import models
assert keras.backend.backend() == "jax"
with np.load(REFERENCE) as f:
    images, expected = f["images"], f["features_same"]
backbone = models.get("hub:" + LITE0).backbone((192, 192, 3), "imagenet")
# Called eagerly: compiling predict's whole program costs more than it saves for 8 images.
pooled = np.asarray(backbone((images.astype("float32") - 127) / 128,
                             training=False)).mean(axis=(1, 2))
print("ERROR", float(np.abs(pooled - expected).max()))
"""


# ~50 s on 2 busy cores (keras-hub's from_preset alone takes 25 s on JAX): CI's large step.
@pytest.mark.large
def test_tensorflow_trained_lite0_computes_its_own_features_on_jax(lite0):
    done = run_python(f"LITE0, REFERENCE = {lite0!r}, {str(REFERENCE)!r}\n" + JAX_PARITY,
                      env={"KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert float(line.split()[1]) <= ATOL, done.stdout


def test_a_copy_that_says_symmetric_computes_as_pytorch_trained_weights(lite0, reference,
                                                                         tmp_path):
    """The rule picks the padding both ways: the same weights in a folder whose metadata says
    symmetric give what keras-hub (and timm's PyTorch-style model) computes."""
    folder = tmp_path / "lite0_symmetric"
    folder.mkdir()
    for name in ("config.json", "image_converter.json", "model.weights.h5"):
        (folder / name).symlink_to(LITE0 / name)
    (folder / "metadata.json").write_text(json.dumps({"trained_padding": "symmetric"}))
    backbone = models.get(f"hub:{folder}").backbone((192, 192, 3), "imagenet")
    features = _pooled(backbone, _reference_input(reference))
    np.testing.assert_allclose(features, reference["features_symmetric"], atol=ATOL)
    assert np.abs(features - reference["features_same"]).max() > 100 * ATOL


def test_the_registered_lite0_on_the_shared_weights_pads_as_they_were_trained(lite0,
                                                                              reference):
    """`--model efficientnet_lite0 --weights FOLDER` (or its weights file): the backbone
    rescales by the preset's converter (x / 127.5 - 1), so its input is the reference's
    (x - 127) / 128 taken back to [0, 255]."""
    x = _reference_input(reference) * 127.5 + 127.5
    for weights in (lite0, f"{lite0}/model.weights.h5"):
        backbone = models.get("efficientnet_lite0").backbone((192, 192, 3), weights)
        np.testing.assert_allclose(_pooled(backbone, x), reference["features_same"],
                                   atol=ATOL)


def test_a_saved_model_keeps_its_padding_when_reloaded_in_safe_mode(lite0, reference,
                                                                    tmp_path):
    import keras

    model = models.create_model(f"hub:{lite0}", 3, 192, weights="imagenet")
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True,
                                       compile=False)
    images = reference["images"].astype("float32")
    np.testing.assert_allclose(reloaded.predict(images, verbose=0),
                               model.predict(images, verbose=0), atol=1e-6)
    (backbone,) = [layer for layer in reloaded.layers if isinstance(layer, keras.Model)]
    np.testing.assert_allclose(_pooled(backbone, _reference_input(reference)),
                               reference["features_same"], atol=ATOL)
