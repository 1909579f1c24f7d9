"""The command line's shared parts: the flag groups several commands declare (runtime, batch,
augmentation, a run to score, a run's settings: `train_settings`, which `corolla train` and
`corolla lr-find` declare), and the settings of a parsed command line.

Each command module declares its own flags with these (`add_arguments`); `corolla.cli` builds
the parser from the command modules. The flags that set config keys are turned into them by
the table in `config.flags`, which the Python API's keywords go through too.
"""

from __future__ import annotations

import argparse

from corolla import config as config_lib
from corolla.config import flags as flags_lib
from corolla.config import policies
from corolla.config import recipe as recipe_lib
from corolla.config.range_test import FIND


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


def _recipe_default(key: str) -> str:
    """A train flag's default, which the recipe sets: "default: the recipe's; cpu: 32,
    cpu-finetune: 7" (the values of the recipes `--recipe auto` picks on a CPU)."""
    values = []
    for name in (recipe_lib.AUTO["cpu"], recipe_lib.CPU_FINETUNE):
        config = config_lib.apply(config_lib.RunConfig(), recipe_lib.load(name).values)
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
    p.add_argument("--data", help="folder (local or gs://) holding tfrecords-jpeg-SxS/, or an "
                   "image folder (one subfolder per class) or a CSV of path,label, converted "
                   "once into a cache (see corolla convert)")
    p.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read (images: "
                   "the size to convert to; default, or 0: the one nearest the input size, or "
                   "the model's)")
    p.add_argument("--model", help="registered model name (corolla info --models), or "
                   "hub:PRESET: a keras-hub preset name or local preset folder; "
                   + _recipe_default("model.name"))
    p.add_argument("--weights", help="none, imagenet (Keras downloads it; a hub preset's own "
                   "weights), a local backbone weights file, or (efficientnet_lite0) a local "
                   "keras-hub preset folder; " + _recipe_default("model.weights"))
    p.add_argument("--input-size", type=int, metavar="S", help="the size the model sees, at "
                   "most: larger images are scaled down to S as they are decoded (0: the "
                   "data's size); " + _recipe_default("model.input_size"))
    p.add_argument("--start-size", type=int, metavar="S", help="progressive resizing: the "
                   "first epochs at S px, growing to the input size over the ramp "
                   "(train.size_ramp_start/end: fractions of the epochs); 0 = off; "
                   + _recipe_default("train.start_size"))
    p.add_argument("--freeze-backbone", dest="train_backbone", action="store_false",
                   default=None, help="train only the classifier head")


def _schedule_flags(p) -> None:
    p.add_argument("--epochs", type=int, help=_recipe_default("train.epochs"))
    p.add_argument("--time", metavar="DURATION", type=duration,
                   help="train for this long (90s, 10m, 1.5h): "
                   "the recipe's schedule fitted to it, its epochs from a timed probe (not "
                   "with --epochs)")
    p.add_argument("--lr", dest="learning_rate", type=rate_or_find,
                   metavar="RATE|find", help="peak learning rate, or find: the suggestion of "
                   "a range test on the run's own model first (corolla lr-find); "
                   + _recipe_default("train.learning_rate"))
    p.add_argument("--steps-per-epoch", type=int, help="default, or 0: one pass over train")
    p.add_argument("--seed", type=int, help=f"seeds initialisation, order and augmentation "
                   f"(default {config_lib.RunConfig().train.seed})")
    p.add_argument("--deterministic", action="store_true", default=None,
                   help="ordered reads and TensorFlow op determinism: the same seed gives a "
                        "bit-identical run on the same machine (slower input)")
    augment(p, _recipe_default("data.augment"))
    p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                   help="keep decoded training images in memory (--no-cache: decode every "
                        "epoch); " + _recipe_default("data.cache"))
    p.add_argument("--skip-bad-records", action="store_true", default=None,
                   help="skip damaged records (images that do not decode, a file's damaged "
                        "tail) and count them per file at the end, instead of stopping")


