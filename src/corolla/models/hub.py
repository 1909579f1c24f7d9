"""`--model hub:PRESET`: a keras-hub backbone preset with Corolla's head (optional extra
`pip install "corolla[hub]"`).

PRESET is a keras-hub preset name or handle (`resnet_50_imagenet`, `kaggle://...`, `hf://...`:
these download) or a local preset folder (`config.json` + `model.weights.h5` and the image
converter's config, as `save_to_preset` writes them: works offline). The model is the preset's
backbone behind its image converter's rescaling as a plain Keras layer, so it takes raw
[0, 255] RGB like every Corolla model; resizing is the data pipeline's job. `--weights imagenet`
loads the preset's own pre-trained weights, `none` only its architecture, a file the backbone
weights saved from such a model. The backbone pads as its weights were trained
(`corolla.models.padding`: TensorFlow's SAME for TensorFlow-trained weights).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from corolla.errors import UserError, first_line
from corolla.files import MAX_TEXT, check_regular, is_remote
from corolla.models import padding, preprocessing
from corolla.models.registry import HUB_PREFIX, ModelSpec, register

DEFAULT_SIZE = 224  # for a preset whose image converter does not fix a size


def _keras_hub(what: str = "--model hub:PRESET"):
    try:
        import keras_hub
    except ImportError:
        raise UserError(missing(what)) from None
    return keras_hub


def missing(what: str) -> str:
    """The one line for a model that keras-hub builds, asked for where it is not installed."""
    return f'{what} needs keras-hub, which is not installed; run: pip install "corolla[hub]"'


def installed() -> bool:
    """Whether keras-hub can be imported, found without importing it (it imports Keras, whose
    backend is not chosen yet when commands check their input)."""
    return importlib.util.find_spec("keras_hub") is not None


def needs_keras_hub(model: str) -> bool:
    """A model keras-hub builds: a hub: preset or a named keras-hub backbone (`NAMED`)."""
    return model.startswith(HUB_PREFIX) or model in NAMED


def require(model: str, what: str) -> None:
    """`missing(what)` as an error when `model` needs keras-hub and it is not installed."""
    if needs_keras_hub(model) and not installed():
        raise UserError(missing(what))


def _is_local(preset: str) -> bool:
    if is_remote(preset):  # kaggle://, hf://, modelscope:// handles
        return False
    return os.path.isdir(preset) or preset.startswith((".", "~")) or os.sep in preset


@functools.lru_cache(maxsize=None)
def spec(preset: str) -> ModelSpec:
    """The registry entry of a preset, read from its image converter's config (a download of a
    few kilobytes for a named preset; nothing is built)."""
    if not preset:
        raise UserError("--model hub: needs a preset: hub:NAME (e.g. hub:resnet_50_imagenet) "
                        "or hub:FOLDER (a local keras-hub preset folder)")
    keras_hub = _keras_hub()
    local = _is_local(preset)
    if local:
        preset = os.path.abspath(os.path.expanduser(preset))
        if not os.path.isfile(os.path.join(preset, "config.json")):
            raise UserError(f"{preset} is not a keras-hub preset folder (no config.json); "
                            f"make one with save_to_preset, or name a preset")
    converter = _load(preset, local, lambda: keras_hub.layers.ImageConverter.from_preset(preset))
    size = converter.image_size[0] if getattr(converter, "image_size", None) else DEFAULT_SIZE
    scale, offset = _plain(converter.scale), _plain(converter.offset)
    # keras-hub's named presets are taken as keras-hub builds them (symmetric padding).
    trained = padding.trained_padding(preset, padding.SYMMETRIC) if local else padding.SYMMETRIC

    def backbone(input_shape, weights):
        planned = _planned_params(preset, keras_hub) if local else 0
        if planned > MAX_PARAMS:
            raise UserError(f"keras-hub preset {preset} declares a backbone of {planned:,} "
                            f"parameters, more than {MAX_PARAMS:,}; check its config.json")
        model = _load(preset, local, lambda: keras_hub.models.Backbone.from_preset(
            preset, load_weights=weights == "imagenet"))
        pad = trained
        if weights not in (None, "imagenet"):
            model.load_weights(weights)
            pad = padding.trained_padding(weights, trained)
        return padding.honour(model, pad, f"keras-hub preset {preset}")

    same = ", TensorFlow's SAME padding" if trained == padding.SAME else ""
    return ModelSpec(
        f"{HUB_PREFIX}{preset}", backbone,
        lambda: preprocessing.converter(scale, offset), image_size=int(size), imagenet=True,
        description=f"keras-hub preset {preset} ({type(converter).__name__}{same})")


# The most parameters a local preset's backbone may declare (4 GB of float32 weights, before an
# optimizer's copies): a config.json edited to a vast width is refused before it is built.
MAX_PARAMS = 1_000_000_000


def _planned_params(preset: str, keras_hub) -> int:
    """The parameters of a local preset's backbone as its config.json declares them, counted
    without allocating them: Keras defers creating a variable's value inside a StatelessScope,
    and the pending variables are dropped after, never initialised."""
    import keras

    check_regular(os.path.join(preset, "config.json"), "preset config", MAX_TEXT)
    try:  # Keras' own list of deferred variables (private: a release without it skips the count)
        from keras.src.backend.common import global_state

        pending = global_state.get_global_attribute("uninitialized_variables", [],
                                                    set_to_default=True)
    except (ImportError, AttributeError, TypeError):
        return 0
    before = len(pending)
    try:
        with keras.StatelessScope(initialize_variables=False):
            model = _load(preset, True, lambda: keras_hub.models.Backbone.from_preset(
                preset, load_weights=False))
            return sum(math.prod(w.shape) for w in model.weights)
    finally:
        del pending[before:]


def _plain(value):
    """A converter's scale or offset (a number, a list per channel or None) as a JSON value."""
    if value is None:
        return None
    value = np.asarray(value, "float64").ravel().tolist()
    return value[0] if len(value) == 1 else value


