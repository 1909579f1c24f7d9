"""The `corolla` command. Thin: it parses flags and dispatches to `corolla.commands`.

A user mistake ends with one line on stderr and exit status 2 (`commands.errors` makes the
line); Ctrl-C ends with 130 and says how to continue; a bug keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from corolla import __version__
from corolla import config as config_lib
from corolla.config import flags as flags_lib
from corolla.errors import UserError, clear_stop, request_stop


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the usage block too)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _runtime_flags(p: argparse.ArgumentParser) -> None:
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


def _batch_flags(p: argparse.ArgumentParser, note: str = "") -> None:
    g = p.add_argument_group("batch")
    g.add_argument("--batch-size", type=int, help=f"per-replica batch (default 16: the "
                   f"tutorial's 16 x REPLICAS){note}")
    g.add_argument("--global-batch-size", type=int, help=f"fixed global batch, split over the "
                   f"replicas (default: per-replica x replicas){note}")


def _augment_flags(p: argparse.ArgumentParser, recipe: bool = False) -> None:
    from corolla.config import policies

    default = _recipe_default("data.augment") if recipe else \
        f"default: {', '.join(policies.POLICIES['default'])}"
    p.add_argument("--augment", metavar="NAMES|POLICY", help=f"training augmentation: a policy "
                   f"({', '.join(policies.POLICIES)}) or comma-separated names "
                   f"({', '.join(policies.NAMES)}); {default}")
    p.add_argument("--no-augment", dest="augment", action="store_false", default=None,
                   help="train without augmentation (as --augment none)")


def _recipe_default(key: str) -> str:
    """A train flag's default, which the recipe sets: "default: the recipe's; cpu: 32,
    cpu-finetune: 7" (the values of the recipes `--recipe auto` picks on a CPU)."""
    from corolla.config import recipe as recipes

    values = []
    for name in (recipes.AUTO["cpu"], recipes.CPU_FINETUNE):
        config = config_lib.apply(config_lib.RunConfig(), recipes.load(name).values)
        section, _, field = key.partition(".")
        value = getattr(getattr(config, section), field)
        value = ",".join(value) or "none" if isinstance(value, list) else \
            {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
        values.append(f"{name}: {value:g}" if isinstance(value, float) else f"{name}: {value}")
    return f"default: the recipe's; {', '.join(values)}"


def _train_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML file with [data] [model] [train] [runtime] [output]")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run from its last "
                   "completed epoch, with its own config and global batch (runtime flags may "
                   "change)")
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
    defaults = config_lib.RunConfig()
    p.add_argument("--epochs", type=int, help=_recipe_default("train.epochs"))
    p.add_argument("--time", metavar="DURATION", help="train for this long (90s, 10m, 1.5h): "
                   "the recipe's schedule fitted to it, its epochs from a timed probe (not "
                   "with --epochs)")
    p.add_argument("--lr", dest="learning_rate", type=float,
                   help="peak learning rate; " + _recipe_default("train.learning_rate"))
    p.add_argument("--steps-per-epoch", type=int, help="default, or 0: one pass over train")
    p.add_argument("--seed", type=int, help=f"seeds initialisation, order and augmentation "
                   f"(default {defaults.train.seed})")
    p.add_argument("--deterministic", action="store_true", default=None,
                   help="ordered reads and TensorFlow op determinism: the same seed gives a "
                        "bit-identical run on the same machine (slower input)")
    _augment_flags(p, recipe=True)
    p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                   help="keep decoded training images in memory (--no-cache: decode every "
                        "epoch); " + _recipe_default("data.cache"))
    p.add_argument("--skip-bad-records", action="store_true", default=None,
                   help="skip damaged records (images that do not decode, a file's damaged "
                        "tail) and count them per file at the end, instead of stopping")
    p.add_argument("--folds", type=int, metavar="K", help="k-fold: train K models on train+val "
                   "split into K stratified folds (RUN/fold-1 ... fold-K), score their pooled "
                   "out-of-fold predictions, average their test probabilities; default 0 (off)")
    p.add_argument("--runs-dir", help="where run directories go (default: runs)")
    p.add_argument("--name", help="run directory name inside --runs-dir (default: "
                   "<model>-<timestamp>)")
    _recipe_flags(p)


