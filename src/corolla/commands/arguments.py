"""The command line's shared parts: the flag groups several commands declare (runtime, batch,
augmentation, a run to score, a run's settings: `train_settings`, which `corolla train` and
`corolla lr-find` declare), and the settings of a parsed command line.

Each command module declares its own flags with these (`add_arguments`); `corolla.cli` builds
the parser from the command modules. A flag that sets a config key is declared on the key's
field (`config.setting`) and added here by `option`; the parsed values are turned into config
keys by the table in `config.flags`, which the Python API's keywords go through too.
"""

from __future__ import annotations

import argparse
import functools
import string

from corolla.config import RunConfig, with_settings
from corolla.config import flags
from corolla.config import policies
from corolla.config import recipe
from corolla.config.schema import SETTINGS
from corolla.data.prepare.settings import FITS, Settings
from corolla.scoring.tta import MAX_VIEWS, NO_TTA


def option(p, key: str, **fill: str) -> None:
    """Adds the flag config `key` is declared with (config.setting) to `p`, a parser or a
    group; `fill`: the help template's names that the command gives ({note}, {default})."""
    declared = SETTINGS[key]
    names = {name for _, name, _, _ in string.Formatter().parse(declared.help) if name}
    texts = {"recipe": lambda: _recipe_default(key), "value": lambda: declared.default,
             "auto_recipes": _auto_recipes, "recipes": lambda: ", ".join(recipe.names())}
    fill = {name: fill[name] if name in fill else texts[name]() for name in names}
    p.add_argument(declared.flag, dest=declared.keyword, help=declared.help.format(**fill),
                   **declared.argparse)


def _auto_recipes() -> str:
    """What --recipe auto picks, for its help."""
    return (f"on CPUs {recipe.CPU_FINETUNE} when pre-trained weights can be had, else "
            f"{recipe.AUTO['cpu']}; {recipe.AUTO['gpu']} on GPUs and TPUs")