def _load(preset: str, local: bool, load):
    try:
        return load()
    except ValueError as e:
        if "Unknown preset identifier" in str(e):
            raise UserError(f"unknown keras-hub preset {preset!r}; name an image classifier "
                            f"preset (keras_hub.models.ImageClassifier.presets) or a local "
                            f"preset folder") from None
        if "image_converter" in str(e) or "ImageConverter" in str(e):
            raise UserError(f"keras-hub preset {preset!r} has no image converter, so its input "
                            f"preprocessing is unknown; use an image classifier preset") from None
        if local:  # a folder from elsewhere naming a class keras-hub does not know (os.system)
            raise UserError(_unbuildable(preset, e)) from None
        raise
    except Exception as e:  # kagglehub / huggingface_hub / requests raise their own types
        if local:
            raise UserError(_unbuildable(preset, e)) from None
        raise UserError(f"could not download keras-hub preset {preset!r} (no network? "
                        f"{first_line(e, 160)}); "
                        f"pass --model hub:FOLDER with a local copy of the preset (a folder "
                        f"with config.json and model.weights.h5, e.g. from save_to_preset)"
                        ) from None


def _unbuildable(preset: str, error: Exception) -> str:
    return (f"keras-hub could not load the preset folder {preset} ({first_line(error, 160)}); "
            f"use a folder that keras-hub's save_to_preset wrote")


# Named keras-hub backbones: a registered name (`--model efficientnet_lite0`) whose --weights
# is `imagenet` (keras-hub's own preset, downloaded once into kagglehub's cache), a local
# keras-hub preset folder (a copy of that preset, or any folder save_to_preset wrote for the
# same architecture), a backbone weights file (a preset's model.weights.h5), or none. The
# architecture is written out here, so `none` and a weights file need no network.