def _recipe_flags(p: argparse.ArgumentParser) -> None:
    from corolla.config import recipe as recipes

    g = p.add_argument_group("recipe and training options (flags override the recipe and "
                             "--config)")
    g.add_argument("--recipe", help=f"auto (default: on CPUs {recipes.CPU_FINETUNE} when "
                   f"pre-trained weights can be had, else {recipes.AUTO['cpu']}; "
                   f"{recipes.AUTO['gpu']} on GPUs and TPUs), a recipe's name "
                   f"({', '.join(recipes.names())}; corolla info --recipes) or a recipe file")
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
    g.add_argument("--frozen-epochs", type=int, help="two-phase fine-tuning: train only the "
                   "head for N epochs (on cached features when the augmentation is none or "
                   "flip), then everything at the rate x --finetune-lr-scale; "
                   + _recipe_default("train.frozen_epochs"))
    g.add_argument("--finetune-lr-scale", type=float,
                   help=_recipe_default("train.finetune_lr_scale"))
    g.add_argument("--unfreeze-fraction", type=float, help="the part of the backbone trained "
                   "once it thaws, from the top (cheaper steps below 1); "
                   + _recipe_default("train.unfreeze_fraction"))
    g.add_argument("--accumulation-steps", type=int, help="average the gradients of N batches "
                   "per update (a larger effective batch when it does not fit)")
    g.add_argument("--early-stopping-patience", type=int, help="stop after N epochs without a "
                   "better val macro F1 (default 0: off)")
    g.add_argument("--class-weight", metavar="none|balanced|FILE", help="weigh the loss per "
                   "class: balanced (inverse class frequency in train) or a file of "
                   "class,weight lines; default none")


def _photo_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("photos", nargs="*", metavar="PATH", help="predict on these photos instead "
                   "of the test split: image files, folders (searched recursively) or CSVs of "
                   "paths; any size, format and mode")
    g = p.add_argument_group("photos (with PATH)")
    g.add_argument("--top-k", type=int, default=5, metavar="K",
                   help="classes listed per photo, likeliest first (default 5)")
    g.add_argument("--json", action="store_true", help="also write the predictions as JSON "
                   "(beside the CSV, with the skipped files)")
    g.add_argument("--strict", action="store_true", help="stop at the first file that does "
                   "not decode (default: skip it, and list it at the end)")


def _size_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 224 or 192,224, got {text!r}")


