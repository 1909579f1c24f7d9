"""The config layer: what a run is asked to do, as data, checked before anything runs.

`schema` (the typed sections, load / apply / save), `flags` (the flag-to-key table shared by
the CLI and the Python API), `policies` (augmentation names), `recipe` (training choices as
TOML data, `recipes/*.toml`). `corolla.config` itself is the schema: `corolla.config.load`,
`RunConfig`, `apply`, `save`. No TensorFlow, Keras or hardware here.
"""

from corolla.config.schema import (BACKENDS, JIT_COMPILES, LR_SCALINGS, OPTIMIZERS,
                                   PRECISIONS, SCHEDULES, STRATEGIES, TRACKERS,
                                   ConfigFile, DataConfig,
                                   ModelConfig, OutputConfig, RunConfig, RuntimeConfig,
                                   TrainConfig, apply, config_file, duration_seconds, flatten,
                                   format_duration, load, rate, read_toml, save)

__all__ = ["BACKENDS", "ConfigFile", "DataConfig", "JIT_COMPILES", "LR_SCALINGS", "ModelConfig",
           "OPTIMIZERS", "OutputConfig", "PRECISIONS", "RunConfig", "RuntimeConfig", "SCHEDULES",
           "STRATEGIES", "TRACKERS", "TrainConfig",
           "apply", "config_file", "duration_seconds", "flatten", "format_duration", "load",
           "rate", "read_toml", "save"]