@dataclass(frozen=True)
class Named:
    name: str
    preset: str  # keras-hub's preset that `--weights imagenet` downloads
    handle: str  # its Kaggle handle (where kagglehub caches it), as in keras-hub's presets
    backbone: str  # the keras_hub.models class
    kwargs: dict  # its constructor's arguments: the architecture
    params: int
    description: str
    # x * scale + offset: the image converter of weights that come without one (a file, none):
    # the preprocessing the architecture's original (TensorFlow) weights were trained with.
    scale: float = 1 / 127.5
    offset: float = -1.0
    # ModelSpec.activations. Lite0's are taken as EfficientNet-B0's: the same blocks without
    # squeeze-excite (benchmarks/activations.py does not see into keras-hub's nested graph).
    activations: float | None = None
    # The padding its preset's weights were trained with (keras-hub's are timm's: PyTorch's
    # symmetric); a local folder or file may say otherwise (corolla.models.padding).
    padding: str = padding.SYMMETRIC


LITE0 = Named(
    "efficientnet_lite0", "efficientnet_lite0_ra_imagenet",
    "keras/efficientnet/keras/efficientnet_lite0_ra_imagenet/2", "EfficientNetBackbone",
    {"stackwise_width_coefficients": [1.0] * 7, "stackwise_depth_coefficients": [1.0] * 7,
     "stackwise_kernel_sizes": [3, 3, 5, 3, 5, 5, 3],
     "stackwise_num_repeats": [1, 2, 2, 3, 3, 4, 1],
     "stackwise_input_filters": [32, 16, 24, 40, 80, 112, 192],
     "stackwise_output_filters": [16, 24, 40, 80, 112, 192, 320],
     "stackwise_expansion_ratios": [1, 6, 6, 6, 6, 6, 6],
     "stackwise_squeeze_and_excite_ratios": [0] * 7,
     "stackwise_strides": [1, 2, 2, 2, 1, 2, 1], "stackwise_block_types": ["v1"] * 7,
     "dropout": 0.2, "depth_divisor": 8, "min_depth": None, "activation": "relu6",
     "include_stem_padding": True, "use_depth_divisor_as_min_depth": True,
     "cap_round_filter_decrease": True, "stem_conv_padding": "valid",
     "batch_norm_momentum": 0.9, "batch_norm_epsilon": 1e-3},
    params=3_413_024, activations=25.3,
    description="keras-hub EfficientNet-Lite0 (ReLU6, no squeeze-excite): small, fast on "
                "CPUs; --weights imagenet or a local preset folder")

NAMED = {LITE0.name: LITE0}
DOWNLOAD_HOST = ("api.kaggle.com", 443)  # where kagglehub downloads presets from
PROBE_SECONDS = 3.0


def is_preset_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "config.json"))


def cached(named: Named) -> bool:
    """Whether kagglehub has the preset's files already (any version)."""
    try:
        from kagglehub.config import get_cache_folder
    except ImportError:
        return False
    folder = os.path.join(get_cache_folder(), "models", *named.handle.split("/")[:4])
    return os.path.isdir(folder) and any(
        is_preset_folder(os.path.join(folder, v)) for v in os.listdir(folder))