def _convert_flags(p: argparse.ArgumentParser) -> None:
    from corolla.data.convert import FITS, Settings

    d = Settings()
    p.add_argument("src", metavar="SRC", help="image folder (CLASS/*.jpg, optionally under "
                   "train/ val/ test/; test/ may hold unlabelled files) or a CSV with the "
                   "columns path,label[,split] (paths relative to the CSV's folder); never "
                   "modified")
    p.add_argument("out", metavar="OUT", help="the folder to write (must not exist)")
    p.add_argument("--image-size", action="append", type=_size_list, metavar="S[,S...]",
                   help="output size(s), repeatable: --image-size 192 --image-size 224 or "
                        "192,224 (default 224)")
    p.add_argument("--fit", choices=FITS, default=d.fit, help="crop: short side to S, then the "
                   "centre; pad: long side to S, padded with black (default crop)")
    p.add_argument("--quality", type=int, default=d.quality,
                   help=f"JPEG quality (default {d.quality})")
    p.add_argument("--seed", type=int, default=d.seed, help=f"the split and the order "
                   f"(default {d.seed})")
    p.add_argument("--val-fraction", type=float, default=d.val_fraction, help=f"images "
                   f"split off (stratified by class) for val when SRC has none (default "
                   f"{d.val_fraction})")
    p.add_argument("--test-fraction", type=float, default=d.test_fraction, help=f"the same "
                   f"for test (default {d.test_fraction})")
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="corolla", description="Train, evaluate and submit flower "
                     "classifiers on TPUs, GPUs or CPUs.")
    parser.add_argument("--version", action="version", version=f"corolla {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("info", help="hardware, backend, strategy, replicas, global batch")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--models", action="store_true", help="list the registered models")
    p.add_argument("--recipes", action="store_true", help="list the shipped training recipes")
    _runtime_flags(p)
    _batch_flags(p)

    p = sub.add_parser("demo", help="offline: synthetic petals -> train -> evaluate -> submit")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "corolla"),
                   help="where the synthetic data set is generated (default ~/.cache/corolla)")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--name", default="")
    p.add_argument("--epochs", type=int)
    p.add_argument("--tiny", action="store_true", help="a few dozen images, one epoch (tests)")
    _runtime_flags(p)
    _batch_flags(p)

    p = sub.add_parser("train", help="train on data in the competition layout, then evaluate "
                       "on val and write submission.csv")
    _train_flags(p)
    p.add_argument("--strict", action="store_true", help="copies of images across train, val "
                   "and test (found by the data check run before training) are an error, not "
                   "a warning")
    _batch_flags(p, "; not with --resume: a run keeps its global batch")
    _runtime_flags(p)

    for name, text in (("evaluate", "score a run on val: metrics.json and plots"),
                       ("predict", "write a run's submission.csv for the test split")):
        p = sub.add_parser(name, help=text)
        p.add_argument("run", help="a run directory, e.g. runs/small_cnn-20261122-101500")
        p.add_argument("--data", help="read the data from here instead of the run's data path")
        if name == "predict":
            _photo_flags(p)
            p.add_argument("--out", help="submission file (default: RUN/submission.csv); with "
                           "PATHs, the CSV of their predictions (default for more than "
                           "20 photos or --json: ./RUN_NAME-predictions.csv); never a file of "
                           "the run")
            p.add_argument("--force", action="store_true",
                           help="let --out replace an existing file")
            p.add_argument("--bias", choices=("none", "fitted"), default="none",
                           help="fitted: decide with the per-class offsets of `corolla "
                                "evaluate RUN --fit-bias` (for macro F1); default none (argmax)")
        else:
            p.add_argument("--out", help="folder for metrics.json and the plots (default: the "
                           "run folder; RUN/eval-<data folder>/ for --data elsewhere)")
            p.add_argument("--fit-bias", action="store_true", help="then fit one offset per "
                           "class to the log-probabilities that maximises macro F1 on val (a "
                           "k-fold run: on its out-of-fold predictions) into RUN/bias.json, and "
                           "report the held-out gain")
        p.add_argument("--tta", type=int, default=1, metavar="N",
                       help="test-time augmentation: average the class probabilities of N views "
                            "of each image (the image, its flip, then small zooms, shifts and "
                            "rotations; deterministic); default 1 (none), at most 32")
        _runtime_flags(p)
        _batch_flags(p, " for inference")

    p = sub.add_parser("export", help="a run's model for deployment (SavedModel, LiteRT "
                       "or ONNX) in a folder with classes.txt and export.json, checked against "
                       "model.keras")
    p.add_argument("run", help="a run directory")
    p.add_argument("--format", required=True, choices=("savedmodel", "tflite", "onnx"),
                   help="savedmodel (TensorFlow Serving), tflite (LiteRT: phones, edge) or "
                        "onnx (onnxruntime; needs corolla[export])")
    p.add_argument("--quantize", choices=("none", "dynamic", "float16"), default="none",
                   help="tflite only: dynamic (int8 weights, about 4x smaller) or float16 "
                        "(2x smaller); default none (float32)")
    p.add_argument("--out", help="the folder to write (default: RUN/export-FORMAT[-QUANTIZE]/); "
                   "never an existing one")
    p.add_argument("--check-images", type=int, default=64, metavar="N",
                   help="compare the export with model.keras on N val images (default 64; "
                        "0: no check)")

    p = sub.add_parser("explain", help="why a run's model decided: a Grad-CAM heatmap per "
                       "image (RUN/explain/IMAGE.png)")
    p.add_argument("run", help="a run directory")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files, folders of them "
                   "(searched recursively) or CSVs of paths")
    p.add_argument("--out", help="the folder for the pictures (default: RUN/explain/)")
    p.add_argument("--force", action="store_true", help="replace pictures already there")
    _runtime_flags(p)

    p = sub.add_parser("ensemble", help="blend several runs' saved probabilities, weights chosen "
                       "on val: a new folder with metrics, predictions and submission.csv")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (or other folders "
                   "holding predictions/val.npz) after `corolla evaluate` and `corolla predict`")
    p.add_argument("--weights", default="auto", help="auto (best val macro F1) or one number "
                   "per run, e.g. 0.6,0.4 (normalised to sum to 1); default auto")
    p.add_argument("--out", help="the new folder to write (default: runs/ensemble-<timestamp>); "
                   "never an existing one")

    p = sub.add_parser("convert", help="an image folder or a CSV of path,label -> sharded "
                       "TFRecords in the competition layout (OUT/tfrecords-jpeg-SxS/...)")
    _convert_flags(p)

    p = sub.add_parser("check-data", help="know the data before training: exact and near "
                       "duplicates within and across splits, class counts and imbalance, image "
                       "sizes, files that do not decode")
    p.add_argument("--data", required=True, help="a TFRecord layout, an image folder or a CSV "
                   "of path,label (as --data of train)")
    p.add_argument("--out", metavar="FILE.json", help="write everything found (every group of "
                   "duplicates with ids and paths) into this new JSON file")
    p.add_argument("--strict", action="store_true", help="exit with an error when images have "
                   "copies in another split")

    p = sub.add_parser("check-submission", help="check a submission.csv against a data set's "
                       "test split: header, every test id once, labels in the class range")
    p.add_argument("file", help="the CSV file to check")
    p.add_argument("--data", required=True, help="the data folder (tfrecords-jpeg-SxS/ with a "
                   "test split, and its classes.txt if any)")
    p = sub.add_parser("report", help="write RUN/report.html: metrics, per-class table, every "
                       "picture, config, plan and timings in one file that opens offline")
    p.add_argument("run", help="a run folder after `corolla evaluate`, an eval-* folder or an "
                   "ensemble folder")

    p = sub.add_parser("submit", help="send a run's submission.csv to a Kaggle competition "
                       "(checked first; needs the kaggle package and credentials)")
    p.add_argument("run", help="a run or ensemble folder holding submission.csv (after "
                   "`corolla predict`), or a submission CSV file beside predictions/test.npz")
    p.add_argument("--competition", required=True, metavar="SLUG",
                   help="the competition's name in its URL, e.g. tpu-getting-started")
    p.add_argument("-m", "--message", required=True, help="the submission's description")
    p = sub.add_parser("bench", help="measure the input pipeline: against JPEG decoding "
                       "(bench data), against the model it feeds (bench train)")
    bench = p.add_subparsers(dest="bench", required=True, parser_class=_Parser)
    b = bench.add_parser("data", help="images/s of parse+decode and of the training pipeline "
                         "with augmentation, and their ratio")
    b.add_argument("--data", required=True, help="folder holding tfrecords-jpeg-SxS/")
    b.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read "
                   "(default: the one nearest 192)")
    b.add_argument("--batch-size", type=int, default=128, help="images per batch (default 128)")
    b.add_argument("--batches", type=int, default=30, help="timed batches per round (default 30)")
    _augment_flags(b)
    b = bench.add_parser("train", help="steps/s of the model on the real pipeline against one "
                         "cached batch: is training input-bound?")
    b.add_argument("--data", required=True, help="folder holding tfrecords-jpeg-SxS/")
    b.add_argument("--model", help="registered model name (default small_cnn)")
    b.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read")
    b.add_argument("--steps", type=int, default=20, help="timed steps per round (default 20)")
    _augment_flags(b)
    _batch_flags(b)
    _runtime_flags(b)
    for p in [*sub.choices.values(), *bench.choices.values()]:
        # error messages name a value's flag, not its config key
        # (the first flag of a value: --augment, not the --no-augment that also sets it)
        names = {}
        for a in p._actions:
            if a.option_strings:
                names.setdefault(a.dest, a.option_strings[-1])
        p.set_defaults(flag_names=names)
    return parser


