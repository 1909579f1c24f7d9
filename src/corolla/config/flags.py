"""The one table where settings meet the config: a command-line flag's destination (its Python
name, which is also the notebook API's keyword) -> the config key it sets, made from the flags
the config's fields are declared with (`config.setting`).

The CLI builds its overrides from it, the Python API its keywords, and both name what the user
typed in errors: `--epochs` on the command line, `epochs=` from Python (`names`).
"""

from __future__ import annotations

import difflib
from pathlib import Path

from corolla.config.schema import SETTINGS
from corolla.errors import UserError

# Destination (and keyword) -> config key, for every key declared with a flag (config.setting).
FLAG_KEYS = {s.keyword: key for key, s in SETTINGS.items() if s.flag}

# Settings that are not config keys but are named in errors: the config file and the run to
# resume (`names["config"]`, `names["resume"]`).
EXTRA = ("config", "resume")


def from_flags(values: dict, flag_names: dict[str, str]) -> tuple[dict, dict]:
    """(config key -> value, config key -> flag) of parsed command-line flags: `values` by
    destination (None: not given), `flag_names` destination -> the flag ("--epochs")."""
    flags = {key: values[dest] for dest, key in FLAG_KEYS.items()
             if values.get(dest) is not None}
    names = {key: flag_names[dest] for dest, key in FLAG_KEYS.items() if dest in flag_names}
    names.update({extra: f"--{extra}" for extra in EXTRA})
    _one_batch(flags, names)
    return flags, names


def _one_batch(flags: dict, names: dict) -> None:
    """The batch is set per replica or for all replicas, not both: with both, one of them
    would be recorded in the run without ever having run."""
    if flags.get("train.batch_size") is not None and flags.get("train.global_batch_size"):
        raise UserError(f"{names['train.batch_size']} (per replica) and "
                        f"{names['train.global_batch_size']} (all replicas together) both set "
                        f"the batch; pass one of them")


def as_written(name: str, value) -> str:
    """A setting as the user wrote it, its `name` from the names above: `--model x` on the
    command line, `model="x"` from Python."""
    return f'{name}"{value}"' if name.endswith("=") else f"{name} {value}"


def keyword_names() -> dict[str, str]:
    """Config key -> "keyword=" for every setting: how errors name them to a Python caller."""
    names = {key: f"{name}=" for name, key in FLAG_KEYS.items()}
    names.update({extra: f"{extra}=" for extra in EXTRA})
    return names


def from_keywords(given: dict, what: str, only: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """(config key -> value, config key -> "keyword=") of a Python call's keyword settings;
    `only`: the config key prefixes this call takes. An unknown keyword is a UserError naming
    it, with the nearest known ones."""
    allowed = sorted(n for n, k in FLAG_KEYS.items() if not only or k.startswith(only))
    flags = {}
    for name, value in given.items():
        if name not in allowed:
            near = difflib.get_close_matches(name, allowed, n=3)
            hint = f" (did you mean {' or '.join(f'{n}=' for n in near)})" if near else ""
            raise UserError(f"{what} got an unknown setting {name}={hint}; it takes "
                            f"{', '.join(f'{n}=' for n in allowed)}")
        if value is not None:
            flags[FLAG_KEYS[name]] = str(value) if isinstance(value, Path) else value
    names = keyword_names()
    _one_batch(flags, names)
    return flags, names
