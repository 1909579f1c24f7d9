"""A setting declared once: a config field's default together with what the checks, the
command line and the Python API need to know about it, kept in the field's metadata.

    epochs: int = setting(12, low=1, high=MAX_EPOCHS, flag="--epochs", help="{recipe}")

The schema's range and choice checks, `flags.FLAG_KEYS` and the argparse options
(`commands.arguments.option`) are all made from these declarations. A help text is a template:
`{recipe}` (the recipes' defaults), `{value}` (the field's default) and the names a command
passes are filled in where the option is added.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, NamedTuple

from corolla.config.range_test import FIND


class Setting(NamedTuple):
    key: str  # "train.epochs"
    default: Any
    low: float | None  # the range the checks hold it to (None: no bound)
    high: float | None
    choices: tuple | None  # the values the checks (and the flag) take
    flag: str | None  # "--epochs"; None: a config key only
    keyword: str | None  # the flag's destination, also the Python API's keyword
    help: str  # a template (see above)
    argparse: dict  # add_argument's other keywords: type, action, metavar, default


def setting(default: Any, /, *, low: float | None = None, high: float | None = None,
            choices: tuple | None = None, flag: str | None = None, keyword: str | None = None,
            help: str = "", **argparse_keywords) -> Any:
    """A dataclass field for a config key (see the module's docstring); `keyword` defaults to
    the field's name, `argparse_keywords` (type, action, metavar, default) go to add_argument,
    whose type is otherwise the field's (int, float; a str needs none)."""
    metadata = {"low": low, "high": high, "choices": choices, "flag": flag, "keyword": keyword,
                "help": help, "argparse": argparse_keywords}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


_TYPES = {"int": int, "float": float}


def table(root) -> dict[str, Setting]:
    """Config key -> its Setting, for every field of `root`'s sections, in their order."""
    found = {}
    for section in dataclasses.fields(root):
        for f in dataclasses.fields(section.default_factory().__class__):
            meta = f.metadata
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            options = dict(meta.get("argparse", {}))
            if meta.get("flag") and "action" not in options and f.type in _TYPES:
                options.setdefault("type", _TYPES[f.type])
            if meta.get("choices") and meta.get("flag"):
                options["choices"] = meta["choices"]
            found[f"{section.name}.{f.name}"] = Setting(
                f"{section.name}.{f.name}", default, meta.get("low"), meta.get("high"),
                meta.get("choices"), meta.get("flag"),
                (meta.get("keyword") or f.name) if meta.get("flag") else None,
                meta.get("help", ""), options)
    return found


def rate_or_find(text: str):
    """--lr's value: a positive rate, or the word find."""
    if text.strip().lower() == FIND:
        return FIND
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a learning rate (e.g. 3e-4) or {FIND} (the "
                                         f"range test's suggestion), got {text!r}") from None


def duration(text: str) -> str:
    """--time's value, refused when empty (`--time "$BUDGET"` with the variable unset would
    otherwise train the whole recipe); its form is checked with the config
    (`config.duration_seconds`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("takes a duration (90s, 10m, 1.5h), got an empty value")
    return text