def settings(args: argparse.Namespace) -> tuple[dict, dict]:
    """(config key -> value, config key -> the flag that set it) of the parsed flags."""
    return flags_lib.from_flags(vars(args), getattr(args, "flag_names", {}))


def _info(args) -> int:
    from corolla.commands import info

    if args.recipes:
        info.recipes()
    elif args.models:
        info.models()
    else:
        info.hardware(*settings(args), as_json=args.json)
    return 0


def _demo(args) -> int:
    from corolla.commands import demo

    flags, _ = settings(args)
    if args.epochs is not None:
        flags["train.epochs"] = args.epochs
    run_dir, metrics = demo.run(args.cache_dir, args.runs_dir, tiny=args.tiny, name=args.name,
                                overrides=flags)
    if run_dir is not None:
        from corolla.evaluation.metrics import f1_text

        print(f"demo finished: val {f1_text(metrics)}; everything is in {run_dir}")
    return 0


def _train(args) -> int:
    from corolla.commands import train

    run_dir, _ = train.train(args.config, *settings(args), resume=args.resume,
                             strict=args.strict)
    if run_dir is not None:
        print(f"done: {run_dir}")
    return 0


def _inference(args) -> int:
    if args.command == "evaluate":
        from corolla.commands import evaluate

        evaluate.evaluate(args.run, *settings(args), data=args.data, out=args.out,
                          tta=args.tta, fit_bias=args.fit_bias)
    else:
        from corolla.commands import predict

        if args.photos:
            if args.data:
                raise UserError("--data names a data set's test split; with photo PATHs, leave "
                                "it out")
            predict.predict_photos(args.run, args.photos, *settings(args), top=args.top_k,
                                   out=args.out, as_json=args.json, strict=args.strict,
                                   force=args.force, tta=args.tta, bias=args.bias)
            return 0
        photo_only = [flag for flag, given in (("--json", args.json), ("--strict", args.strict),
                                               ("--top-k", args.top_k != 5)) if given]
        if photo_only:
            raise UserError(f"{photo_only[0]} is for predictions on photos: pass their PATHs "
                            f"after the run (corolla predict RUN photos/)")
        predict.predict(args.run, *settings(args), data=args.data, out=args.out,
                        force=args.force, tta=args.tta, bias=args.bias)
    return 0


