"""`--recipe auto`: the recipe the hardware, the weights and the data decide, before training.
On every accelerator the one choice is `finetune_or_scratch`: fine-tune where the model's
pre-trained weights can be had now, else train the from-scratch `cpu` recipe. A CPU stops
there (`cpu_auto`); a GPU or TPU also fits the image size and the batch to the data and the
card (`accelerator_auto`)."""

from __future__ import annotations

import os

from corolla import config
from corolla import models
from corolla.config.recipe import AUTO, CPU_FINETUNE, load_recipe
from corolla.data.prepare import sources
from corolla.errors import UserError
from corolla.models import hub, ladder
from corolla.models.registry import HUB_PREFIX
from corolla.runtime.decide import UNKNOWN_ACTIVATIONS, choose_batch


def asked_keys(config_file: str | config.ConfigFile | None, flags: dict) -> dict:
    """The config keys the user set: the --config file's, then the flags."""
    asked = config.config_file(config_file).values if config_file else {}
    asked.update(flags)
    return asked


def finetune_or_scratch(asked: dict, finetune: str) -> tuple[str, str, str]:
    """(recipe, model, why): the fine-tuning recipe `finetune` when the weights of its model
    (or of the model asked) can be had now (`models.weights_available`: a local copy, a cache,
    or a download decided in seconds), else the from-scratch recipe (`recipe.AUTO["cpu"]`)."""
    values = load_recipe(finetune).values
    model = asked.get("model.name", values["model.name"])
    ok, why = models.weights_available(model, asked.get("model.weights",
                                                        values["model.weights"]))
    if ok:
        return finetune, model, f"{model}: {why}"
    _refuse_unavailable(asked, model)
    return AUTO["cpu"], model, \
        f"no pre-trained weights to fine-tune, {why}; from scratch"


def _refuse_unavailable(asked: dict, model: str) -> None:
    """`--weights imagenet` asked for and not to be had now is an error, said before the recipe
    is announced: a run "from scratch" announced, then the download tried anyway, is two lines
    of which the second contradicts the first."""
    if asked.get("model.weights") == "imagenet":
        raise UserError(models.weights_unavailable(model))


def cpu_auto(config_file: str | config.ConfigFile | None,
             flags: dict) -> tuple[str, dict, str]:
    """(the recipe "auto" stands for on a CPU, config values it decides, why): cpu-finetune
    when the weights of its model (or of the --model asked) can be had now, else the
    from-scratch cpu recipe (`finetune_or_scratch`); fine-tuning, the backbone and input size
    of the ladder (`backbone`) where the user chose neither model nor preset."""
    asked = asked_keys(config_file, flags)
    name, model, why = finetune_or_scratch(asked, CPU_FINETUNE)
    decided = {}
    if name == CPU_FINETUNE:
        chosen = backbone(asked, load_recipe(name).values)
        if chosen is not None:
            # The rung first: the recipe's own model is named only where it is the one trained.
            decided, said = chosen
            why = f"backbone {said}; weights: {why.removeprefix(f'{model}: ')}"
    return name, decided, why


def backbone(asked: dict, recipe: dict, measure=ladder.measure) -> tuple[dict, str] | None:
    """(config values, why) of the backbone ladder (`models.ladder`), or None where it does not
    apply: a model or input size the user set, a recipe of another model, or weights that are
    one choice (a preset folder, a file, imagenet or none asked for). It applies to the recipe's own
    weights (keras-hub's presets: `ladder.online_rungs`) and to `--weights DIR` where DIR
    holds preset folders (`ladder.local_rungs`). The host's pace (`measure`, seconds) and the
    photos are counted only where a larger rung earns its time on the suite at all."""
    if "model.name" in asked or "model.input_size" in asked or \
            recipe.get("model.name") != ladder.FIRST_MODEL:
        return None
    if "model.weights" not in asked:
        rungs = ladder.online_rungs()
    elif ladder.is_shelf(str(asked["model.weights"])):
        rungs = ladder.local_rungs(str(asked["model.weights"]))
    else:
        return None
    budget = asked.get("train.time_budget")
    seconds = config.duration_seconds(budget) if budget else None
    pace = images = None
    if seconds and ladder.climbable(rungs):
        images = _forward_passes(asked.get("data.path", ""))
        pace = measure(rungs[0])
    rung, why = ladder.choose(rungs, seconds, images or 0, pace)
    decided = {} if rung.weights == "imagenet" else {"model.weights": rung.weights}
    if rung.name != ladder.FIRST[0]:
        decided = {"model.name": f"{HUB_PREFIX}{rung.weights}", "model.weights": "imagenet"}
    if rung.size != recipe.get("model.input_size"):
        decided["model.input_size"] = rung.size
    return decided, why


def _forward_passes(path: str) -> int:
    """The forward passes a rung makes over the data at `path` (an image folder or CSV listed,
    a layout's records counted): each labelled photo and its mirror image (the frozen phase's
    features, flipped), and each unlabelled one once (its prediction)."""
    kind = sources.kind_of(path)
    if kind != "layout":
        items = sources.scan(path, log=lambda *a: None).items
        return sum(1 if item.label is None else 2 for item in items)
    from corolla.data import layout as layout_lib

    sizes = layout_lib.available_sizes(path)
    layout = layout_lib.open_layout(path, sizes[0])
    return sum(layout.split(s).count * (1 if s == "test" else 2)
               for s in ("train", "val", "test") if layout.has_split(s))


