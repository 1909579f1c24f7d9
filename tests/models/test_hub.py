"""`--model hub:PRESET`: a keras-hub preset in a local folder (built here, nothing downloaded)
trains through the CLI, and its saved model reloads in safe mode."""

import json
import shutil
import sys

import numpy as np
import pytest

from corolla import models
from corolla.errors import UserError
from corolla.runs import paths
from helpers.processes import SHARED, run_capped

keras_hub = pytest.importorskip("keras_hub")

# What a ResNet preset's image converter does: x / 255, then the ImageNet mean and stddev.
SCALE = [1 / (255 * s) for s in (0.229, 0.224, 0.225)]
OFFSET = [-m / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A tiny ResNet image classifier saved as a keras-hub preset folder."""
    backbone = keras_hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[3], stackwise_num_filters=[64, 16],
        stackwise_num_blocks=[1, 1], stackwise_num_strides=[1, 2], block_type="basic_block")
    converter = keras_hub.layers.ResNetImageConverter(image_size=(48, 48), scale=SCALE,
                                                      offset=OFFSET)
    classifier = keras_hub.models.ResNetImageClassifier(
        backbone=backbone, num_classes=3,
        preprocessor=keras_hub.models.ResNetImageClassifierPreprocessor(converter))
    folder = tmp_path_factory.mktemp("hub") / "tiny_resnet"
    classifier.save_to_preset(str(folder))
    return folder, backbone


def test_a_local_preset_trains_one_step_and_reloads(preset, train_tiny, tmp_path):
    import keras

    folder, _ = preset
    run = train_tiny(tmp_path, "--model", f"hub:{folder}", "--steps-per-epoch", "1", name=None)
    assert [run] == list(tmp_path.iterdir())  # named after the preset folder, not its whole path
    assert run.name.startswith("hub-tiny_resnet-")
    model = keras.saving.load_model(run / paths.MODEL, safe_mode=True)
    assert model.output_shape == (None, 4)
    images = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype(np.float32)
    np.testing.assert_allclose(model.predict(images, verbose=0).sum(axis=1), 1.0, rtol=1e-5)


def test_preset_preprocessing_and_weights_are_the_presets(preset):
    """The model's first layer is the converter's rescaling as a plain layer, its default size
    the converter's, and --weights imagenet loads the preset's own weights."""
    folder, source = preset
    spec = models.get(f"hub:{folder}")
    assert spec.image_size == 48 and spec.imagenet
    model = models.create_model(f"hub:{folder}", num_classes=2, weights="imagenet")
    images = np.random.default_rng(1).uniform(0, 255, (2, 48, 48, 3)).astype(np.float32)
    np.testing.assert_allclose(model.get_layer("preset_preprocessing")(images),
                               images * SCALE + np.array(OFFSET), rtol=1e-5, atol=1e-5)
    backbone = model.get_layer(source.name)
    for a, b in zip(backbone.weights, source.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The preset's folder named again as --weights means the same weights, not an error.
    assert models.check_weights(spec, str(folder)) == "imagenet"
    with pytest.raises(UserError, match="goes to --model efficientnet_lite0 --weights FOLDER"):
        models.check_weights(spec, str(folder.parent))


@pytest.mark.parametrize("name, message", [
    ("hub:", "needs a preset"),
    ("hub:./no/such/folder", "is not a keras-hub preset folder"),
    ("hub:no_such_preset_xyz", "unknown keras-hub preset 'no_such_preset_xyz'"),
])
def test_bad_presets_are_one_line_errors(name, message):
    with pytest.raises(UserError, match=message):
        models.get(name)


def test_an_unreachable_preset_suggests_a_local_folder(monkeypatch):
    from keras_hub.src.utils import preset_utils

    def offline(*args, **kwargs):
        raise ConnectionError("Failed to resolve 'api.kaggle.com'")

    monkeypatch.setattr(preset_utils, "get_file", offline)
    models.hub.spec.cache_clear()
    with pytest.raises(UserError, match=r"could not download keras-hub preset "
                                        r"'resnet_18_imagenet' .*hub:FOLDER"):
        models.get("hub:resnet_18_imagenet")


def test_without_keras_hub_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # import keras_hub -> ImportError
    models.hub.spec.cache_clear()
    with pytest.raises(UserError, match=r'pip install "corolla\[hub\]"'):
        models.get("hub:anything")


def _refused(build: str, setup: str) -> str:
    """What `build` said (a UserError's line) in a process with 1 GiB of memory left."""
    result = run_capped(f"""
from corolla.errors import UserError
try:
    {build}
    print("built")
except UserError as e:
    print(e)
""", gib=1, setup=setup, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.large  # a fresh process importing TensorFlow under a memory cap: CI's large step
def test_a_preset_declaring_a_vast_backbone_is_refused_before_it_is_built(preset, tmp_path):
    """A copy of the preset whose last stage has 2,000,000 filters (trillions of parameters)
    is counted from its config.json, not built: one line, under a 1 GiB cap."""
    folder = tmp_path / "vast"
    shutil.copytree(preset[0], folder)
    config = json.loads((folder / "config.json").read_text())
    config["config"]["stackwise_num_filters"][-1] = 2_000_000
    (folder / "config.json").write_text(json.dumps(config))
    said = _refused(f"hub.spec({str(folder)!r}).backbone((48, 48, 3), None)",
                    setup="import keras_hub\nfrom corolla.models import hub")
    assert said.startswith(f"keras-hub preset {folder} declares a backbone of 36,")
    assert said.endswith("parameters, more than 1,000,000,000; check its config.json")


LITE0 = SHARED / "weights" / "efficientnet_lite0_imagenet"


@pytest.mark.large  # a fresh process importing TensorFlow under a memory cap: CI's large step
@pytest.mark.skipif(not LITE0.is_dir(), reason="needs ../shared/weights (CI has them)")
def test_a_named_backbones_preset_folder_of_another_size_is_refused_before_it_is_built(
        tmp_path):
    """efficientnet_lite0 --weights FOLDER, the folder's config.json edited to 2,000,000
    output filters in its last stage: refused on its declared parameters (the built model
    would take 19 GB), under a 1 GiB cap."""
    folder = tmp_path / "lite0"
    folder.mkdir()
    for name in ("config.json", "image_converter.json", "metadata.json"):
        shutil.copy(LITE0 / name, folder / name)
    config = json.loads((folder / "config.json").read_text())
    config["config"]["stackwise_output_filters"][-1] = 2_000_000
    (folder / "config.json").write_text(json.dumps(config))
    said = _refused(f"models.get('efficientnet_lite0').backbone((224, 224, 3), {str(folder)!r})",
                    setup="import keras_hub\nfrom corolla import models")
    assert said == (f"--weights {folder}: the preset declares a backbone of 4,874,633,504 "
                    f"parameters, not efficientnet_lite0 (3,413,024); use --model hub:{folder}")


def test_a_local_presets_imagenet_weights_are_its_own_and_need_no_network(preset, monkeypatch):
    """`--model hub:FOLDER --weights imagenet` offline: the folder holds the weights, so
    `recipe auto` fine-tunes it (it once asked the download host and fell back to training
    from scratch)."""
    from corolla.models import factory, hub

    def offline(*args, **kwargs):
        raise AssertionError("the network was asked for a local preset's weights")

    monkeypatch.setattr(hub, "reachable", offline)
    folder, _ = preset
    assert factory.weights_available(f"hub:{folder}", "imagenet") == \
        (True, f"local preset folder {folder}")


def test_a_preset_folder_naming_a_class_keras_hub_does_not_know_is_one_line(preset, tmp_path):
    """A config.json naming `os.system` as its class: nothing runs, and the refusal is one
    line naming the folder (it was keras-hub's traceback)."""
    folder, _ = preset
    evil = tmp_path / "evil"
    shutil.copytree(folder, evil)
    config = json.loads((evil / "config.json").read_text())
    config.update({"module": "os", "class_name": "system", "registered_name": None})
    (evil / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as e:
        models.get(f"hub:{evil}").backbone((48, 48, 3), "imagenet")
    assert str(e.value).startswith(f"keras-hub could not load the preset folder {evil} (")
    assert "\n" not in str(e.value)