def _report(args) -> int:
    from corolla.commands import report

    print(f"wrote {report.report(args.run)}")
    return 0


def _submit(args) -> int:
    from corolla.commands import submit

    submit.submit(args.run, args.competition, args.message)
    return 0


def _ensemble(args) -> int:
    from corolla.commands import ensemble

    ensemble.ensemble_run(args.runs, weights=args.weights, out=args.out)
    return 0


def _export(args) -> int:
    from corolla.commands import export

    export.export(args.run, args.format, out=args.out, quantize=args.quantize,
                  check_images=args.check_images)
    return 0


def _explain(args) -> int:
    from corolla.commands import explain

    explain.explain(args.run, args.images, *settings(args), out=args.out, force=args.force)
    return 0


def _convert(args) -> int:
    from corolla.commands import convert
    from corolla.data.convert import Settings

    sizes = tuple(s for group in args.image_size or [[224]] for s in group)
    convert.convert(args.src, args.out, Settings(
        image_sizes=sizes, fit=args.fit, quality=args.quality, seed=args.seed,
        val_fraction=args.val_fraction, test_fraction=args.test_fraction,
        shard_mb=args.shard_mb, strict=args.strict, workers=args.workers,
        max_megapixels=args.max_megapixels, dedupe=args.dedupe))
    return 0


def _check_data(args) -> int:
    from corolla.commands import check_data

    check_data.check_data(args.data, out=args.out, strict=args.strict)
    return 0


