"""The command line's shared parts: the flag groups several commands declare (runtime, batch,
augmentation, a run to score), and the settings of a parsed command line.

Each command module declares its own flags with these (`add_arguments`); `corolla.cli` builds
the parser from the command modules. The flags that set config keys are turned into them by
the table in `config.flags`, which the Python API's keywords go through too.
"""

from __future__ import annotations

import argparse

from corolla import config as config_lib
from corolla.config import flags as flags_lib
from corolla.config import policies


def runtime(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("runtime")
    g.add_argument("--backend", choices=config_lib.BACKENDS,
                   help="Keras backend (default: auto, or KERAS_BACKEND)")
    g.add_argument("--strategy", choices=config_lib.STRATEGIES,
                   help="distribution strategy (default: auto, from the hardware)")
    g.add_argument("--precision", choices=config_lib.PRECISIONS,
                   help="dtype policy (default: auto, from the hardware)")
    g.add_argument("--jit-compile", choices=config_lib.JIT_COMPILES,
                   help="compile the train step with XLA (default: auto, per accelerator)")
    g.add_argument("--steps-per-execution", type=int, metavar="N",
                   help="train steps per host call (default: 0 = auto, 16 on TPU, 1 elsewhere)")
    g.add_argument("--compile-cache", metavar="FOLDER|off",
                   help="JAX's persistent compilation cache (default: auto = "
                        "~/.cache/corolla/jax-compile, or $COROLLA_CACHE_DIR/jax-compile)")


def batch(p: argparse.ArgumentParser, note: str = "") -> None:
    g = p.add_argument_group("batch")
    g.add_argument("--batch-size", type=int, help=f"per-replica batch (default 16: the "
                   f"tutorial's 16 x REPLICAS){note}")
    g.add_argument("--global-batch-size", type=int, help=f"fixed global batch, split over the "
                   f"replicas (default: per-replica x replicas){note}")


def augment(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--augment and --no-augment; `default`: what the help says when neither is given."""
    default = default or f"default: {', '.join(policies.POLICIES['default'])}"
    p.add_argument("--augment", metavar="NAMES|POLICY", help=f"training augmentation: a policy "
                   f"({', '.join(policies.POLICIES)}) or comma-separated names "
                   f"({', '.join(policies.NAMES)}); {default}")
    p.add_argument("--no-augment", dest="augment", action="store_false", default=None,
                   help="train without augmentation (as --augment none)")


FIND = "find"  # --lr find: the rate found by the range test (`corolla lr-find`)


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


def scored_run(p: argparse.ArgumentParser) -> None:
    """The run that evaluate and predict score, and the data they may read instead."""
    p.add_argument("run", help="a run directory, e.g. runs/small_cnn-20261122-101500")
    p.add_argument("--data", help="read the data from here instead of the run's data path")


def tta(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tta", type=int, default=1, metavar="N",
                   help="test-time augmentation: average the class probabilities of N views "
                        "of each image (the image, its flip, then small zooms, shifts and "
                        "rotations; deterministic); default 1 (none), at most 32")


def name_flags(p: argparse.ArgumentParser) -> None:
    """Records in `p` and the parsers under it which flag sets each value, so that error
    messages name a value's flag, not its config key (the first flag of a value: --augment,
    not the --no-augment that also sets it)."""
    names = {}
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                name_flags(sub)
        elif a.option_strings:
            names.setdefault(a.dest, a.option_strings[-1])
    p.set_defaults(flag_names=names)


def settings(args: argparse.Namespace) -> tuple[dict, dict]:
    """(config key -> value, config key -> the flag that set it) of the parsed flags."""
    return flags_lib.from_flags(vars(args), getattr(args, "flag_names", {}))