def _run_flags(p, folds: bool = True) -> None:
    if folds:
        p.add_argument("--folds", type=int, metavar="K", help="k-fold: train K models on "
                       "train+val split into K stratified folds (RUN/fold-1 ... fold-K), score "
                       "their pooled out-of-fold predictions, average their test "
                       "probabilities; default 0 (off)")
    p.add_argument("--runs-dir", help="where run directories go (default: runs)")
    p.add_argument("--name", help="run directory name inside --runs-dir (default: "
                   "<model>-<timestamp>)")
    p.add_argument("--track", choices=config_lib.TRACKERS, help="also send the run (its "
                   "config, every epoch's figures, the final scores, report.html) to MLflow "
                   "(MLFLOW_TRACKING_URI, else RUNS_DIR/mlflow.db) or Weights & Biases (its "
                   "own environment: WANDB_MODE=offline works without a network); default none")


def _recipe_flags(p) -> None:
    g = p.add_argument_group("recipe and training options (flags override the recipe and "
                             "--config)")
    g.add_argument("--recipe", help=f"auto (default: on CPUs {recipe_lib.CPU_FINETUNE} when "
                   f"pre-trained weights can be had, else {recipe_lib.AUTO['cpu']}; "
                   f"{recipe_lib.AUTO['gpu']} on GPUs and TPUs), a recipe's name "
                   f"({', '.join(recipe_lib.names())}; corolla info --recipes) or a recipe file")
    g.add_argument("--schedule", choices=config_lib.SCHEDULES, help="cosine (per step: "
                   "warm-up, cosine decay) or ramp (the tutorial's per epoch: ramp-up, sustain, "
                   "exponential decay)")
    g.add_argument("--warmup-epochs", type=float, help="epochs of linear ramp-up to the peak; "
                   + _recipe_default("train.warmup_epochs"))
    g.add_argument("--optimizer", choices=config_lib.OPTIMIZERS,
                   help=_recipe_default("train.optimizer"))
    g.add_argument("--weight-decay", type=float, help="decoupled weight decay (not on "
                   "normalization scales and offsets, nor biases); "
                   + _recipe_default("train.weight_decay"))
    g.add_argument("--label-smoothing", type=float, help=_recipe_default("train.label_smoothing"))
    g.add_argument("--dropout", type=float, help="dropout before the classifier head; "
                   + _recipe_default("model.dropout"))
    g.add_argument("--ema", action="store_true", default=None, help="keep an exponential moving "
                   "average of the weights: validated, kept and saved instead of the raw ones")
    _phase_flags(g)
    g.add_argument("--accumulation-steps", type=int, help="average the gradients of N batches "
                   "per update (a larger effective batch when it does not fit)")
    g.add_argument("--early-stopping-patience", type=int, help="stop after N epochs without a "
                   "better val macro F1 (default 0: off)")
    g.add_argument("--class-weight", metavar="none|balanced|FILE", help="weigh the loss per "
                   "class: balanced (inverse class frequency in train) or a file of "
                   "class,weight lines; default none")
    g.add_argument("--refit", action="store_true", default=None, help="once validated, train "
                   "the model again on train + val for the epochs found, and predict the test "
                   "split with it (val scores stay the validated model's; --time covers both)")


def _phase_flags(g) -> None:
    g.add_argument("--frozen-epochs", type=int, help="two-phase fine-tuning: train only the "
                   "head for N epochs (on cached features when the augmentation is none or "
                   "flip), then everything at the rate x --finetune-lr-scale; "
                   + _recipe_default("train.frozen_epochs"))
    g.add_argument("--finetune-lr-scale", type=float,
                   help=_recipe_default("train.finetune_lr_scale"))
    g.add_argument("--unfreeze-fraction", type=float, help="the part of the backbone trained "
                   "once it thaws, from the top (cheaper steps below 1); "
                   + _recipe_default("train.unfreeze_fraction"))
