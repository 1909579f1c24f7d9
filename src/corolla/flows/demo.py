"""`corolla demo`: synthetic petals in the competition layout -> the same train / evaluate /
predict path as real data, offline, in a few minutes on a laptop CPU.

`tiny=True` is the "run locally" switch (big_vision style): a few dozen 32 px images and one
epoch, so tests exercise the whole path in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corolla.config import RunConfig, load_config
from corolla import runtime
from corolla.data.synthetic import dataset as synthetic
from corolla.data.synthetic.dataset import PetalsSpec


@dataclass(frozen=True)
class DemoSettings:
    data: PetalsSpec
    epochs: int
    batch_size: int  # per replica
    learning_rate: float


# 48 px: the petal shapes are still clear, at about half the pixels of 64 px, so the demo
# stays short on a CPU; 8 epochs: enough for the small CNN to tell the ten classes apart
# (figures: docs/benchmarks.md#figures-behind-the-defaults).
FULL = DemoSettings(PetalsSpec(image_size=48), epochs=8, batch_size=32, learning_rate=3e-3)
TINY = DemoSettings(PetalsSpec(image_size=32, num_classes=4, train=64, val=32, test=20,
                               shards=2), epochs=1, batch_size=8, learning_rate=3e-3)


def demo_config(data_dir: Path, settings: DemoSettings, runs_dir: str, name: str = "",
                overrides: dict | None = None) -> RunConfig:
    return load_config(overrides={
        "data.path": str(data_dir), "model.name": "small_cnn",
        "train.epochs": settings.epochs, "train.batch_size": settings.batch_size,
        "train.learning_rate": settings.learning_rate, "train.warmup_epochs": 1,
        "output.runs_dir": runs_dir, "output.name": name, **(overrides or {})})


def run(cache_dir: str | Path, runs_dir: str = "runs", tiny: bool = False, name: str = "",
        overrides: dict | None = None, plan=None, log=print):
    """Returns (run directory, val metrics). `overrides` are dotted config keys (e.g. the
    runtime flags); `plan` defaults to detecting the hardware."""
    settings = TINY if tiny else FULL
    # The plan first: it picks the Keras backend, before anything imports TensorFlow.
    plan = plan or runtime.detect_for(demo_config(Path(cache_dir), settings, runs_dir, name,
                                                  overrides))
    from corolla.flows.run import train_evaluate_predict

    data_dir = synthetic.ensure(cache_dir, settings.data, log=log)
    config = demo_config(data_dir, settings, runs_dir, name, overrides)
    return train_evaluate_predict(config, plan, log=log)