def runtime(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("runtime")
    for key in ("runtime.backend", "runtime.strategy", "runtime.precision", "runtime.jit_compile",
                "runtime.steps_per_execution", "runtime.compile_cache"):
        option(g, key)


def batch(p: argparse.ArgumentParser, note: str = "") -> None:
    g = p.add_argument_group("batch")
    option(g, "train.batch_size", note=note)
    option(g, "train.global_batch_size", note=note)


def augment(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--augment and --no-augment; `default`: what the help says when neither is given."""
    option(p, "data.augment",
           default=default or f"default: {', '.join(policies.POLICIES['default'])}")
    p.add_argument("--no-augment", dest=SETTINGS["data.augment"].keyword, action="store_false",
                   default=None, help="train without augmentation (as --augment none)")


def scored_run(p: argparse.ArgumentParser) -> None:
    """The run that evaluate and predict score, and the data they may read instead."""
    p.add_argument("run", help="a run directory, e.g. runs/small_cnn-20261122-101500")
    p.add_argument("--data", help="read the data from here instead of the run's data path")


def tta(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tta", type=int, default=NO_TTA, metavar="N",
                   help="test-time augmentation: average the class probabilities of N views "
                        "of each image (the image, its flip, then small zooms, shifts and "
                        f"rotations; deterministic); default {NO_TTA} (none), at most "
                        f"{MAX_VIEWS}")


def photos(p: argparse.ArgumentParser, top_k: int) -> None:
    """`corolla predict RUN PATH...`'s photos and their flags (`top_k`: the default K)."""
    p.add_argument("photos", nargs="*", metavar="PATH", help="predict on these photos instead "
                   "of the test split: image files, folders (searched recursively) or CSVs of "
                   "paths; any size, format and mode")
    g = p.add_argument_group("photos (with PATH)")
    g.add_argument("--top-k", type=int, default=top_k, metavar="K",
                   help=f"classes listed per photo, likeliest first (default {top_k})")
    g.add_argument("--json", action="store_true", help="also write the predictions as JSON "
                   "(beside the CSV, with the skipped files)")
    g.add_argument("--strict", action="store_true", help="stop at the first file that does "
                   "not decode (default: skip it, and list it at the end)")


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


def settings(args: argparse.Namespace) -> flags.Given:
    """The settings of the parsed flags, each named by the flag that sets it."""
    return flags.from_flags(vars(args), getattr(args, "flag_names", {}))


# -- a run's settings: corolla train's flags, which corolla lr-find declares too ---------

def train_settings(p, lr_find: bool = False) -> None:
    """The flags of a run's settings, `corolla train`'s; `lr_find`: those of a run's settings
    only, for `corolla lr-find` (no --resume, --folds, --strict)."""
    _data_and_model_flags(p, resume=not lr_find)
    _schedule_flags(p)
    _run_flags(p, folds=not lr_find)
    _recipe_flags(p)
    if lr_find:
        batch(p)
        runtime(p)
        return
    p.add_argument("--strict", action="store_true", help="copies of images across train, val "
                   "and test (found by the data check run before training) are an error, not "
                   "a warning")
    batch(p, "; not with --resume: a run keeps its global batch")
    runtime(p)


@functools.cache
def _cpu_recipes() -> tuple[tuple[str, RunConfig], ...]:
    """(name, config) of the shipped recipes `--recipe auto` picks on a CPU, read once: every
    parser built (each `main` call) shows their values in some thirty flags' help."""
    return tuple((name, with_settings(RunConfig(), recipe.load_recipe(name).values))
                 for name in (recipe.AUTO["cpu"], recipe.CPU_FINETUNE))


def _recipe_default(key: str) -> str:
    """A train flag's default, which the recipe sets: "default: the recipe's; cpu: 32,
    cpu-finetune: 7" (the values of the recipes `--recipe auto` picks on a CPU)."""
    values = []
    for name, config in _cpu_recipes():
        section, _, field = key.partition(".")
        value = getattr(getattr(config, section), field)
        value = ",".join(value) or "none" if isinstance(value, list) else \
            {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
        values.append(f"{name}: {value:g}" if isinstance(value, float) else f"{name}: {value}")
    return f"default: the recipe's; {', '.join(values)}"


def _data_and_model_flags(p, resume: bool = True) -> None:
    p.add_argument("--config", help="TOML file with [data] [model] [train] [runtime] [output]")
    if resume:
        p.add_argument("--resume", metavar="RUN", help="continue an interrupted run from its "
                       "last completed epoch, with its own config and global batch (runtime flags "
                       "may change)")
    for key in ("data.path", "data.image_size", "model.name", "model.weights",
                "model.input_size", "train.start_size", "model.train_backbone"):
        option(p, key)


def _schedule_flags(p) -> None:
    for key in ("train.epochs", "train.time_budget", "train.learning_rate",
                "train.steps_per_epoch", "train.seed", "train.deterministic"):
        option(p, key)
    augment(p, _recipe_default("data.augment"))
    option(p, "data.cache")
    option(p, "data.skip_bad_records")


def _run_flags(p, folds: bool = True) -> None:
    keys = ("output.runs_dir", "output.name", "output.track")
    for key in ("train.folds", *keys) if folds else keys:
        option(p, key)


def _recipe_flags(p) -> None:
    g = p.add_argument_group("recipe and training options (flags override the recipe and "
                             "--config)")
    for key in ("train.recipe", "train.schedule", "train.warmup_epochs", "train.optimizer",
                "train.weight_decay", "train.label_smoothing", "model.dropout", "train.ema",
                "train.frozen_epochs", "train.finetune_lr_scale", "train.finetune_warmup_epochs",
                "train.unfreeze_fraction",
                "train.accumulation_steps", "train.early_stopping_patience",
                "train.class_weight", "train.refit"):
        option(g, key)


def conversion(p: argparse.ArgumentParser) -> None:
    """`corolla convert`'s flags: sizes, fit, quality, seed, splits and output (`Settings`)."""
    d = Settings()
    p.add_argument("--image-size", action="append", type=_size_list, metavar="S[,S...]",
                   help="output size(s), repeatable: --image-size 192 --image-size 224 or "
                        "192,224 (default 224)")
    p.add_argument("--fit", choices=FITS, default=d.fit, help="crop: short side to "
                   "S, then the centre; pad: long side to S, padded with black (default crop)")
    p.add_argument("--quality", type=int, default=d.quality,
                   help=f"JPEG quality (default {d.quality})")
    p.add_argument("--seed", type=int, default=d.seed, help=f"the split and the order "
                   f"(default {d.seed})")
    _conversion_split_flags(p, d)
    _conversion_output_flags(p, d)


def _conversion_split_flags(p, d: Settings) -> None:
    p.add_argument("--val-fraction", type=float, default=d.val_fraction, help=f"images "
                   f"split off (stratified by class) for val when SRC has none (default "
                   f"{d.val_fraction})")
    p.add_argument("--test-fraction", type=float, default=d.test_fraction, help=f"the same "
                   f"for test (default {d.test_fraction})")


def _conversion_output_flags(p, d: Settings) -> None:
    p.add_argument("--shard-mb", type=float, default=d.shard_mb, help=f"target file size in "
                   f"MB (default {d.shard_mb:g}; smaller sets get fewer, smaller files)")
    p.add_argument("--workers", type=int, default=0, help="encoding processes (default: "
                   "every core)")
    p.add_argument("--max-megapixels", type=float, default=d.max_megapixels, help=f"the "
                   f"largest image read (default {d.max_megapixels:g}; larger ones are skipped "
                   f"and listed, as unreadable ones are)")
    p.add_argument("--strict", action="store_true", help="stop at the first image that does "
                   "not decode (default: skip it, and list it at the end)")
    p.add_argument("--dedupe", action="store_true", help="keep one image of each group of "
                   "exact copies (the same pixels; the test split's copy when there is one); "
                   "recorded in convert.json")


def _size_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 224 or 192,224, got {text!r}")


def conversion_settings(args: argparse.Namespace) -> Settings:
    """The conversion's `Settings` from `conversion`'s flags."""
    sizes = tuple(s for group in args.image_size or [[224]] for s in group)
    return Settings(image_sizes=sizes, fit=args.fit, quality=args.quality, seed=args.seed,
                    val_fraction=args.val_fraction, test_fraction=args.test_fraction,
                    shard_mb=args.shard_mb, strict=args.strict, workers=args.workers,
                    max_megapixels=args.max_megapixels, dedupe=args.dedupe)
