"""The config layer: what a run is asked to do, as data, checked before anything runs.

`schema` (the typed sections, load_config / with_settings / save_config), `setting` (each
field's declaration, which the checks, the flags and the options are made from), `flags` (the
flag-to-key table shared by the CLI and the Python API), `policies` (augmentation names),
`recipe` (training choices as TOML data, `recipes/*.toml`). `corolla.config` itself is the
schema: `load_config`, `RunConfig`, `with_settings`, `save_config`. No TensorFlow, Keras or
hardware here.

    flags: the one table from a command-line flag (or API keyword) to the config key it sets
    policies: augmentation names and policies: what `data.augment` may say
    range_test: the settings of the learning-rate range test, checked before anything heavy
    recipe: recipes, training choices as TOML data shipped with the package (`recipes/*.toml`)
    schema: one typed config per run: defaults < TOML file < overrides, checked, saved
    setting: a config field declared once: its default, range, choices, flag and help
"""

from corolla.config.schema import (BACKENDS, JIT_COMPILES, LR_SCALINGS, OPTIMIZERS,
                                   PRECISIONS, SCHEDULES, STRATEGIES, TRACKERS,
                                   ConfigFile, DataConfig,
                                   ModelConfig, OutputConfig, RunConfig, RuntimeConfig,
                                   TrainConfig, config_file, derived_rate, duration_seconds,
                                   flatten, format_duration, load_config, read_toml,
                                   save_config, with_settings)

__all__ = ["BACKENDS", "ConfigFile", "DataConfig", "JIT_COMPILES", "LR_SCALINGS", "ModelConfig",
           "OPTIMIZERS", "OutputConfig", "PRECISIONS", "RunConfig", "RuntimeConfig", "SCHEDULES",
           "STRATEGIES", "TRACKERS", "TrainConfig",
           "config_file", "derived_rate", "duration_seconds", "flatten", "format_duration",
           "load_config", "read_toml", "save_config", "with_settings"]
