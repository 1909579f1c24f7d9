"""`--model hub:PRESET`: a keras-hub backbone preset with Corolla's head (optional extra
`pip install "corolla[hub]"`).

PRESET is a keras-hub preset name or handle (`resnet_50_imagenet`, `kaggle://...`, `hf://...`:
these download) or a local preset folder (`config.json` + `model.weights.h5` and the image
converter's config, as `save_to_preset` writes them: works offline). The model is the preset's
backbone behind its image converter's rescaling as a plain Keras layer, so it takes raw
[0, 255] RGB like every Corolla model; resizing is the data pipeline's job. `--weights imagenet`
loads the preset's own pre-trained weights, `none` only its architecture, a file the backbone
weights saved from such a model.
"""

from __future__ import annotations

import functools
import os

from corolla.errors import UserError
from corolla.models import preprocessing
from corolla.models.registry import HUB_PREFIX, ModelSpec

DEFAULT_SIZE = 224  # for a preset whose image converter does not fix a size


def _keras_hub():
    try:
        import keras_hub
    except ImportError:
        raise UserError('--model hub:PRESET needs keras-hub: pip install "corolla[hub]"'
                        ) from None
    return keras_hub


def _is_local(preset: str) -> bool:
    if "://" in preset:  # kaggle://, hf://, modelscope:// handles
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

    def backbone(input_shape, weights):
        model = _load(preset, local, lambda: keras_hub.models.Backbone.from_preset(
            preset, load_weights=weights == "imagenet"))
        if weights not in (None, "imagenet"):
            model.load_weights(weights)
        return model

    return ModelSpec(
        f"{HUB_PREFIX}{preset}", backbone,
        lambda: preprocessing.converter(scale, offset), image_size=int(size), imagenet=True,
        description=f"keras-hub preset {preset} ({type(converter).__name__})")


def _plain(value):
    """A converter's scale or offset (a number, a list per channel or None) as a JSON value."""
    import numpy as np

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
        raise
    except Exception as e:  # kagglehub / huggingface_hub / requests raise their own types
        if local:
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise UserError(f"could not download keras-hub preset {preset!r} (no network? {first}); "
                        f"pass --model hub:FOLDER with a local copy of the preset (a folder "
                        f"with config.json and model.weights.h5, e.g. from save_to_preset)"
                        ) from None
