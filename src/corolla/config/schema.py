"""One typed config per run: defaults, then an optional TOML file, then command-line overrides.

Unknown keys and ill-typed values are user errors. The resolved config is written to the run
directory as `config.toml`, so `corolla evaluate` / `predict` rebuild exactly what was trained.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import tomli_w

from corolla.config import policies
from corolla.errors import UserError
from corolla.files import write_text_atomic

BACKENDS = ("auto", "tensorflow", "jax")
STRATEGIES = ("auto", "tpu", "mirrored", "multiworker", "one_device", "data_parallel", "default")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
JIT_COMPILES = ("auto", "on", "off")
SCHEDULES = ("cosine", "ramp")
OPTIMIZERS = ("adam", "adamw", "sgd")
LR_SCALINGS = ("none", "replicas")
BATCHNORM_MODES = ("auto", "inference", "train")
TRACKERS = ("none", "mlflow", "wandb")  # output.track: where a run's figures are also sent


@dataclass
class DataConfig:
    path: str = ""  # a folder (local or gs://) holding tfrecords-jpeg-SxS/{train,val,test}/
    image_size: int = 0  # which SxS folder to read; 0 = the one nearest the model's default size
    # Training-split augmentation: a policy (none, default, strong) or a list of names (flip,
    # affine, crop, color, mixup, cutmix, randaugment); true/false mean default/none.
    augment: list = field(default_factory=lambda: list(policies.POLICIES["default"]))
    # Keep decoded training images in memory (small data sets on CPU/GPU); skipped, with a log
    # line, where they would fill over a quarter of the host's memory.
    cache: bool = False
    shuffle_buffer: int = 2048  # examples; the competition's shards are already mixed
    # Skip damaged records (images that do not decode, a file's damaged tail) instead of stopping;
    # the command ends with a count per file. Off: a damaged record is an error naming its file.
    skip_bad_records: bool = False
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
    name: str = "small_cnn"  # a key of the model registry: `corolla info --models`
    weights: str = "none"  # "none", "imagenet" (downloads) or a local backbone weights file
    train_backbone: bool = True  # False freezes the backbone, as the tutorial does with VGG16
    dropout: float = 0.0  # dropout rate before the classifier head; 0 = none
    # The size the model sees, at most: larger images are scaled down to it as they are decoded
    # (JPEG DCT scaling when it divides the data's size), for training and prediction alike;
    # 0 = the data's size. A run's config records the size it resolved to.
    input_size: int = 0


@dataclass
class TrainConfig:
    epochs: int = 12  # the tutorial's 12
    batch_size: int = 16  # per replica: global batch = 16 x REPLICAS, as in the tutorial
    global_batch_size: int = 0  # set it instead to keep the global batch fixed across hardware
    learning_rate: float = 1e-3  # peak rate (recipes set their own); see scale_lr
    warmup_epochs: float = 1.0  # linear ramp-up from start_learning_rate to the peak
    steps_per_epoch: int = 0  # 0 = one pass over the training split
    seed: int = 42  # model initialisation, shuffling and augmentation derive from it
    deterministic: bool = False  # ordered reads + TensorFlow op determinism: bit-identical runs
    # K-fold: K models on train+val split into K stratified folds (seeded by `seed`), scored on
    # their pooled out-of-fold predictions, test probabilities averaged. 0 = off (one model).
    folds: int = 0
    # The recipe under the config file and flags: "auto" (by accelerator), a shipped recipe's
    # name (`corolla info --recipes`) or a recipe file. A run's config records the one used.
    recipe: str = "auto"
    # cosine: per step, linear warm-up then cosine decay to min_learning_rate. ramp: the
    # tutorial's, per epoch: ramp-up (warmup_epochs), sustain_epochs at the peak, then
    # (peak - min) * lr_decay ** epochs_since + min.
    schedule: str = "cosine"
    start_learning_rate: float = 0.0  # where the warm-up starts; 0 = a tenth of the peak
    min_learning_rate: float = 0.0  # where the decay ends; 0 = 1% of the peak
    sustain_epochs: float = 0.0  # ramp: epochs at the peak after the warm-up
    lr_decay: float = 0.8  # ramp: exponential decay factor per epoch after the sustain
    scale_lr: str = "none"  # "replicas": peak x REPLICAS, as the TPU notebooks do (start, min not)
    optimizer: str = "adam"  # adam, adamw or sgd (with momentum)
    momentum: float = 0.9  # sgd only
    weight_decay: float = 0.0  # decoupled weight decay (adamw's own; adam and sgd apply it too)
    label_smoothing: float = 0.0
    ema: bool = False  # exponential moving average of the weights: validated and saved
    ema_momentum: float = 0.99
    frozen_epochs: int = 0  # two-phase fine-tuning: backbone frozen for the first N epochs,
    finetune_lr_scale: float = 0.1  # then trained with the schedule's rate x this
    # The part of the backbone trained once it thaws, from its top (by weighted layers, in
    # their order from the input): 1 = all of it. Below it no gradient is computed, which
    # makes a step cheaper (on a CPU ~2x for EfficientNet-Lite0's top half).
    unfreeze_fraction: float = 1.0
    # Fine-tuning a pre-trained backbone. BatchNorm of a trained backbone: "auto" =
    # "inference" for pre-trained weights (moving statistics and scales kept, Keras' transfer-
    # learning guide: small batches would overwrite ImageNet's statistics) and "train" from
    # scratch. While the backbone is frozen its BatchNorm always runs in inference mode.
    batchnorm: str = "auto"
    accumulation_steps: int = 1  # average the gradients of N batches per optimizer update
    early_stopping_patience: int = 0  # stop after N epochs without a better val macro F1; 0 = off
    # Progressive resizing: the first epochs at start_size px, growing linearly (in steps of
    # 16 px) over the fraction [size_ramp_start, size_ramp_end) of the epochs to
    # model.input_size, at which the rest train and every epoch is validated. 0 = off.
    start_size: int = 0
    size_ramp_start: float = 0.5
    size_ramp_end: float = 0.8
    # Loss weight per class (corolla.data.class_weights): "none", "balanced" (inverse class
    # frequency in the training split, as scikit-learn's) or a file of "class,weight" lines.
    class_weight: str = "none"
    # Train for a time instead of a number of epochs: "90s", "10m", "1.5h"; "" = off.
    # The recipe's epochs are then the shape of the schedule (its warm-up, frozen epochs, size
    # ramp and decay keep their share of the run), and the number of epochs follows from a
    # timed probe of this machine (training.budget); what it decided is written into this
    # config (epochs, frozen_epochs, warmup_epochs, model.input_size, ...), `time_plan` and
    # `time_steps`.
    time_budget: str = ""
    time_plan: str = ""  # set by Corolla: the plan decided for time_budget ("" = none yet)
    # Refit: once validated, the run trains a second model from the same start on train + val
    # for the epochs the validated one trained (its schedule; each epoch a pass over train +
    # val), and predicts the test split with it (training.refit). With a time budget, the two
    # share it. The val scores stay the validated model's.
    refit: bool = False
    # Set by Corolla: the plan's steps per epoch where it shortened them to fit one epoch more
    # (training.budget.fill); 0 = steps_per_epoch, which stays what was asked.
    time_steps: int = 0
    # With a time budget: the fewest epochs the recipe wants at model.input_size; where fewer
    # fit, the input size steps down by 16 px (not below time_min_size) to fit more. 0 = off.
    time_min_epochs: int = 0
    time_min_size: int = 0


@dataclass
class RuntimeConfig:
    backend: str = "auto"  # auto picks per hardware: see corolla.runtime.decide
    strategy: str = "auto"
    precision: str = "auto"  # bfloat16 on TPU, float16 on recent NVIDIA GPUs, float32 on CPU
    # XLA for the train step and steps per host call: auto decides per accelerator (see
    # runtime.decide); set them to run an accelerator's settings anywhere, on CPU too.
    jit_compile: str = "auto"  # auto | on | off
    steps_per_execution: int = 0  # 0 = auto: 16 on TPU, 1 elsewhere
    # JAX's persistent compilation cache (runtime.compile_cache): auto = <cache>/jax-compile
    # ($COROLLA_CACHE_DIR or ~/.cache/corolla), a folder, or off.
    compile_cache: str = "auto"


@dataclass
class OutputConfig:
    runs_dir: str = "runs"
    name: str = ""  # run directory name; "" = <model>-<timestamp>
    run_id: str = ""  # set by Corolla: fresh for every new run, kept on --resume
    track: str = "none"  # also send the run to an experiment tracker: none, mlflow or wandb


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)


_CHOICES = {"runtime.backend": BACKENDS, "runtime.strategy": STRATEGIES,
            "runtime.precision": PRECISIONS, "runtime.jit_compile": JIT_COMPILES,
            "train.schedule": SCHEDULES, "train.optimizer": OPTIMIZERS,
            "train.scale_lr": LR_SCALINGS, "train.batchnorm": BATCHNORM_MODES,
            "output.track": TRACKERS}


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
        except (TypeError, ValueError):
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


def apply(config: RunConfig, updates: dict[str, Any],
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
        else:
            value = _coerce(label, value, types[name])
        if key in _CHOICES and value not in _CHOICES[key]:
            raise UserError(f"{label} must be one of {', '.join(_CHOICES[key])}, got "
                            f"{brief(value)}")
        setattr(section, name, value)
    _check(config, labels)
    return config


MAX_EPOCHS = 10_000  # more is a typo, not a plan
MAX_SEED = 2**32 - 1  # what NumPy's and scikit-learn's generators take
MAX_SIZE = 4096  # px: the largest image size converted or read (a typo beyond, not a plan)
# Records held to shuffle: TensorFlow reserves a slot for each up front (1e8: 3 GB for any data;
# 1e12: std::bad_alloc). The pipeline also holds no more than the split has.
MAX_SHUFFLE_BUFFER = 1_000_000

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


def rate(value: float) -> float:
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

    t = config.train
    ranges = {"train.epochs": (t.epochs, 1, MAX_EPOCHS),
              "train.batch_size": (t.batch_size, 1, None),
              "data.shuffle_buffer": (config.data.shuffle_buffer, 1, MAX_SHUFFLE_BUFFER),
              "train.global_batch_size": (t.global_batch_size, 0, None),
              "train.steps_per_epoch": (t.steps_per_epoch, 0, None),
              "train.time_steps": (t.time_steps, 0, None),
              "train.learning_rate": (t.learning_rate, 0, None),
              "train.warmup_epochs": (t.warmup_epochs, 0, MAX_EPOCHS),
              "train.seed": (t.seed, 0, MAX_SEED),
              "data.image_size": (config.data.image_size, 0, MAX_SIZE),
              "model.input_size": (config.model.input_size, 0, MAX_SIZE),
              "train.start_learning_rate": (t.start_learning_rate, 0, None),
              "train.min_learning_rate": (t.min_learning_rate, 0, None),
              "train.sustain_epochs": (t.sustain_epochs, 0, MAX_EPOCHS),
              "train.lr_decay": (t.lr_decay, 0, 1), "train.momentum": (t.momentum, 0, 1),
              "train.weight_decay": (t.weight_decay, 0, None),
              "train.label_smoothing": (t.label_smoothing, 0, 1),
              "model.dropout": (config.model.dropout, 0, 0.99),
              "train.ema_momentum": (t.ema_momentum, 0, 1),
              "train.frozen_epochs": (t.frozen_epochs, 0, MAX_EPOCHS),
              "train.finetune_lr_scale": (t.finetune_lr_scale, 0, None),
              "train.unfreeze_fraction": (t.unfreeze_fraction, 0, 1),
              "train.accumulation_steps": (t.accumulation_steps, 1, None),
              "train.early_stopping_patience": (t.early_stopping_patience, 0, None),
              "train.start_size": (t.start_size, 0, MAX_SIZE),
              "train.size_ramp_start": (t.size_ramp_start, 0, 1),
              "train.size_ramp_end": (t.size_ramp_end, 0, 1),
              "train.time_min_epochs": (t.time_min_epochs, 0, MAX_EPOCHS),
              "train.time_min_size": (t.time_min_size, 0, None),
              "runtime.steps_per_execution": (config.runtime.steps_per_execution, 0, None)}
    for key, (value, low, high) in ranges.items():
        if isinstance(value, float) and not math.isfinite(value):
            fail(key, "be a finite number", value)
        if value < low:
            fail(key, "be at least 1" if low == 1 else "not be negative", value)
        if high is not None and value > high:
            fail(key, f"be at most {high}", value)
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


MAX_FOLDS = 100


def _check_folds(config: RunConfig, labels: dict[str, str]) -> None:
    folds, fold = config.train.folds, config.data.fold
    if folds == 1 or not 0 <= folds <= MAX_FOLDS:
        raise UserError(f"{labels.get('train.folds', 'train.folds')} must be 0 (no k-fold) or "
                        f"a number of folds from 2 to {MAX_FOLDS}, got {folds!r}")
    if config.train.refit and (folds or fold):
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


def load(path: str | Path | ConfigFile | None = None, overrides: dict[str, Any] | None = None,
         labels: dict[str, str] | None = None) -> RunConfig:
    """Defaults <- TOML file (if given) <- overrides (dotted keys; `labels` as in `apply`)."""
    config = RunConfig()
    file = config_file(path)
    if file is not None:
        config = apply(config, file.values)
    return apply(config, overrides or {}, labels)


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """A TOML file's tree; a missing or malformed file is a one-line error naming `what`."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise UserError(f"{what} {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} {str(path)!r} is not valid TOML: {e}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {str(path)!r} is a folder; pass a .toml file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {str(path)!r} is not UTF-8 text ({e.reason} at byte "
                        f"{e.start}); save it as UTF-8") from None


def save(config: RunConfig, path: str | Path) -> None:
    write_text_atomic(path, tomli_w.dumps(config.to_dict()))