def accelerator_auto(config_file: str | config.ConfigFile | None, flags: dict,
                     plan) -> tuple[dict, str]:
    """(config values, why) of "recipe auto" on a GPU or TPU, decided before training from the
    data, the weights and the card. The values hold no key the user set, except train.recipe
    (auto, decided) and a preset folder's translation (below).

    - the recipe: the accelerator's fine-tuning one when its model's (or --model's) weights can
      be had now (`finetune_or_scratch`, as `cpu_auto`), else the from-scratch `cpu` recipe
      with weights none; a keras-hub preset folder as --weights, without --model, is that
      preset (`hub:FOLDER`);
    - the image size: the recipe's when a TFRecord layout has it, else the layout's nearest; an
      image folder or CSV is converted at the recipe's;
    - the per-replica batch: `runtime.decide.choose_batch`, from the device's memory and the
      model's activations at its input size; the peak learning rate follows it when the
      recipe's scale_lr is "replicas" (a rate per 16 images a replica).
    """
    asked = asked_keys(config_file, flags)
    decided = {}
    name, recipe, model, why = _recipe(asked, plan.accelerator, decided)
    decided["train.recipe"] = name
    spec = models.get(model)
    size, examples, why = _image_size(asked, recipe, spec, decided, why)
    input_size = asked.get("model.input_size", decided.get("model.input_size",
                                                           recipe.get("model.input_size")))
    input_size = min(input_size or size or spec.image_size, size or spec.image_size)
    why = _batch(asked, recipe, spec, plan, input_size, examples, decided, why)
    return decided, why


def _recipe(asked: dict, accelerator: str, decided: dict) -> tuple[str, dict, str, str]:
    """(recipe name, its values, the model, why) of `accelerator_auto`; what the user did not
    set and the choice implies (a preset folder's model, weights none, the model's own input
    size) goes into `decided`."""
    name = AUTO[accelerator]
    recipe = load_recipe(name).values
    weights = asked.get("model.weights", recipe["model.weights"])
    if "model.name" not in asked and os.path.isdir(weights) and hub.is_preset_folder(weights):
        model = f"{HUB_PREFIX}{os.path.abspath(weights)}"
        decided.update({"model.name": model, "model.weights": "imagenet"})
        return name, recipe, model, f"the keras-hub preset folder {weights}"
    chosen, model, why = finetune_or_scratch(asked, name)
    if chosen == name:
        return name, recipe, model, why
    recipe = load_recipe(chosen).values  # the from-scratch recipe
    if "model.weights" not in asked:
        decided["model.weights"] = "none"
    if "model.name" not in asked:
        model = recipe["model.name"]  # the recipe's own model, at its own size
    if model != recipe["model.name"] and "model.input_size" not in asked:
        decided["model.input_size"] = 0  # the model's own size, not the recipe model's
    return chosen, recipe, model, why


def _image_size(asked: dict, recipe: dict, spec, decided: dict, why: str):
    """(image size, train examples, why) of `accelerator_auto`: a TFRecord layout's size
    nearest the recipe's (its train split counted, for the batch); 0 examples otherwise."""
    from corolla.data import layout as layout_lib

    size = asked.get("data.image_size") or recipe.get("data.image_size", 0)
    examples, path = 0, asked.get("data.path", "")
    if path and sources.kind_of(path) == "layout":
        sizes = layout_lib.available_sizes(path)
        wanted = size or asked.get("model.input_size") or recipe.get("model.input_size") or \
            spec.image_size
        size = layout_lib.choose_size(sizes, asked.get("data.image_size", 0), wanted)
        if "data.image_size" not in asked and size != recipe.get("data.image_size", size):
            decided["data.image_size"] = size
            why += f"; image size {size} (the data's nearest to {recipe['data.image_size']})"
        examples = layout_lib.open_layout(path, size).split("train").count
    return size, examples, why


def _batch(asked: dict, recipe: dict, spec, plan, input_size: int, examples: int,
           decided: dict, why: str) -> str:
    """`accelerator_auto`'s per-replica batch (and the peak rate that follows it) into
    `decided`, unless the user set a batch; returns why, with the batch said."""
    memory = plan.hardware.device_memory if plan.hardware else 0
    if "train.batch_size" not in asked and "train.global_batch_size" not in asked:
        activations = spec.activations or UNKNOWN_ACTIVATIONS
        batch = choose_batch(memory, input_size, activations, plan.precision,
                             examples, plan.replicas, recipe["train.batch_size"])
        decided["train.batch_size"] = batch
        memory = ("memory unknown: the recipe's" if not memory else
                  f"{memory / 2**30:.0f} GiB" if memory >= 2**30 else f"{memory >> 20} MiB")
        why += (f"; batch {batch} a replica ({memory}, {spec.name} at {input_size} px, "
                f"{plan.precision})")
        if recipe.get("train.scale_lr") == "replicas" and "train.learning_rate" not in asked:
            rate = config.derived_rate(recipe["train.learning_rate"] * batch
                                       / recipe["train.batch_size"])
            decided["train.learning_rate"] = rate
            why += f", peak learning rate {rate:g} x replicas"
    return why
