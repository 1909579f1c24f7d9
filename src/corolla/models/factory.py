"""The model factory, timm-style: everything is reached through `create_model`, which builds a
registered backbone (`corolla.models.registry`) or a keras-hub preset's (`hub:PRESET`,
`corolla.models.hub`) behind the one generic head. Keras is imported only when a model is built.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from corolla.errors import UserError, first_line
from corolla.files import check_regular
from corolla.models import hub
from corolla.models.registry import HUB_PREFIX, ModelSpec, lookup
from corolla.runtime import tflog


def get(name: str) -> ModelSpec:
    """A registered model's spec, or a keras-hub preset's (`hub:PRESET`)."""
    if name.startswith(HUB_PREFIX):
        return hub.spec(name[len(HUB_PREFIX):])
    return lookup(name)


def check_weights(spec: ModelSpec, weights: str) -> str | None:
    """Normalises the weights argument: None, "imagenet" or an existing local file."""
    if weights in ("", "none", None):
        return None
    if weights == "imagenet":
        if not spec.imagenet:
            raise UserError(f"model {spec.name!r} has no ImageNet weights; use --weights none "
                            f"or a local weights file")
        return weights
    if spec.name in hub.NAMED and Path(weights).is_dir():  # a local copy of its preset
        return weights
    if Path(weights).is_dir():
        if (spec.name.startswith(HUB_PREFIX) and spec.imagenet
                and Path(weights).resolve() == Path(spec.name[len(HUB_PREFIX):]).resolve()):
            return "imagenet"  # `--model hub:FOLDER --weights FOLDER`: the preset's own weights
        raise UserError(f"--weights {weights} is a folder; {spec.name} takes a weights file "
                        f"(Keras' 'notop' .h5, or a .weights.h5 saved from its backbone); a "
                        f"keras-hub preset folder goes to --model efficientnet_lite0 --weights "
                        f"FOLDER, or to --model hub:FOLDER (its own weights come with it)")
    if not Path(weights).is_file():
        if Path(weights).exists():  # a FIFO or a device: say which, not that it is missing
            check_regular(weights, "weights file")
        raise UserError(_no_such_weights(weights, spec.name))
    return weights


def _no_such_weights(weights: str, name: str | None) -> str:
    folder = " or keras-hub preset folder" if name is None or name in hub.NAMED else ""
    return (f"weights file{folder} {weights!r} does not exist; pass --weights none, imagenet, "
            f"or the path of a local copy of the backbone's weights")


def check_choice(name: str | None, weights: str | None, model_as: str = "",
                 weights_as: str = "") -> None:
    """What can be checked of a model and its weights before Keras is imported or anything is
    built or downloaded: the name is known, keras-hub is installed where it builds the model or
    reads the weights (a preset folder), local weights exist, and the weights fit the model as
    `check_weights` says. `name` None: not chosen yet (`recipe auto` chooses it later); the
    weights are checked alone then. `model_as`, `weights_as`: how messages name them (default
    `--model NAME`, `--weights PATH`)."""
    spec = lookup(name) if name and not name.startswith(HUB_PREFIX) else None
    if name:
        hub.require(name, model_as or f"--model {name}")
    local = weights not in (None, "", "none", "imagenet")
    if local and not os.path.exists(weights):
        raise UserError(_no_such_weights(weights, name))
    if local and hub.is_preset_folder(weights) and not hub.installed():
        raise UserError(hub.missing(f"{weights_as or f'--weights {weights}'} (a keras-hub "
                                    f"preset folder)"))
    if spec is not None:
        check_weights(spec, weights)


@tflog.quiet  # `import keras` imports TensorFlow: quiet if it is the first
def create_model(name: str, num_classes: int, image_size: int | None = None,
                 weights: str | None = None, train_backbone: bool = True, dropout: float = 0.0,
                 any_size: bool = False):
    """Backbone + global average pooling + Dense(num_classes) with a float32 softmax (so mixed
    precision never rounds the probabilities), with `dropout` before it. The model takes float
    RGB images in [0, 255]: preprocessing is inside it, so a saved model needs nothing else at
    inference.

    `any_size`: the model takes images of any height and width (progressive resizing trains
    one model at several sizes), its architecture still the one built for `image_size` (the
    backbones choose strides and stems by size). Save it through `at_size`: a saved model takes
    the one size it is meant for."""
    import keras

    spec = get(name)
    weights = check_weights(spec, weights)
    size = image_size or spec.image_size
    if num_classes < 2:
        raise UserError(f"a classifier needs at least 2 classes, got {num_classes}")
    inputs = keras.Input((None, None, 3) if any_size else (size, size, 3), name="image")
    x = inputs
    for layer in spec.preprocessing():
        x = layer(x)
    backbone = _build_backbone(spec, (size, size, 3), weights)
    if any_size:  # the same layers (and weights) on an input of any size
        try:
            backbone = keras.models.clone_model(
                backbone, input_tensors=keras.Input((None, None, 3)),
                clone_function=lambda layer: layer)
        except Exception as e:  # e.g. a transformer's position embeddings of one size
            raise UserError(f"model {spec.name!r} cannot take images of several sizes "
                            f"({first_line(e)}); set train.start_size = 0 (no progressive "
                            f"resizing)") from None
    backbone.trainable = train_backbone
    x = backbone(x, training=None if train_backbone else False)
    # Convnets give feature maps (batch, h, w, c); transformers (keras-hub) give tokens.
    pool = keras.layers.GlobalAveragePooling1D if len(x.shape) == 3 else \
        keras.layers.GlobalAveragePooling2D
    x = pool(name="pool")(x)
    if dropout:
        x = keras.layers.Dropout(dropout, name="head_dropout")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32",
                                 name="probabilities")(x)
    return keras.Model(inputs, outputs, name=short_name(name))


def at_size(model, size: int):
    """A model of `create_model(any_size=True)` as one taking `size` px images: the same
    layers and weights (training one trains the other), the input shape fixed."""
    import keras

    return keras.models.clone_model(model, input_tensors=keras.Input((size, size, 3),
                                                                     name="image"),
                                    clone_function=lambda layer: layer)


def sublayers(model) -> list:
    """Every layer inside `model`, depth first: nested models (the backbone) and their layers."""
    out = []
    for layer in getattr(model, "layers", []):
        out.append(layer)
        out.extend(sublayers(layer))
    return out


def short_name(name: str) -> str:
    """A model name fit for file and Keras names: `hub:/a/b/resnet_18` -> `hub-resnet_18`."""
    if name.startswith(HUB_PREFIX):
        name = "hub-" + os.path.basename(name[len(HUB_PREFIX):].rstrip("/\\"))
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"


def _build_backbone(spec: ModelSpec, input_shape, weights):
    try:
        return spec.backbone(input_shape, weights)
    except UserError:
        raise
    except Exception as e:  # keras.utils.get_file raises a bare Exception on network failure
        if weights == "imagenet" and ("URL fetch failure" in str(e) or isinstance(e, OSError)):
            raise UserError(download_failed(spec.name, str(e))) from None
        if weights not in (None, "imagenet") and isinstance(e, (ValueError, OSError)):
            raise UserError(f"weights file {weights!r} does not fit {spec.name}'s backbone at "
                            f"{input_shape[0]} px ({first_line(e)}); pass the backbone weights "
                            f"of the same architecture (Keras 'notop' .h5 or .weights.h5)"
                            ) from None
        raise


def download_failed(name: str, message: str) -> str:
    """One line for a failed ImageNet download: where Keras would have cached the file, so the
    user can copy it there or pass it with --weights."""
    url = re.search(r"(https?://\S+?)(?::\s|$)", message)
    file_name = url.group(1).rsplit("/", 1)[-1] if url else "<the weights file>"
    cache = os.path.join(os.environ.get("KERAS_HOME", os.path.join("~", ".keras")), "models")
    return (f"could not download ImageNet weights for {name} (no network?); use --weights FILE "
            f"with a local copy of {file_name} (Keras caches it as {cache}/{file_name}), or "
            f"--weights none")


def weights_unavailable(name: str) -> str:
    """The one line for `--weights imagenet` of model `name` when `weights_available` says they
    cannot be had now: the package to install, or the local copy to pass."""
    if name in hub.NAMED:
        return hub.download_failed(hub.NAMED[name]) if hub.installed() else \
            hub.missing(f"--weights imagenet ({name}'s keras-hub preset)")
    return download_failed(name, "")


KERAS_DOWNLOAD_HOST = ("storage.googleapis.com", 443)  # where keras.applications' weights are


def weights_available(name: str, weights: str | None) -> tuple[bool, str]:
    """(whether model `name`'s `weights` can be had now, why, in a few words): a local copy,
    a cached preset, or a download the network allows, decided in seconds (`recipe auto` on a
    CPU fine-tunes only when this says yes)."""
    spec = get(name)
    if not spec.imagenet:
        return False, f"{name} has no pre-trained weights"
    if spec.name in hub.NAMED:
        return hub.availability(hub.NAMED[spec.name], weights)
    if weights in (None, "", "none"):
        return False, "--weights none"
    if weights != "imagenet":
        ok = os.path.exists(weights)
        return ok, f"local copy {weights}" + ("" if ok else " does not exist")
    folder = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else ""
    if folder and hub.is_preset_folder(folder):  # its imagenet weights are the folder's own
        return True, f"local preset folder {folder}"
    if hub.reachable(KERAS_DOWNLOAD_HOST):
        return True, f"{name}'s ImageNet weights are downloadable"
    return False, f"offline: {KERAS_DOWNLOAD_HOST[0]} does not answer"
