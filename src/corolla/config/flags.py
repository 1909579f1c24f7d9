"""The one table where settings meet the config: a command-line flag's destination (its Python
name, which is also the notebook API's keyword) -> the config key it sets, made from the flags
the config's fields are declared with (`config.setting`).

The CLI builds its settings from it, the Python API its keywords, both as one `Given`: the
values by config key and how the user wrote each key, so that errors name what the user typed:
`--epochs` on the command line, `epochs=` from Python.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from corolla.config.schema import SETTINGS
from corolla.errors import UserError

# Destination (and keyword) -> config key, for every key declared with a flag (config.setting).
FLAG_KEYS = {s.keyword: key for key, s in SETTINGS.items() if s.flag}

# Settings that are not config keys but are named in errors: the config file and the run to
# resume (`Given.name("config")`, `Given.name("resume")`).
EXTRA = ("config", "resume")


@dataclass(frozen=True)
class Given:
    """The settings a user gave, read-only: `values` (config key -> value, {"train.epochs": 3};
    `given[key]`, `key in given`, `given.get(key)` read them too) and `names` (key -> how the
    user wrote it: "--epochs" on the command line, "epochs=" from Python), for errors.
    `Given()`: nothing given."""
    values: Mapping[str, Any] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        # Copies: a caller's later change to its dicts is not this value's.
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        object.__setattr__(self, "names", MappingProxyType(dict(self.names)))

    def __getitem__(self, key: str):
        return self.values[key]

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def get(self, key: str, default=None):
        return self.values.get(key, default)

    def name(self, key: str, default: str | None = None) -> str:
        """How the user wrote `key` ("--epochs", "epochs="); unnamed: `default`, else the key."""
        return self.names.get(key, key if default is None else default)

    def written(self, key: str, value, default: str | None = None) -> str:
        """`value` for `key` as the user would write it (`as_written`): `--model x`,
        `model="x"`; `default` as in `name`."""
        return as_written(self.name(key, default), value)

    def only(self, *prefixes: str) -> Given:
        """The values whose keys start with one of `prefixes`, with every name."""
        return Given({k: v for k, v in self.values.items() if k.startswith(prefixes)},
                     self.names)

    def without(self, *keys: str) -> Given:
        """The values but `keys`, with every name."""
        return Given({k: v for k, v in self.values.items() if k not in keys}, self.names)

    def with_values(self, values: Mapping[str, Any]) -> Given:
        """These `values` added (replacing any given for the same keys), with every name."""
        return Given({**self.values, **values}, self.names)

    def with_names(self, names: Mapping[str, str]) -> Given:
        """These spellings added, for settings outside the config (lr-find's --start)."""
        return Given(self.values, {**self.names, **names})


def from_flags(values: dict, flag_names: dict[str, str]) -> Given:
    """The settings of parsed command-line flags: `values` by destination (None: not given),
    `flag_names` destination -> the flag ("--epochs")."""
    flags = {key: values[dest] for dest, key in FLAG_KEYS.items()
             if values.get(dest) is not None}
    names = {key: flag_names[dest] for dest, key in FLAG_KEYS.items() if dest in flag_names}
    names.update({extra: f"--{extra}" for extra in EXTRA})
    return _one_batch(Given(flags, names))


def _one_batch(given: Given) -> Given:
    """`given`, if it sets the batch per replica or for all replicas, not both: with both, one
    of them would be recorded in the run without ever having run."""
    if given.get("train.batch_size") is not None and given.get("train.global_batch_size"):
        raise UserError(f"{given.names['train.batch_size']} (per replica) and "
                        f"{given.names['train.global_batch_size']} (all replicas together) "
                        f"both set the batch; pass one of them")
    return given


def as_written(name: str, value) -> str:
    """A setting as the user wrote it, its `name` from `Given.name`: `--model x` on the
    command line, `model="x"` from Python."""
    return f'{name}"{value}"' if name.endswith("=") else f"{name} {value}"


def keyword_names() -> dict[str, str]:
    """Config key -> "keyword=" for every setting: how errors name them to a Python caller."""
    names = {key: f"{name}=" for name, key in FLAG_KEYS.items()}
    names.update({extra: f"{extra}=" for extra in EXTRA})
    return names


def from_keywords(given: dict, what: str, only: tuple[str, ...] = ()) -> Given:
    """The settings of a Python call's keywords, named "keyword="; `only`: the config key
    prefixes this call takes. An unknown keyword is a UserError naming it, with the nearest
    known ones."""
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
    return _one_batch(Given(flags, keyword_names()))