def _check_submission(args) -> int:
    from corolla.commands import check_submission

    check_submission.check_submission(args.file, args.data)
    return 0


def _bench(args) -> int:
    from corolla.commands import bench

    if args.bench == "data":
        bench.data(args.data, args.image_size or 0, args.batch_size,
                   args.augment if args.augment is not None else "default",
                   batches=args.batches)
    else:
        bench.train_command(*settings(args), steps=args.steps)
    return 0


COMMANDS = {"info": _info, "demo": _demo, "train": _train, "evaluate": _inference,
            "predict": _inference, "export": _export, "explain": _explain,
            "ensemble": _ensemble, "convert": _convert, "check-data": _check_data,
            "check-submission": _check_submission, "report": _report, "submit": _submit,
            "bench": _bench}


@contextlib.contextmanager
def _stop_on_signals():
    """SIGTERM (`docker stop`, Kubernetes, Slurm, notebook shutdowns) and SIGHUP (a closed
    terminal) stop a command as Ctrl-C does: the run keeps its last completed epoch and the
    message says how to continue it. Yields the list the received signal is put in; the
    previous handlers and signal mask come back after the block (`main` may run inside a
    larger program)."""
    import signal
    import threading

    received, previous = [], {}

    def stop(signum, frame):
        received.append(signum)
        request_stop(signum)  # for the loops' checks, should this exception be lost
        raise KeyboardInterrupt

    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    if threading.current_thread() is not threading.main_thread():  # Python allows no handler
        names = []
    for name in names:
        signum = getattr(signal, name)
        # A SIGHUP ignored from the start was ignored on purpose (`nohup corolla train ...`
        # must outlive its terminal): it stays ignored.
        if name != "SIGHUP" or signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, stop)
    # A parent may start us with them blocked (some job runners do): a blocked signal never
    # reaches the handler, and the run would train on through `docker stop`.
    unblock = previous and hasattr(signal, "pthread_sigmask")  # POSIX
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, previous) if unblock else None
    unraisable = sys.unraisablehook

    def quiet(what):  # a stop lost in a callback is raised again (check_stop): no traceback
        if not (received and isinstance(what.exc_value, KeyboardInterrupt)):
            unraisable(what)

    sys.unraisablehook = quiet
    try:
        yield received
    finally:
        sys.unraisablehook = unraisable
        clear_stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def main(argv: list[str] | None = None) -> int:
    from corolla.commands.errors import as_user_errors
    from corolla.runtime import tflog

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a flag error (already printed)
        return e.code
    quiet_import = tflog.quiet_tensorflow()
    received = []
    try:
        with _stop_on_signals() as received, quiet_import, as_user_errors():
            code = COMMANDS[args.command](args)
        if received:  # a stop the command never saw: lost, or landed as it ended
            raise KeyboardInterrupt
        return code
    except KeyboardInterrupt as e:
        return _interrupted(received, getattr(e, "run_dir", None))
    except BrokenPipeError:  # `corolla check-data ... | head -1`: the reader has had enough
        return _pipe_closed()
    except UserError as e:
        if received:
            return _interrupted(received)
        print(f"corolla: error: {e}", file=sys.stderr)
        return 2
    except Exception:
        if received:  # a stop that landed in a library which turned it into its own error
            return _interrupted(received)  # (matplotlib's savefig: a ValueError)
        raise


def _pipe_closed() -> int:
    """A closed pipe ends quietly, as `head` expects: standard output goes to /dev/null, so
    that Python's flush at exit finds nothing to fail on, and the status is SIGPIPE's."""
    import os
    import signal

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 128 + getattr(signal, "SIGPIPE", 13)


def _interrupted(received: list[int], run_dir=None) -> int:
    """Every stop ends the same way: one line, and 128 + the signal as the exit status."""
    hint = f"; continue with: corolla train --resume {run_dir}" if run_dir else ""
    print(f"corolla: interrupted{hint}", file=sys.stderr)
    return 128 + (received[0] if received else 2)  # 130 for Ctrl-C (SIGINT), 143: SIGTERM


if __name__ == "__main__":
    sys.exit(main())
