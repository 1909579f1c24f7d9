"""One typed config per run: defaults, then an optional TOML file, then command-line overrides.

Unknown keys and ill-typed values are user errors. The resolved config is written to the run
directory as `config.toml`, so `corolla evaluate` / `predict` rebuild exactly what was trained.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from corolla.errors import UserError

BACKENDS = ("auto", "tensorflow", "jax")
STRATEGIES = ("auto", "tpu", "mirrored", "multiworker", "one_device", "data_parallel", "default")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")


@dataclass
class DataConfig:
    path: str = ""  # a folder (local or gs://) holding tfrecords-jpeg-SxS/{train,val,test}/
    image_size: int = 0  # which SxS folder to read; 0 = the one nearest the model's default size
    augment: bool = True  # random flips, crops and colour jitter on the training split
    cache: bool = False  # keep decoded training images in memory (small data sets on CPU/GPU)
    shuffle_buffer: int = 2048  # examples; the competition's shards are already mixed


@dataclass
class ModelConfig:
    name: str = "small_cnn"  # a key of the model registry: `corolla info --models`
    weights: str = "none"  # "none", "imagenet" (downloads) or a local backbone weights file
    train_backbone: bool = True  # False freezes the backbone, as the tutorial does with VGG16


@dataclass
class TrainConfig:
    epochs: int = 12  # the tutorial's 12
    batch_size: int = 16  # per replica: global batch = 16 x REPLICAS, as in the tutorial
    global_batch_size: int = 0  # set it instead to keep the global batch fixed across hardware
    learning_rate: float = 0.0  # peak rate; 0 = the model's registered default
    warmup_epochs: float = 1.0  # linear ramp-up to the peak, then cosine decay to 1% of it
    steps_per_epoch: int = 0  # 0 = one pass over the training split
    seed: int = 42


@dataclass
class RuntimeConfig:
    backend: str = "auto"  # auto picks per hardware: see corolla.runtime.decide
    strategy: str = "auto"
    precision: str = "auto"  # bfloat16 on TPU, float16 on recent NVIDIA GPUs, float32 on CPU


@dataclass
class OutputConfig:
    runs_dir: str = "runs"
    name: str = ""  # run directory name; "" = <model>-<timestamp>


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
            "runtime.precision": PRECISIONS}


def _coerce(key: str, value: Any, kind: type) -> Any:
    """Converts a TOML or command-line value to the field's type, or says what was wrong."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
    elif kind is int and not isinstance(value, bool):
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
    raise UserError(f"config key {key!r} must be a {kind.__name__}, got {value!r}")


def _types(section) -> dict[str, type]:
    # `from __future__ import annotations` makes field.type a string: map it back.
    names = {"int": int, "float": float, "bool": bool, "str": str}
    return {f.name: names[f.type] for f in dataclasses.fields(section)}


def apply(config: RunConfig, updates: dict[str, Any]) -> RunConfig:
    """A copy of `config` with dotted-key updates ("train.epochs": 3) applied and checked."""
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
        value = _coerce(key, value, types[name])
        if key in _CHOICES and value not in _CHOICES[key]:
            raise UserError(f"{key} must be one of {', '.join(_CHOICES[key])}, got {value!r}")
        setattr(section, name, value)
    _check(config)
    return config


def _check(config: RunConfig) -> None:
    positive = {"train.epochs": config.train.epochs, "train.batch_size": config.train.batch_size}
    for key, value in positive.items():
        if value < 1:
            raise UserError(f"{key} must be at least 1, got {value}")
    non_negative = {"train.global_batch_size": config.train.global_batch_size,
                    "train.steps_per_epoch": config.train.steps_per_epoch,
                    "train.learning_rate": config.train.learning_rate,
                    "train.warmup_epochs": config.train.warmup_epochs,
                    "data.image_size": config.data.image_size}
    for key, value in non_negative.items():
        if value < 0:
            raise UserError(f"{key} must not be negative, got {value}")


def flatten(tree: dict[str, Any]) -> dict[str, Any]:
    """{"train": {"epochs": 3}} -> {"train.epochs": 3}; a non-table section is an error."""
    flat = {}
    for section, values in tree.items():
        if not isinstance(values, dict):
            raise UserError(f"config entry {section!r} must be a [table] of keys, got {values!r}")
        flat.update({f"{section}.{key}": value for key, value in values.items()})
    return flat


def load(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Defaults <- TOML file (if given) <- overrides (dotted keys)."""
    config = RunConfig()
    if path is not None:
        path = Path(path)
        try:
            tree = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"config file {str(path)!r} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"config file {str(path)!r} is not valid TOML: {e}") from None
        config = apply(config, flatten(tree))
    return apply(config, overrides or {})


def save(config: RunConfig, path: str | Path) -> None:
    Path(path).write_text(tomli_w.dumps(config.to_dict()))