def reachable(host=DOWNLOAD_HOST, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the download host answers within `timeout` s: offline (no DNS, or a firewall
    that drops packets) is decided in seconds, not after the HTTP client's retries."""
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    if proxy:  # the download goes through it: it is the host that must answer
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host = (parts.hostname, parts.port or 80)
    try:
        socket.create_connection(host, timeout=timeout).close()
        return True
    except OSError:
        return False


def availability(named: Named, weights: str | None) -> tuple[bool, str]:
    """(whether `weights` can be had now, why): a local copy, kagglehub's cache, or a
    download that the network allows."""
    if weights in (None, "", "none"):
        return False, "--weights none"
    if not installed():
        return False, 'keras-hub is not installed (pip install "corolla[hub]")'
    if weights != "imagenet":
        ok = os.path.exists(weights)
        return ok, f"local copy {weights}" + ("" if ok else " does not exist")
    if cached(named):
        return True, f"keras-hub preset {named.preset} is in kagglehub's cache"
    if reachable():
        return True, f"keras-hub preset {named.preset} is downloadable"
    return False, (f"offline: no cached copy of keras-hub preset {named.preset} and "
                   f"{DOWNLOAD_HOST[0]} does not answer")


def _named_spec(named: Named) -> ModelSpec:
    def backbone(input_shape, weights):
        import keras

        keras_hub = _keras_hub(f"--model {named.name}")
        scale, offset = named.scale, named.offset
        pad = named.padding
        if weights == "imagenet" or (weights and os.path.isdir(weights)):
            source = named.preset if weights == "imagenet" else os.path.abspath(weights)
            local = weights != "imagenet"
            if local and not is_preset_folder(source):
                raise UserError(f"--weights {weights}: not a keras-hub preset folder (no "
                                f"config.json); pass a copy of keras-hub's {named.preset} "
                                f"preset, a weights file, imagenet or none")
            if not local and not cached(named) and not reachable():
                raise UserError(download_failed(named))
            planned = _planned_params(source, keras_hub) if local else named.params
            if planned and planned != named.params:  # 0: not counted
                raise UserError(f"--weights {weights}: the preset declares a backbone of "
                                f"{planned:,} parameters, not {named.name} "
                                f"({named.params:,}); use --model hub:{weights}")
            model = _load(source, local, lambda: keras_hub.models.Backbone.from_preset(source))
            converter = _load(source, local,
                              lambda: keras_hub.layers.ImageConverter.from_preset(source))
            scale, offset = _plain(converter.scale), _plain(converter.offset)
            if local:
                pad = padding.trained_padding(source, named.padding)
            if model.count_params() != named.params:
                raise UserError(f"--weights {weights}: the preset holds a "
                                f"{type(model).__name__} of {model.count_params():,} parameters, "
                                f"not {named.name} ({named.params:,}); use --model hub:{weights}")
        else:
            model = getattr(keras_hub.models, named.backbone)(**named.kwargs)
            if weights:
                model.load_weights(weights)
                scale, offset = _folder_converter(weights, scale, offset)
                pad = padding.trained_padding(weights, named.padding)
        model = padding.honour(model, pad, f"--model {named.name} --weights {weights}")
        # The preprocessing belongs to the weights (a converter per preset), so it is inside
        # the backbone, as keras.applications' EfficientNets rescale inside theirs.
        inputs = keras.Input(input_shape, name="image")
        x = preprocessing.converter(scale, offset)[0](inputs)
        return keras.Model(inputs, model(x), name=f"{named.name}_backbone")

    return ModelSpec(named.name, backbone, preprocessing.builtin, image_size=DEFAULT_SIZE,
                     imagenet=True, params=named.params, description=named.description,
                     activations=named.activations)


def _folder_converter(weights_file: str, scale, offset):
    """The converter of the preset folder a weights file sits in (its model.weights.h5), if
    any; else (scale, offset) as given."""
    path = os.path.join(os.path.dirname(os.path.abspath(weights_file)), "image_converter.json")
    if not os.path.isfile(path):
        return scale, offset

    config = json.loads(Path(path).read_text(encoding="utf-8")).get("config", {})
    return config.get("scale", scale), config.get("offset", offset)


def download_failed(named: Named) -> str:
    return (f"could not download keras-hub preset {named.preset} for {named.name} "
            f"({DOWNLOAD_HOST[0]} does not answer: no network?); pass --weights FOLDER with a "
            f"local copy of the preset (e.g. ../shared/weights/efficientnet_lite0_imagenet), "
            f"or --weights none")


for _named in NAMED.values():
    register(_named_spec(_named))
