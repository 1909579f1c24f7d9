"""One typed config per run: defaults, then an optional TOML file, then command-line overrides.

Unknown keys and ill-typed values are user errors. The resolved config is written to the run
directory as `config.toml`, so `corolla evaluate` / `predict` rebuild exactly what was trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import tomli_w

from corolla.config import policies
from corolla.config.setting import Setting, duration, rate_or_find, setting, table
from corolla.errors import UserError
from corolla.files import MAX_TEXT, read_bounded, write_text_atomic

BACKENDS = ("auto", "tensorflow", "jax")
STRATEGIES = ("auto", "tpu", "mirrored", "multiworker", "one_device", "data_parallel", "default")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
JIT_COMPILES = ("auto", "on", "off")
SCHEDULES = ("cosine", "ramp")
OPTIMIZERS = ("adam", "adamw", "sgd")
LR_SCALINGS = ("none", "replicas")
BATCHNORM_MODES = ("auto", "inference", "train")
TRACKERS = ("none", "mlflow", "wandb")  # output.track: where a run's figures are also sent


MAX_EPOCHS = 10_000  # more is a typo, not a plan
MAX_SEED = 2**32 - 1  # what NumPy's and scikit-learn's generators take
MAX_SIZE = 4096  # px: the largest image size converted or read (a typo beyond, not a plan)
# Images a batch, per replica or all together: beyond, a batch of even small images outgrows
# any accelerator's and most hosts' memory (a typo, not a plan).
MAX_BATCH = 16_384
# Records held to shuffle: TensorFlow reserves a slot for each up front (1e8: 3 GB for any data;
# 1e12: std::bad_alloc). The pipeline also holds no more than the split has.
MAX_SHUFFLE_BUFFER = 1_000_000
REFIT_CHOICES = ("auto", "on", "off")  # train.refit
# What a time budget's plan decides beyond the schedule (training.timing), unset: a budget given
# is planned anew. Corolla's, not the user's: a run keeps them in its time_plan.json
# (runs.time_plan_file), and config.toml never holds them (`save_config`).
UNPLANNED = {"train.time_plan": "", "train.time_steps": 0, "train.time_steps_from": 0,
             "train.time_steps_later": 0}
TIME_PLAN_KEYS = tuple(UNPLANNED)

# The help texts below are templates (config.setting): {recipe} is the recipes' default for the
# key, {value} the field's own default, {note} and {default} what the command adds. A field's
# description (for the config reference) is the comment above it, beside its first line, or,
# where that line would be too long, just under it.


@dataclass
class DataConfig:
    path: str = setting(  # a folder (local or gs://) holding tfrecords-jpeg-SxS/{train,val,test}/
        "", flag="--data", keyword="data", help="folder (local or gs://) holding "
        "tfrecords-jpeg-SxS/, or an image folder (one subfolder per class) or a CSV of "
        "path,label, converted once into a cache (see corolla convert)")
    image_size: int = setting(
        # which SxS folder to read; 0 = the one nearest the model's default size
        0, low=0, high=MAX_SIZE, flag="--image-size", help="which tfrecords-jpeg-SxS to read "
        "(images: the size to convert to; default, or 0: the one nearest the input size, or the "
        "model's)")
    # Training-split augmentation: a policy (none, default, strong) or a list of names (flip,
    # affine, crop, color, mixup, cutmix, randaugment); true/false mean default/none.
    augment: list = setting(
        list(policies.POLICIES["default"]), flag="--augment", metavar="NAMES|POLICY",
        help=f"training augmentation: a policy ({', '.join(policies.POLICIES)}) or "
        f"comma-separated names ({', '.join(policies.NAMES)}); {{default}}")
    # Keep decoded training images in memory (small data sets on CPU/GPU); skipped, with a log
    # line, where they would fill over a quarter of the host's memory.
    cache: bool = setting(
        False, flag="--cache", action=argparse.BooleanOptionalAction, default=None,
        help="keep decoded training images in memory (--no-cache: decode every epoch); {recipe}")
    shuffle_buffer: int = setting(  # examples; the competition's shards are already mixed
        2048, low=1, high=MAX_SHUFFLE_BUFFER)
    # Skip damaged records (images that do not decode, a file's damaged tail) instead of stopping;
    # the command ends with a count per file. Off: a damaged record is an error naming its file.
    skip_bad_records: bool = setting(
        False, flag="--skip-bad-records", action="store_true", default=None,
        help="skip damaged records (images that do not decode, a file's damaged tail) and count "
        "them per file at the end, instead of stopping")
    # Set by Corolla when data.path is an image folder or a CSV: the TFRecords it was converted
    # into (a cache folder keyed by the files and the conversion settings; see
    # data/prepare/cache.py).
    converted: str = ""
    # The feature names in the records, for TFRecords written by other tools (read as they are):
    # the competition's "image" (JPEG bytes), "class" (int64) and "id" (bytes) by default.
    image_feature: str = "image"
    label_feature: str = "class"
    id_feature: str = "id"
    # Set by k-fold training (corolla.flows.kfold) in each fold's run: it validates on fold
    # `fold` (1..K) of train+val pooled and trains on the others, as `folds_file` (the parent
    # run's folds.csv: id,label,fold) assigns them. 0 = the data's own train and val splits.
    fold: int = 0
    folds_file: str = ""


@dataclass
class ModelConfig:
    name: str = setting(  # a key of the model registry: `corolla info --models`
        "small_cnn", flag="--model", keyword="model", help="registered model name (corolla info "
        "--models), or hub:PRESET: a keras-hub preset name or local preset folder; {recipe}")
    weights: str = setting(  # "none", "imagenet" (downloads) or a local backbone weights file
        "none", flag="--weights", help="none, imagenet (Keras downloads it; a hub preset's own "
        "weights), a local backbone weights file, (efficientnet_lite0) a local keras-hub "
        "preset folder, or a folder of EfficientNet-Lite preset folders, whose rung --time "
        "chooses (recipe auto on a CPU); {recipe}")
    train_backbone: bool = setting(  # False freezes the backbone, as the tutorial does with VGG16
        True, flag="--freeze-backbone", action="store_false", default=None,
        help="train only the classifier head")
    dropout: float = setting(  # dropout rate before the classifier head; 0 = none
        0.0, low=0, high=0.99, flag="--dropout",
        help="dropout before the classifier head; {recipe}")
    # The size the model sees, at most: larger images are scaled down to it as they are decoded
    # (JPEG DCT scaling when it divides the data's size), for training and prediction alike;
    # 0 = the data's size. A run's config records the size it resolved to.
    input_size: int = setting(
        0, low=0, high=MAX_SIZE, flag="--input-size", metavar="S", help="the size the model "
        "sees, at most: larger images are scaled down to S as they are decoded (0: the data's "
        "size); {recipe}")


@dataclass
class TrainConfig:
    epochs: int = setting(  # the tutorial's 12
        12, low=1, high=MAX_EPOCHS, flag="--epochs", help="{recipe}")
    batch_size: int = setting(  # per replica: global batch = 16 x REPLICAS, as in the tutorial
        16, low=1, high=MAX_BATCH, flag="--batch-size",
        help="per-replica batch (default 16: the tutorial's 16 x REPLICAS){note}")
    global_batch_size: int = setting(
        # set it instead to keep the global batch fixed across hardware
        0, low=0, high=MAX_BATCH, flag="--global-batch-size", help="fixed global batch, split "
        "over the replicas (default: per-replica x replicas){note}")
    learning_rate: float = setting(  # peak rate (recipes set their own); see scale_lr
        1e-3, low=0, flag="--lr", type=rate_or_find, metavar="RATE|find", help="peak learning "
        "rate, or find: the suggestion of a range test on the run's own model first (corolla "
        "lr-find); {recipe}")
    warmup_epochs: float = setting(  # linear ramp-up from start_learning_rate to the peak
        1.0, low=0, high=MAX_EPOCHS, flag="--warmup-epochs",
        help="epochs of linear ramp-up to the peak; {recipe}")
    steps_per_epoch: int = setting(  # 0 = one pass over the training split
        0, low=0, flag="--steps-per-epoch", help="default, or 0: one pass over train")
    seed: int = setting(  # model initialisation, shuffling and augmentation derive from it
        42, low=0, high=MAX_SEED, flag="--seed",
        help="seeds initialisation, order and augmentation (default {value})")
    deterministic: bool = setting(  # ordered reads + TensorFlow op determinism: bit-identical runs
        False, flag="--deterministic", action="store_true", default=None,
        help="ordered reads and TensorFlow op determinism: the same seed gives a bit-identical "
        "run on the same machine (slower input)")
    # K-fold: K models on train+val split into K stratified folds (seeded by `seed`), scored on
    # their pooled out-of-fold predictions, test probabilities averaged. 0 = off (one model).
    folds: int = setting(
        0, flag="--folds", metavar="K", help="k-fold: train K models on train+val split into K "
        "stratified folds (RUN/fold-1 ... fold-K), score their pooled out-of-fold predictions, "
        "average their test probabilities; default 0 (off)")
    # The recipe under the config file and flags: "auto" (by accelerator), a shipped recipe's
    # name (`corolla info --recipes`) or a recipe file. A run's config records the one used.
    recipe: str = setting(
        "auto", flag="--recipe", help="auto (default: {auto_recipes}), a recipe's name "
        "({recipes}; corolla info --recipes) or a recipe file")
    # cosine: per step, linear warm-up then cosine decay to min_learning_rate. ramp: the
    # tutorial's, per epoch: ramp-up (warmup_epochs), sustain_epochs at the peak, then
    # (peak - min) * lr_decay ** epochs_since + min.
    schedule: str = setting(
        "cosine", choices=SCHEDULES, flag="--schedule", help="cosine (per step: warm-up, cosine "
        "decay) or ramp (the tutorial's per epoch: ramp-up, sustain, exponential decay)")
    start_learning_rate: float = setting(  # where the warm-up starts; 0 = a tenth of the peak
        0.0, low=0)
    min_learning_rate: float = setting(0.0, low=0)  # where the decay ends; 0 = 1% of the peak
    sustain_epochs: float = setting(  # ramp: epochs at the peak after the warm-up
        0.0, low=0, high=MAX_EPOCHS)
    lr_decay: float = setting(  # ramp: exponential decay factor per epoch after the sustain
        0.8, low=0, high=1)
    scale_lr: str = setting(
        # "replicas": peak x REPLICAS, as the TPU notebooks do (start, min not)
        "none", choices=LR_SCALINGS)
    optimizer: str = setting(  # adam, adamw or sgd (with momentum)
        "adam", choices=OPTIMIZERS, flag="--optimizer", help="{recipe}")
    momentum: float = setting(0.9, low=0, high=1)  # sgd only
    weight_decay: float = setting(
        # decoupled weight decay (adamw's own; adam and sgd apply it too)
        0.0, low=0, flag="--weight-decay", help="decoupled weight decay (not on normalization "
        "scales and offsets, nor biases); {recipe}")
    label_smoothing: float = setting(
        0.0, low=0, high=1, flag="--label-smoothing", help="{recipe}")
    ema: bool = setting(  # exponential moving average of the weights: validated and saved
        False, flag="--ema", action="store_true", default=None, help="keep an exponential moving "
        "average of the weights: validated, kept and saved instead of the raw ones")
    ema_momentum: float = setting(0.99, low=0, high=1)
    frozen_epochs: int = setting(  # two-phase fine-tuning: backbone frozen for the first N epochs,
        0, low=0, high=MAX_EPOCHS, flag="--frozen-epochs", help="two-phase fine-tuning: train "
        "only the head for N epochs (on cached features when the augmentation is none or flip), "
        "then everything at the rate x --finetune-lr-scale; {recipe}")
    finetune_lr_scale: float = setting(  # then trained with the schedule's rate x this
        0.1, low=0, flag="--finetune-lr-scale", help="{recipe}")
    # The thawed phase's rate rises from near 0 over its first N epochs (a fresh Adam's first
    # updates are full-sized whatever their gradients' noise). Off until the suite shows it
    # pays (docs/benchmarks.md, "The thawed phase's warm-up").
    finetune_warmup_epochs: float = setting(
        0.0, low=0, high=MAX_EPOCHS, flag="--finetune-warmup-epochs", help="after the frozen "
        "epochs, the rate rises from near 0 over the first N thawed epochs; {recipe}")
    # A timed run that fits its linear head on cached frozen features: the thawed phase starts
    # from that head, and the frozen phase is its one epoch (Adam's epochs on the head after
    # it drift from the converged fit, lower on val, and are never kept over it). Off: on the
    # suite it did not pay (docs/benchmarks.md, "The thaw from the linear head").
    thaw_from_head: bool = False
    # The part of the backbone trained once it thaws, from its top (by weighted layers, in
    # their order from the input): 1 = all of it. Below it no gradient is computed, which
    # makes a step cheaper (figures: docs/benchmarks.md#figures-behind-the-defaults).
    unfreeze_fraction: float = setting(
        1.0, low=0, high=1, flag="--unfreeze-fraction", help="the part of the backbone trained "
        "once it thaws, from the top (cheaper steps below 1); {recipe}")
    # Where only the backbone's top trains (BatchNorm in inference mode, the augmentation none
    # or flip): its frozen lower part's outputs computed once per view and the top trained on
    # them (training.thawed). Off until the suite shows it pays for its caching pass (a
    # forward pass per view; docs/benchmarks.md, "A thawed step's cost").
    cache_thawed: bool = False
    # Fine-tuning a pre-trained backbone. BatchNorm of a trained backbone: "auto" =
    # "inference" for pre-trained weights (moving statistics and scales kept, Keras' transfer-
    # learning guide: small batches would overwrite ImageNet's statistics) and "train" from
    # scratch. While the backbone is frozen its BatchNorm always runs in inference mode.
    batchnorm: str = setting("auto", choices=BATCHNORM_MODES)
    accumulation_steps: int = setting(  # average the gradients of N batches per optimizer update
        1, low=1, flag="--accumulation-steps", help="average the gradients of N batches per "
        "update (a larger effective batch when it does not fit)")
    early_stopping_patience: int = setting(
        # stop after N epochs without a better val macro F1; 0 = off
        0, low=0, flag="--early-stopping-patience", help="stop after N epochs without a better "
        "val macro F1 (default 0: off)")
    # Progressive resizing: the first epochs at start_size px, growing linearly (in steps of
    # 16 px) over the fraction [size_ramp_start, size_ramp_end) of the epochs to
    # model.input_size, at which the rest train and every epoch is validated. 0 = off.
    start_size: int = setting(
        0, low=0, high=MAX_SIZE, flag="--start-size", metavar="S", help="progressive resizing: "
        "the first epochs at S px, growing to the input size over the ramp "
        "(train.size_ramp_start/end: fractions of the epochs); 0 = off; {recipe}")
    size_ramp_start: float = setting(0.5, low=0, high=1)
    size_ramp_end: float = setting(0.8, low=0, high=1)
    # Loss weight per class (corolla.data.class_weights): "none", "balanced" (inverse class
    # frequency in the training split, as scikit-learn's) or a file of "class,weight" lines.
    class_weight: str = setting(
        "none", flag="--class-weight", metavar="none|balanced|FILE", help="weigh the loss per "
        "class: balanced (inverse class frequency in train) or a file of class,weight lines; "
        "default none")
    # Train for a time instead of a number of epochs: "90s", "10m", "1.5h"; "" = off.
    # The recipe's epochs are then the shape of the schedule (its warm-up, frozen epochs, size
    # ramp and decay keep their share of the run), and the number of epochs follows from a
    # timed probe of this machine (training.timing.budget); the schedule it fitted is written
    # into this config (epochs, frozen_epochs, warmup_epochs, model.input_size, ...), the rest
    # of what it decided (`time_plan`, `time_steps*`) into the run's time_plan.json.
    time_budget: str = setting(
        "", flag="--time", keyword="time", metavar="DURATION", type=duration, help="train for "
        "this long (90s, 10m, 1.5h): the recipe's schedule fitted to it, its epochs from a timed "
        "probe (not with --epochs)")
    time_plan: str = ""  # set by Corolla (time_plan.json): the plan's line ("" = none yet)
    # Refit: once validated, the run trains a second model from the same start on train + val
    # for the epochs the validated one trained (its schedule; each epoch a pass over train +
    # val), and predicts the test split with it (training.refit). With a time budget, the two
    # share it. The val scores stay the validated model's. auto: on for a timed run whose
    # classes have few training photos each (`training.settings.refit`), off otherwise; the run's
    # config.toml records what was decided. true / false stand for on / off.
    refit: str = setting(
        "auto", choices=REFIT_CHOICES, flag="--refit", nargs="?", const="on",
        metavar="{auto,on,off}", help="once validated, train the model again on train + val "
        "for the epochs found, and predict the test split with it (val scores stay the "
        "validated model's; --time covers both); --refit alone: on; default auto: on with "
        "--time where the classes have few training photos each")
    # Set by Corolla (time_plan.json): the plan's steps per epoch where it shortened them to fit
    # one epoch more (training.timing.budget.epochs_that_fit); 0 = steps_per_epoch, which stays
    # what was asked.
    time_steps: int = setting(0, low=0)
    # Set by Corolla (time_plan.json): where the plan made again mid-run changed the length of
    # the epochs after it to fill the time whole ones left (training.timing.pacing.replanned),
    # the epoch (from 0) from which they have `time_steps_later` steps; 0 = every epoch the
    # same.
    time_steps_from: int = setting(0, low=0)
    time_steps_later: int = setting(0, low=0)
    # With a time budget: the fewest epochs the recipe wants at model.input_size; where fewer
    # fit, the input size steps down by 16 px (not below time_min_size) to fit more. 0 = off.
    time_min_epochs: int = setting(0, low=0, high=MAX_EPOCHS)
    time_min_size: int = setting(0, low=0)


@dataclass
class RuntimeConfig:
    backend: str = setting(  # auto picks per hardware: see corolla.runtime.decide
        "auto", choices=BACKENDS, flag="--backend",
        help="Keras backend (default: auto, or KERAS_BACKEND)")
    strategy: str = setting(
        "auto", choices=STRATEGIES, flag="--strategy",
        help="distribution strategy (default: auto, from the hardware)")
    precision: str = setting(  # bfloat16 on TPU, float16 on recent NVIDIA GPUs, float32 on CPU
        "auto", choices=PRECISIONS, flag="--precision",
        help="dtype policy (default: auto, from the hardware)")
    # XLA for the train step and steps per host call: auto decides per accelerator (see
    # runtime.decide); set them to run an accelerator's settings anywhere, on CPU too.
    jit_compile: str = setting(  # auto | on | off
        "auto", choices=JIT_COMPILES, flag="--jit-compile",
        help="compile the train step with XLA (default: auto, per accelerator)")
    steps_per_execution: int = setting(  # 0 = auto: 16 on TPU, 1 elsewhere
        0, low=0, flag="--steps-per-execution", metavar="N",
        help="train steps per host call (default: 0 = auto, 16 on TPU, 1 elsewhere)")
    # JAX's persistent compilation cache (runtime.compile_cache): auto = <cache>/jax-compile
    # ($COROLLA_CACHE_DIR or ~/.cache/corolla), a folder, or off.
    compile_cache: str = setting(
        "auto", flag="--compile-cache", metavar="FOLDER|off", help="JAX's persistent "
        "compilation cache (default: auto = ~/.cache/corolla/jax-compile, or "
        "$COROLLA_CACHE_DIR/jax-compile)")


@dataclass
class OutputConfig:
    runs_dir: str = setting(
        "runs", flag="--runs-dir", help="where run directories go (default: runs)")
    name: str = setting(  # run directory name; "" = <model>-<timestamp>
        "", flag="--name",
        help="run directory name inside --runs-dir (default: <model>-<timestamp>)")
    run_id: str = ""  # set by Corolla: fresh for every new run, kept on --resume
    track: str = setting(  # also send the run to an experiment tracker: none, mlflow or wandb
        "none", choices=TRACKERS, flag="--track", help="also send the run (its config, every "
        "epoch's figures, the final scores, report.html) to MLflow (MLFLOW_TRACKING_URI, else "
        "RUNS_DIR/mlflow.db) or Weights & Biases (its own environment: WANDB_MODE=offline works "
        "without a network); default none")


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)


# Config key -> its declaration (config.setting), for every key: the checks below, the flag
# table (config.flags) and the command line's options are made from it.
SETTINGS: dict[str, Setting] = table(RunConfig)
_CHOICES = {key: s.choices for key, s in SETTINGS.items() if s.choices}


_ARTICLE = {int: "an int", float: "a float", bool: "a bool (true or false)", str: "a string"}


def _coerce(label: str, value: Any, kind: type) -> Any:
    """Converts a TOML or command-line value to the field's type, or says what was wrong."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
    elif kind is int and not isinstance(value, bool):
        if isinstance(value, int):  # whatever its size: the ranges say what fits
            return value
        try:
            if isinstance(value, str) or float(value) == int(value):
                return int(value)
        except (TypeError, ValueError, OverflowError):  # (OverflowError: 1e400, infinity)
            pass
    elif kind is float and not isinstance(value, bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    elif kind is str and isinstance(value, (str, int, float)):
        return str(value)
    raise UserError(f"{label} must be {_ARTICLE[kind]}, got {brief(value)}")


def brief(value: Any, width: int = 80) -> str:
    """A value as an error shows it: its repr on one line, cut at `width` (an array or a
    long string given by mistake would fill the terminal)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _types(section) -> dict[str, type]:
    # `from __future__ import annotations` makes field.type a string: map it back.
    names = {"int": int, "float": float, "bool": bool, "str": str, "list": list}
    return {f.name: names[f.type] for f in dataclasses.fields(section)}


def with_settings(config: RunConfig, updates: dict[str, Any],
                  labels: dict[str, str] | None = None) -> RunConfig:
    """A copy of `config` with dotted-key updates ("train.epochs": 3) applied and checked.
    `labels` names where a key's value came from (its flag, "--epochs"), for error messages."""
    labels = labels or {}
    config = dataclasses.replace(config, **{
        f.name: dataclasses.replace(getattr(config, f.name)) for f in dataclasses.fields(config)})
    sections = {f.name for f in dataclasses.fields(config)}
    for key, value in updates.items():
        section_name, _, name = key.partition(".")
        if section_name not in sections:
            raise UserError(f"unknown config section {section_name!r} in {key!r}; "
                            f"sections are: {', '.join(sorted(sections))}")
        section = getattr(config, section_name)
        types = _types(section)
        if name not in types:
            raise UserError(f"unknown config key {key!r}; keys of [{section_name}] are: "
                            f"{', '.join(types)}")
        label = labels.get(key, key)
        if types[name] is list:  # the only list: data.augment
            value = policies.resolve(value, label)
        elif isinstance(value, bool) and {"on", "off"} <= set(_CHOICES.get(key, ())):
            value = "on" if value else "off"  # `refit = true` in TOML, refit=True in Python
        else:
            value = _coerce(label, value, types[name])
        if key in _CHOICES and value not in _CHOICES[key]:
            raise UserError(f"{label} must be one of {', '.join(_CHOICES[key])}, got "
                            f"{brief(value)}")
        setattr(section, name, value)
    _check(config, labels)
    return config


_UNITS = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(text: str, label: str = "train.time_budget") -> float:
    """Seconds of a duration as people write them: "90s", "10m", "1.5h" (a number and a unit);
    anything else is a one-line UserError naming `label` and the accepted forms."""
    value = str(text).strip().lower()
    try:
        seconds = float(value[:-1]) * _UNITS[value[-1:]]
    except (KeyError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise UserError(f"{label} must be a duration: a positive number and a unit, s, m or h "
                        f"(90s, 10m, 1.5h), got {text!r}")
    return seconds


def derived_rate(value: float) -> float:
    """A learning rate derived by arithmetic (a peak over 10, times a scale), as the decimal a
    person would write: 0.003 / 10 is 0.00030000000000000003 in binary floating point, which
    config.toml and the log would show. Rounded when it is derived, not when it is saved, so a
    resumed run reads back exactly the value an uninterrupted one trains with."""
    return float(f"{value:.12g}")


def format_duration(seconds: float) -> str:
    """The shortest of "90s", "10m", "1.5h" that says `seconds` (rounded up to a second)."""
    seconds = math.ceil(seconds)
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def _check(config: RunConfig, labels: dict[str, str]) -> None:
    def fail(key, rule, value):
        raise UserError(f"{labels.get(key, key)} must {rule}, got {brief(value)}")

    _check_ranges(config, fail)
    t = config.train
    _check_folds(config, labels)
    if t.time_budget:
        duration_seconds(t.time_budget, labels.get("train.time_budget", "train.time_budget"))
    if t.class_weight not in ("none", "balanced") and not Path(t.class_weight).is_file():
        fail("train.class_weight", "be none, balanced or an existing file of class,weight "
             "lines", t.class_weight)
    if t.learning_rate <= 0:
        fail("train.learning_rate", "be positive", t.learning_rate)
    if t.unfreeze_fraction <= 0:
        fail("train.unfreeze_fraction", "be above 0 (to keep the backbone frozen: "
             "--freeze-backbone)", t.unfreeze_fraction)
    if t.size_ramp_end < t.size_ramp_start:
        fail("train.size_ramp_end", f"not be below train.size_ramp_start ({t.size_ramp_start})",
             t.size_ramp_end)
    if not config.runtime.compile_cache.strip():
        fail("runtime.compile_cache", "be auto, off or a folder", config.runtime.compile_cache)
    name = config.output.name
    if name and (PurePath(name).is_absolute() or ".." in PurePath(name).parts):
        fail("output.name", f"be a folder name inside {config.output.runs_dir!r} (no absolute "
             f"path, no '..')", name)


def _check_ranges(config: RunConfig, fail) -> None:
    """Every key declared with a range (`low`, `high`) within it, and a finite number."""
    for key, declared in SETTINGS.items():
        if declared.low is None and declared.high is None:
            continue
        section, _, name = key.partition(".")
        value, low, high = getattr(getattr(config, section), name), declared.low, declared.high
        if isinstance(value, float) and not math.isfinite(value):
            fail(key, "be a finite number", value)
        if value < low:
            fail(key, "be at least 1" if low == 1 else "not be negative", value)
        if high is not None and value > high:
            fail(key, f"be at most {high}", value)


MAX_FOLDS = 100


def _check_folds(config: RunConfig, labels: dict[str, str]) -> None:
    folds, fold = config.train.folds, config.data.fold
    if folds == 1 or not 0 <= folds <= MAX_FOLDS:
        raise UserError(f"{labels.get('train.folds', 'train.folds')} must be 0 (no k-fold) or "
                        f"a number of folds from 2 to {MAX_FOLDS}, got {folds!r}")
    if config.train.refit == "on" and (folds or fold):
        raise UserError(f"{labels.get('train.refit', 'train.refit')} trains one model on train + "
                        f"val; k-fold ({labels.get('train.folds', 'train.folds')}) already "
                        f"predicts the test split with every fold's model: use one or the other")
    if not 0 <= fold <= folds or (fold and not config.data.folds_file):
        raise UserError(f"data.fold is set by k-fold training (a fold from 1 to train.folds, "
                        f"with data.folds_file); got fold {fold!r} of {folds!r}: leave both "
                        f"unset")


def flatten(tree: dict[str, Any]) -> dict[str, Any]:
    """{"train": {"epochs": 3}} -> {"train.epochs": 3}; a non-table section is an error."""
    flat = {}
    for section, values in tree.items():
        if not isinstance(values, dict):
            raise UserError(f"config entry {section!r} must be a [table] of keys, got {values!r}")
        flat.update({f"{section}.{key}": value for key, value in values.items()})
    return flat


class ConfigFile:
    """A config file (`--config F`, a run's config.toml) read at its first use and never again:
    a command passes this one object down, so the steps that consult the file (the config, the
    recipe's layers, what "auto" picks) share one parse, and a bad file is still reported at
    the first use."""

    def __init__(self, path: str | Path):
        self.path = path

    @functools.cached_property
    def _values(self) -> dict[str, Any]:
        return flatten(read_toml(self.path, "config file"))

    @property
    def values(self) -> dict[str, Any]:
        """The file's settings as dotted keys (a copy: callers add to it)."""
        return dict(self._values)

    def __str__(self) -> str:  # messages name the file as it was given
        return str(self.path)

    def __bool__(self) -> bool:  # an empty path counts as no file, as the string did
        return bool(str(self.path))


def config_file(path: str | Path | ConfigFile | None) -> ConfigFile | None:
    """`path` as a ConfigFile to pass down (None and a ConfigFile as they are)."""
    return path if path is None or isinstance(path, ConfigFile) else ConfigFile(path)


def load_config(path: str | Path | ConfigFile | None = None,
                overrides: dict[str, Any] | None = None,
                labels: dict[str, str] | None = None) -> RunConfig:
    """Defaults <- TOML file (if given) <- overrides (dotted keys; `labels` as in
    `with_settings`)."""
    config = RunConfig()
    file = config_file(path)
    if file is not None:
        config = with_settings(config, file.values)
    return with_settings(config, overrides or {}, labels)


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """A TOML file's tree; a missing or malformed file is a one-line error naming `what`."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {str(path)!r} is a folder; pass a .toml file")
    try:
        return tomllib.loads(read_bounded(path, MAX_TEXT, what).decode("utf-8-sig"))
    except FileNotFoundError:
        raise UserError(f"{what} {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} {str(path)!r} is not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {str(path)!r} is not UTF-8 text ({e.reason} at byte "
                        f"{e.start}); save it as UTF-8") from None
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise UserError(f"{what} {str(path)!r} nests arrays or tables too deep to read; no "
                        f"setting takes more than a list of values") from None


def save_config(config: RunConfig, path: str | Path) -> None:
    """`config` as a TOML file, without the time plan's decisions (`TIME_PLAN_KEYS`: a run's
    are in its time_plan.json)."""
    tree = config.to_dict()
    for key in TIME_PLAN_KEYS:
        section, _, name = key.partition(".")
        tree[section].pop(name)
    write_text_atomic(path, tomli_w.dumps(tree))
